package devhost

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a Host.
type Options struct {
	AppDir   string            // the staged app (make stage → dist/)
	Settings map[string]string // app settings, as in local.settings.json Values
	Queues   map[string]QueueProperties
	Port     int // front end port; 0 picks a free one
	// ServiceBusPort is the emulated namespace's AMQP port (plain TCP, as
	// the Service Bus emulator's); 0 picks a free one.
	ServiceBusPort int
	Log            io.Writer // the emulation's and the handler's output; default discard
	// MaxInstances caps target-based scale-out (default 1): each instance
	// runs its own handler process and competes for sessions and messages.
	// MinInstances are started up front (default 1; at most MaxInstances).
	MaxInstances, MinInstances int
	// TimeScale multiplies the Service Bus and host durations the emulation
	// models (lock duration, lock renewal, time to live, the 30-minute crash
	// window) so that tests can compress minutes into seconds; default 1.
	// functionTimeout and sessionIdleTimeout are taken as host.json says.
	TimeScale float64
}

// Host emulates the Functions host running one app on up to MaxInstances
// instances, with the Service Bus queues its triggers read. It is split by
// concern: supervisor.go (one instance's handler process and the host's
// process rules), dispatch.go (trigger listeners and scale-out), front.go
// (the HTTP front end), queueapi.go (the queues for senders and tools),
// logs.go (what Application Insights would receive).
type Host struct {
	app       *App
	opts      Options
	quiet     bool // Options.Log discards: the handler's lines are not formatted
	log       *log.Logger
	queues    map[string]*Queue
	bus       *Bus
	telemetry *Telemetry
	front     *http.Server
	frontURL  string
	next      atomic.Int64 // round robin of HTTP requests over instances

	mu        sync.Mutex
	instances []*Instance

	restarts    atomic.Int64
	invocations atomic.Int64
	failures    atomic.Int64
	calls       atomic.Int64 // invocations in progress
	lockLosses  atomic.Int64
	fault       atomic.Pointer[func(function string, msgs []*Message) error]

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
	opts.MaxInstances = max(opts.MaxInstances, opts.MinInstances, 1)
	opts.MinInstances = max(opts.MinInstances, 1)
	if opts.TimeScale <= 0 {
		opts.TimeScale = 1
	}
	quiet := opts.Log == io.Discard
	opts.Log = &syncWriter{w: opts.Log}
	frontLn, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", opts.Port))
	if err != nil {
		return nil, err
	}
	h := &Host{opts: opts, quiet: quiet, log: log.New(opts.Log, "devhost: ", log.Ltime|log.Lmicroseconds), queues: map[string]*Queue{}}
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
	for name, p := range opts.Queues {
		p.LockDuration = h.scale(p.LockDuration)
		p.DefaultMessageTimeToLive = h.scale(p.DefaultMessageTimeToLive)
		h.queues[name] = NewQueue(name, p)
	}
	for _, f := range h.app.Functions {
		if f.Trigger.Type != "serviceBusTrigger" {
			continue
		}
		q := h.queues[f.Trigger.QueueName]
		if q == nil {
			q = NewQueue(f.Trigger.QueueName, QueueProperties{})
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
	if h.bus, err = StartBus(fmt.Sprintf("127.0.0.1:%d", opts.ServiceBusPort), h.queues, h.log); err != nil {
		frontLn.Close()
		return nil, fmt.Errorf("the Service Bus emulation: %w", err)
	}
	settings["ServiceBusConnection"] = h.bus.ConnectionString()
	h.opts.Settings = settings
	h.ctx, h.cancel = context.WithCancel(context.Background())
	for i := range opts.MinInstances {
		in := newInstance(h, i)
		if err := in.start(); err != nil {
			h.Stop()
			frontLn.Close()
			return nil, err
		}
		h.instances = append(h.instances, in)
	}
	h.front = &http.Server{Handler: h.routes(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = h.front.Serve(frontLn) }()
	h.wg.Add(1)
	go h.scaleOut()
	h.log.Printf("ready at %s (app %s, up to %d instance(s), time scale %g)", h.frontURL, opts.AppDir, opts.MaxInstances, opts.TimeScale)
	return h, nil
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
func (h *Host) Queue(name string) *Queue { return h.queues[name] }

// Bus is the emulated namespace's AMQP face.
func (h *Host) Bus() *Bus { return h.bus }

// ServiceBusConnectionString is what a Service Bus client connects to the
// emulation with (the handler is given it as ServiceBusConnection).
func (h *Host) ServiceBusConnectionString() string { return h.bus.ConnectionString() }

// Instances returns the instances started so far, in order.
func (h *Host) Instances() []*Instance {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*Instance(nil), h.instances...)
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
	if d := h.telemetry.DroppedSummary(); d != "" {
		h.log.Printf("lines Application Insights would not have received (host.json logging.logLevel): %s", d)
	}
}

// KillHandler kills the first instance's handler with SIGKILL, as a crash.
func (h *Host) KillHandler() { h.Instances()[0].KillHandler() }

// InjectFault makes triggered invocations fail, before reaching the
// handler, whenever f returns an error (a broken dependency, a bad
// deployment); nil clears it. Tests use it to dead-letter messages and then
// fix the cause.
func (h *Host) InjectFault(f func(function string, msgs []*Message) error) {
	if f == nil {
		h.fault.Store(nil)
		return
	}
	h.fault.Store(&f)
}

// Invoke runs a Service Bus triggered function on msgs (one message, or a
// batch for "cardinality": "many") on the first instance and reports
// success. Tests use it to make invocations of one session overlap.
func (h *Host) Invoke(ctx context.Context, function string, msgs []*Message) error {
	for _, f := range h.app.Functions {
		if f.Name == function {
			return h.invoke(ctx, h.Instances()[0], f, msgs)
		}
	}
	return fmt.Errorf("no function %q", function)
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

// syncWriter serialises writes from the emulation's many goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
