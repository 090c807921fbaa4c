package devhost

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
)

// The host's process rules for its custom handler (docs/host-contract.md,
// "Process and transport"; HttpFunctionInvocationDispatcher, WorkerProcess).
const (
	errorBudget       = 3                // ErrorEventsThreshold: the third error in a chain stops the host
	errorWindow       = 30 * time.Minute // WorkerRestartErrorIntervalThresholdInMinutes; scaled by Options.TimeScale
	readinessTimeout  = 30 * time.Second // the readiness probe's and the worker's initialization timeout
	readinessInterval = 25 * time.Millisecond
	// restartWait: how long an invocation waits for a restarting handler
	// ((ErrorEventsThreshold+1) × initialization timeout, WorkerFunctionInvoker).
	restartWait = (errorBudget + 1) * readinessTimeout
	// timeoutGrace: after functionTimeout the host waits this long for the
	// call before it kills the handler (TimeoutAttribute's GracePeriod).
	timeoutGrace = 2 * time.Second
	// exitRestart is the exit code by which a handler asks to be restarted
	// without it counting as an error (WorkerConstants.IntentionalRestartExitCode).
	exitRestart = 200
	// defaultRecycleDelay: how long the platform takes to bring back a host
	// that stopped itself (StopApplication) with a fresh handler and budget.
	// The host's source does not say (it only exits); scaled by TimeScale.
	defaultRecycleDelay = 30 * time.Second
)

// Instance is one emulated host instance: one handler process, its
// supervision, and the trigger listeners of its function group (on Flex
// Consumption each non-HTTP function runs on instances of its own, the HTTP
// functions together on theirs: FunctionGroupListenerDecorator).
type Instance struct {
	ID    int
	Group string // "http" or "function:<Name>" (FunctionGroups)
	host  *Host
	funcs []Function // the functions whose listeners run here

	ctx    context.Context // ends when the instance stops (scale-in, Host.Stop)
	cancel context.CancelFunc
	wg     sync.WaitGroup // supervise
	lwg    sync.WaitGroup // the current run's listeners

	run       context.Context // the current host run: ends when the host stops itself
	runCancel context.CancelFunc
	inflight  atomic.Int64 // HTTP requests being served (the front end's concurrency cap)

	mu          sync.Mutex
	cmd         *exec.Cmd
	handlerPort int
	ready       bool          // the current handler process answers
	gone        bool          // exited 0: the host does not restart it
	changed     chan struct{} // closed and replaced whenever ready, gone or the port changes
	exited      chan struct{} // closed when the current process ends
	timedOut    bool          // the current process is being killed for a timeout (not counted)
	errors      []time.Time   // handler errors counted towards the budget
	stopped     string        // why the instance's host stopped; "" while it runs
	restarts    atomic.Int64
	recycles    atomic.Int64
	recycle     chan struct{} // Recycle asks supervise to recycle the host
	client      *http.Client  // the host process's one HttpClient for invocations
}

func newInstance(h *Host, id int, g *group) *Instance {
	in := &Instance{ID: id, Group: g.name, funcs: g.functions, host: h, changed: make(chan struct{}),
		recycle: make(chan struct{}, 1), client: invocationClient(h.app.FunctionTimeout)}
	in.ctx, in.cancel = context.WithCancel(h.ctx)
	return in
}

// Functions are the functions whose triggers this instance listens to.
func (in *Instance) Functions() []string {
	names := make([]string, len(in.funcs))
	for i, f := range in.funcs {
		names[i] = f.Name
	}
	return names
}

// runCtx is the context of the host's current run.
func (in *Instance) runCtx() context.Context {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.run
}

// up reports whether the instance's host runs (not stopped, not recycling).
func (in *Instance) up() bool {
	run := in.runCtx()
	return run != nil && run.Err() == nil
}

// invocationClient is the host's HttpClient for a custom handler
// (DefaultHttpWorkerService.CreateHttpClient): one per host process, a plain
// HttpClientHandler whose pool keeps every connection alive (.NET sets no
// per-server limit; idle ones close after a minute), with a timeout of
// functionTimeout + 1 min. Go's default transport would keep only 2 idle
// connections per host and open new ones under concurrent sessions.
func invocationClient(functionTimeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: functionTimeout + time.Minute,
		Transport: &http.Transport{
			MaxIdleConnsPerHost: math.MaxInt,
			IdleConnTimeout:     time.Minute,
		},
	}
}

func (in *Instance) logf(format string, args ...any) {
	in.host.log.Printf("instance %d (%s): "+format, append([]any{in.ID, in.Group}, args...)...)
}

// HandlerPID is the process id of the instance's current handler (0 if none).
func (in *Instance) HandlerPID() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.cmd == nil || in.cmd.Process == nil {
		return 0
	}
	return in.cmd.Process.Pid
}

// Restarts counts the handler restarts of this instance (within a host run
// or across; recycles are not restarts).
func (in *Instance) Restarts() int64 { return in.restarts.Load() }

// Recycles counts how often the platform brought this instance's host back
// after it stopped (a fresh host: new handler, new crash budget).
func (in *Instance) Recycles() int64 { return in.recycles.Load() }

// Recycle stops the instance's host as the platform would (its listeners
// stop, their calls finish, the timer lock is released, the handler is
// killed) and starts it again after the recycle delay. Tests use it to
// move a timer's lock to another instance.
func (in *Instance) Recycle() {
	select {
	case in.recycle <- struct{}{}:
	default:
	}
}

// Stopped says why this instance's host stopped ("" while it runs).
func (in *Instance) Stopped() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.stopped
}

// KillHandler kills the handler process with SIGKILL, as a crash would; the
// host counts it and restarts the handler (or stops at the third error).
func (in *Instance) KillHandler() {
	in.mu.Lock()
	cmd := in.cmd
	in.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
	}
}

// start starts the handler and waits until it answers, then the triggers.
func (in *Instance) start() error {
	in.newRun()
	if err := in.startHandler(); err != nil {
		in.cancel()
		return err
	}
	in.wg.Add(1)
	go in.supervise()
	if err := in.awaitReady(); err != nil {
		in.stop()
		return err
	}
	in.startListeners()
	in.logf("started (handler on 127.0.0.1:%d; functions %s)", in.port(), strings.Join(in.Functions(), ", "))
	return nil
}

func (in *Instance) newRun() {
	in.mu.Lock()
	in.run, in.runCancel = context.WithCancel(in.ctx)
	in.mu.Unlock()
}

func (in *Instance) awaitReady() error {
	wait, cancel := context.WithTimeout(in.ctx, readinessTimeout)
	defer cancel()
	if _, err := in.readyPort(wait); err != nil {
		return fmt.Errorf("instance %d: the handler did not answer GET / within %s", in.ID, readinessTimeout)
	}
	return nil
}

// startListeners starts the listeners of the instance's group for the
// current run; the other functions' listeners are no-ops here
// (FunctionGroupListenerDecorator), though the handler serves every route.
func (in *Instance) startListeners() {
	for _, f := range in.funcs {
		switch f.Trigger.Type {
		case "serviceBusTrigger":
			in.listen(f)
		case "timerTrigger":
			in.timer(f) // timer.go
		}
	}
}

func (in *Instance) port() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.handlerPort
}

// stop stops the triggers and kills the handler: the host disposes of the
// process with Process.Kill (SIGKILL), never SIGTERM.
func (in *Instance) stop() {
	in.cancel()
	in.KillHandler()
	in.wg.Wait()
	in.lwg.Wait()
	in.client.CloseIdleConnections()
}

// drain is scale-in: no new work is sent to the instance, the calls in
// flight finish, then the host stops and disposes of the handler.
func (in *Instance) drain() {
	in.mu.Lock()
	in.runCancel()
	in.mu.Unlock()
	in.lwg.Wait()
	for in.inflight.Load() > 0 && in.host.ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	in.stop()
}

// startHandler starts the handler as the host does: the executable of
// host.json in the app root, with the app settings and the FUNCTIONS_* variables.
func (in *Instance) startHandler() error {
	port, err := freePort()
	if err != nil {
		return err
	}
	app := in.host.app
	desc := app.Host.CustomHandler.Description
	exe := desc.DefaultExecutablePath
	if !filepath.IsAbs(exe) {
		exe = filepath.Join(app.Dir, exe)
	}
	cmd := exec.Command(exe, desc.Arguments...)
	cmd.Dir = app.Dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range in.host.opts.Settings {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env,
		"FUNCTIONS_CUSTOMHANDLER_PORT="+strconv.Itoa(port), "FUNCTIONS_HTTPWORKER_PORT="+strconv.Itoa(port),
		"FUNCTIONS_CUSTOMHANDLER_WORKER_ID="+uuid.NewString(), "FUNCTIONS_APP_ROOT_PATH="+app.Dir,
		"FUNCTIONS_WORKER_RUNTIME=custom")
	cmd.Stdout = &consoleWriter{in: in, stderr: false}
	cmd.Stderr = &consoleWriter{in: in, stderr: true}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start handler %s: %w", exe, err)
	}
	exited := make(chan struct{})
	in.mu.Lock()
	in.cmd, in.handlerPort, in.exited, in.timedOut = cmd, port, exited, false
	in.setReady(false)
	in.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		in.markDown(port)
		close(exited)
	}()
	go in.probe(port, exited)
	return nil
}

// setReady records whether the current handler answers; callers hold in.mu.
func (in *Instance) setReady(ready bool) {
	in.ready = ready
	close(in.changed)
	in.changed = make(chan struct{})
}

// markDown: the handler on port no longer answers (it died, or refused a
// connection). Invocations wait for the restarted handler, as the host
// routes them to the new worker once it is ready.
func (in *Instance) markDown(port int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.handlerPort == port && in.ready {
		in.setReady(false)
	}
}

var errNoHandler = errors.New("the instance has no handler: it exited with code 0 and the host does not restart it")
var errHostStopped = errors.New("the instance's host stopped")

// currentPort is the handler's port if it is ready now.
func (in *Instance) currentPort() (int, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.ready {
		return 0, errNoHandler
	}
	return in.handlerPort, nil
}

// readyPort waits until the handler answers and returns its port.
func (in *Instance) readyPort(ctx context.Context) (int, error) {
	for {
		in.mu.Lock()
		ready, gone, port, changed, run := in.ready, in.gone, in.handlerPort, in.changed, in.run
		in.mu.Unlock()
		switch {
		case gone:
			return 0, errNoHandler
		case ready:
			return port, nil
		}
		select {
		case <-ctx.Done():
			if run.Err() != nil {
				return 0, errHostStopped
			}
			return 0, ctx.Err()
		case <-run.Done():
			return 0, errHostStopped
		case <-changed:
		}
	}
}

// probe sends GET / every 25 ms until any response, as the host does; it
// gives up (and kills the handler) after 30 s.
func (in *Instance) probe(port int, exited chan struct{}) {
	client := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(readinessTimeout); time.Now().Before(deadline); {
		select {
		case <-exited:
			return
		default:
		}
		if resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/", port)); err == nil {
			resp.Body.Close()
			in.mu.Lock()
			if in.handlerPort == port && !in.ready {
				in.setReady(true)
			}
			in.mu.Unlock()
			return
		}
		time.Sleep(readinessInterval)
	}
	in.logf("handler not ready after %s: killing it", readinessTimeout)
	in.KillHandler()
}
