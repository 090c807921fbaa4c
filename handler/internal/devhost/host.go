package devhost

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/convoy-dev/convoy/handler/internal/devbus"
	"github.com/convoy-dev/convoy/handler/internal/syncio"
)

// Options configure a Host.
type Options struct {
	AppDir   string            // the staged app (make stage → dist/)
	Settings map[string]string // app settings, as in local.settings.json Values
	Queues   map[string]devbus.QueueProperties
	Port     int // front end port; 0 picks a free one
	// ServiceBusPort is the emulated namespace's AMQP port (plain TCP, as
	// the Service Bus emulator's); 0 picks a free one.
	ServiceBusPort int
	Log            io.Writer // the emulation's and the handler's output; default discard
	// The app runs as Flex Consumption runs it (per-function scaling): each
	// non-HTTP function on instances of its own (group "function:<Name>"),
	// all HTTP functions together on theirs (group "http"); each instance
	// runs its own handler process. MinInstances is every group's always-
	// ready count (default 1; Flex's default is 0, but the emulation keeps
	// every group warm rather than model cold starts). MaxInstances is the
	// app's maximumInstanceCount, the instances of all groups together
	// (default, and at least: the groups × MinInstances, so no scale-out).
	MaxInstances, MinInstances int
	// HTTPConcurrency is the HTTP trigger concurrency per instance
	// (perInstanceConcurrency; default 16, Flex's default for 2048 MB
	// instances): requests beyond it wait for a free slot or a new instance.
	HTTPConcurrency int
	// ScaleInAfter is how long a group's target must stay below its instance
	// count before it loses one (default 5 minutes); RecycleDelay is how long
	// the platform takes to bring back a host that stopped itself (default
	// 30 s). Both are scaled by TimeScale.
	ScaleInAfter, RecycleDelay time.Duration
	// TimeScale multiplies the Service Bus and host durations the emulation
	// models (lock duration, lock renewal, time to live, the 30-minute crash
	// window, the recycle delay, scale-in, the timer's listener lease and
	// its polling) so that tests can compress minutes into seconds; default 1.
	// functionTimeout and sessionIdleTimeout are taken as host.json says.
	TimeScale float64
}

// Function groups (FunctionGroups in the host): all HTTP functions scale
// together; every other function on its own.
const groupHTTP = "http"

// groupOf names the group a function scales with on Flex Consumption.
func groupOf(f Function) string {
	if f.Trigger.Type == "httpTrigger" {
		return groupHTTP
	}
	return "function:" + f.Name
}

// group is one per-function scaling group and its instances.
type group struct {
	name      string
	functions []Function
	instances []*Instance // guarded by Host.mu
	peak      int         // the most instances it ever had; Host.mu
	idleSince time.Time   // scaleOut's own
}

// Host emulates the Functions host running one app on Flex Consumption
// (instances per function group, up to MaxInstances in all), with the
// Service Bus queues its triggers read (package devbus). It is split by
// concern: supervisor.go (one instance's handler process),
// supervisor_restarts.go (the host's process rules), call.go (an
// invocation's round trip), dispatch.go (trigger listeners and scale-out),
// front.go (the HTTP front end), queueapi.go (a read-only view of the
// queues for tools), logs.go (what Application Insights would receive).
type Host struct {
	app       *App
	opts      Options
	quiet     bool // Options.Log discards: the handler's lines are not formatted
	log       *log.Logger
	queues    map[string]*devbus.Queue
	bus       *devbus.Bus
	telemetry *Telemetry
	front     *http.Server
	frontURL  string

	groups      []*group
	nextID      atomic.Int64
	httpWaiting atomic.Int64 // HTTP requests waiting for a free slot
	httpMu      sync.Mutex
	httpFree    chan struct{} // closed and replaced when a slot frees or an instance comes or goes
	timers      timerStore    // timer.go

	mu sync.Mutex

	restarts    atomic.Int64
	invocations atomic.Int64
	failures    atomic.Int64
	calls       atomic.Int64 // invocations in progress
	lockLosses  atomic.Int64
	fault       atomic.Pointer[func(function string, msgs []*devbus.Message) error]

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start loads the app, starts its first instance and waits until its handler
// is ready, then serves the front end; more instances follow as the
// triggers' scale targets ask.
func Start(opts Options) (*Host, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	opts.MinInstances = max(opts.MinInstances, 1)
	if opts.HTTPConcurrency <= 0 {
		opts.HTTPConcurrency = defaultHTTPConcurrency
	}
	if opts.ScaleInAfter <= 0 {
		opts.ScaleInAfter = defaultScaleInAfter
	}
	if opts.RecycleDelay <= 0 {
		opts.RecycleDelay = defaultRecycleDelay
	}
	if opts.TimeScale <= 0 {
		opts.TimeScale = 1
	}
	quiet := opts.Log == io.Discard
	opts.Log = syncio.NewWriter(opts.Log)
	frontLn, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", opts.Port))
	if err != nil {
		return nil, err
	}
	h := &Host{opts: opts, quiet: quiet, log: log.New(opts.Log, "devhost: ", log.Ltime|log.Lmicroseconds), queues: map[string]*devbus.Queue{},
		httpFree: make(chan struct{})}
	h.frontURL = "http://" + frontLn.Addr().String()
	settings := map[string]string{}
	for k, v := range opts.Settings {
		settings[k] = v
	}
	if h.app, err = LoadApp(opts.AppDir, settings); err != nil {
		frontLn.Close()
		return nil, err
	}
	h.telemetry = newTelemetry(h.app.Logs)
	byName := map[string]*group{}
	for _, f := range h.app.Functions {
		name := groupOf(f)
		if byName[name] == nil {
			byName[name] = &group{name: name}
			h.groups = append(h.groups, byName[name])
		}
		byName[name].functions = append(byName[name].functions, f)
	}
	h.opts.MaxInstances = max(h.opts.MaxInstances, len(h.groups)*h.opts.MinInstances)
	for name, p := range opts.Queues {
		p.LockDuration = h.scale(p.LockDuration)
		p.DefaultMessageTimeToLive = h.scale(p.DefaultMessageTimeToLive)
		h.queues[name] = devbus.NewQueue(name, p)
	}
	for _, f := range h.app.Functions {
		if f.Trigger.Type != "serviceBusTrigger" {
			continue
		}
		q := h.queues[f.Trigger.QueueName]
		if q == nil {
			q = devbus.NewQueue(f.Trigger.QueueName, devbus.QueueProperties{})
			h.queues[q.Name] = q
		}
		// As Service Bus would: a session receiver on a queue without
		// sessions (or the reverse) fails.
		if q.Properties().RequiresSession != f.Trigger.IsSessionsEnabled {
			frontLn.Close()
			return nil, fmt.Errorf("function %s: isSessionsEnabled is %v but queue %q has RequiresSession %v",
				f.Name, f.Trigger.IsSessionsEnabled, q.Name, q.Properties().RequiresSession)
		}
	}
	// The handler reaches the queues as it reaches Service Bus in Azure:
	// azservicebus over AMQP, here to the emulated namespace.
	if h.bus, err = devbus.StartBus(fmt.Sprintf("127.0.0.1:%d", opts.ServiceBusPort), h.queues, h.log); err != nil {
		frontLn.Close()
		return nil, fmt.Errorf("the Service Bus emulation: %w", err)
	}
	settings["ServiceBusConnection"] = h.bus.ConnectionString()
	h.opts.Settings = settings
	h.ctx, h.cancel = context.WithCancel(context.Background())
	// The always-ready instances of every group, started together.
	errs := make(chan error, len(h.groups)*opts.MinInstances)
	for _, g := range h.groups {
		for range opts.MinInstances {
			go func() {
				_, err := h.addInstance(g)
				errs <- err
			}()
		}
	}
	var startErr error
	for range len(h.groups) * opts.MinInstances {
		if err := <-errs; err != nil && startErr == nil {
			startErr = err
		}
	}
	if startErr != nil {
		h.Stop()
		frontLn.Close()
		return nil, startErr
	}
	h.front = &http.Server{Handler: h.routes(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = h.front.Serve(frontLn) }()
	h.wg.Add(1)
	go h.scaleOut()
	names := make([]string, len(h.groups))
	for i, g := range h.groups {
		names[i] = g.name
	}
	h.log.Printf("ready at %s (app %s; function groups %s, %d instance(s) each, up to %d in all; time scale %g)", h.frontURL,
		opts.AppDir, strings.Join(names, ", "), h.opts.MinInstances, h.opts.MaxInstances, opts.TimeScale)
	return h, nil
}

// Defaults of Flex Consumption the emulation models (docs/host-contract.md,
// "Flex Consumption").
const (
	defaultHTTPConcurrency = 16 // perInstanceConcurrency for 2048 MB instances
	defaultScaleInAfter    = 5 * time.Minute
)

// addInstance starts a new instance of g and adds it to the group.
func (h *Host) addInstance(g *group) (*Instance, error) {
	in := newInstance(h, int(h.nextID.Add(1)-1), g)
	if err := in.start(); err != nil {
		return nil, err
	}
	h.mu.Lock()
	g.instances = append(g.instances, in)
	g.peak = max(g.peak, len(g.instances))
	h.mu.Unlock()
	h.httpNotify()
	return in, nil
}

// total counts the instances of every group; callers hold h.mu.
func (h *Host) total() int {
	n := 0
	for _, g := range h.groups {
		n += len(g.instances)
	}
	return n
}

// httpNotify wakes HTTP requests waiting for a slot.
func (h *Host) httpNotify() {
	h.httpMu.Lock()
	close(h.httpFree)
	h.httpFree = make(chan struct{})
	h.httpMu.Unlock()
}

// scale applies Options.TimeScale to a modelled duration (negative: no end).
func (h *Host) scale(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return time.Duration(float64(d) * h.opts.TimeScale)
}

// URL is the front end's base URL (functions at /api/…, queues at /devhost/…).
func (h *Host) URL() string { return h.frontURL }

// Queue returns an emulated queue by name, or nil.
func (h *Host) Queue(name string) *devbus.Queue { return h.queues[name] }

// Bus is the emulated namespace's AMQP face.
func (h *Host) Bus() *devbus.Bus { return h.bus }

// ServiceBusConnectionString is what a Service Bus client connects to the
// emulation with (the handler is given it as ServiceBusConnection).
func (h *Host) ServiceBusConnectionString() string { return h.bus.ConnectionString() }

// Instances returns the running instances of every group, group by group
// (in the order of the app's functions), each group's in start order.
func (h *Host) Instances() []*Instance {
	h.mu.Lock()
	defer h.mu.Unlock()
	var all []*Instance
	for _, g := range h.groups {
		all = append(all, g.instances...)
	}
	return all
}

// Group returns the running instances of a function group ("http",
// "function:OrderProcessor", …; groupOf), in start order.
func (h *Host) Group(name string) []*Instance {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, g := range h.groups {
		if g.name == name {
			return append([]*Instance(nil), g.instances...)
		}
	}
	return nil
}

// Groups names the app's function groups, in the order of its functions.
func (h *Host) Groups() []string {
	names := make([]string, len(h.groups))
	for i, g := range h.groups {
		names[i] = g.name
	}
	return names
}

// PeakInstances is the most instances a group has had at once.
func (h *Host) PeakInstances(group string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, g := range h.groups {
		if g.name == group {
			return g.peak
		}
	}
	return 0
}

// groupOfFunction is the group that runs function.
func (h *Host) groupOfFunction(function string) (*group, Function, error) {
	for _, g := range h.groups {
		for _, f := range g.functions {
			if f.Name == function {
				return g, f, nil
			}
		}
	}
	return nil, Function{}, fmt.Errorf("no function %q", function)
}

// Telemetry is what Application Insights would have received.
func (h *Host) Telemetry() *Telemetry { return h.telemetry }

// Restarts counts handler restarts; Invocations and Failures count calls.
func (h *Host) Restarts() int64    { return h.restarts.Load() }
func (h *Host) Invocations() int64 { return h.invocations.Load() }
func (h *Host) Failures() int64    { return h.failures.Load() }

// LockLosses counts settlements that failed because the lock had expired.
func (h *Host) LockLosses() int64 { return h.lockLosses.Load() }

// Stop stops every instance (triggers, then the handler with SIGKILL, as
// the host disposes of it), then the front end.
func (h *Host) Stop() {
	h.cancel()
	h.wg.Wait()
	for _, in := range h.Instances() {
		in.stop()
	}
	if h.front != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = h.front.Shutdown(ctx)
	}
	h.bus.Close()
	if d := h.telemetry.droppedSummary(); d != "" {
		h.log.Printf("lines Application Insights would not have received (host.json logging.logLevel): %s", d)
	}
}

// KillHandler kills the handler of every group's first instance with
// SIGKILL, as a crash of "the" handler would in a one-process host.
func (h *Host) KillHandler() {
	for _, g := range h.groups {
		if ins := h.Group(g.name); len(ins) > 0 {
			ins[0].KillHandler()
		}
	}
}

// InjectFault makes triggered invocations fail, before reaching the
// handler, whenever f returns an error (a broken dependency, a bad
// deployment); nil clears it. Tests use it to dead-letter messages and then
// fix the cause.
func (h *Host) InjectFault(f func(function string, msgs []*devbus.Message) error) {
	if f == nil {
		h.fault.Store(nil)
		return
	}
	h.fault.Store(&f)
}

// Invoke runs a Service Bus triggered function on msgs (one message, or a
// batch for "cardinality": "many") on the first instance of its group and
// reports success. Tests use it to make invocations of one session overlap.
func (h *Host) Invoke(ctx context.Context, function string, msgs []*devbus.Message) error {
	g, f, err := h.groupOfFunction(function)
	if err != nil {
		return err
	}
	ins := h.Group(g.name)
	if len(ins) == 0 {
		return fmt.Errorf("group %s has no instance", g.name)
	}
	return h.invoke(ctx, ins[0], f, msgs)
}

// WaitIdle waits until every queue has had nothing waiting or in flight, and
// no invocation has been running, for settle, or ctx ends.
func (h *Host) WaitIdle(ctx context.Context, settle time.Duration) error {
	since := time.Time{}
	for {
		idle := h.calls.Load() == 0
		for _, q := range h.queues {
			idle = idle && q.Idle()
		}
		switch {
		case !idle:
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
		case time.Since(since) >= settle:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("queues not idle: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// freePort finds a free port for a handler, as the host does; a port handed
// out in the last minute is not handed out again, so that handlers started
// at once (every group's instances) do not get the same one.
func freePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if at, ok := portsGiven[port]; ok && time.Since(at) < time.Minute {
			continue
		}
		portsGiven[port] = time.Now()
		return port, nil
	}
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]time.Time{}
)
