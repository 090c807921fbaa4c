package devhost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
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

// supervise applies the host's rules whenever the handler ends
// (WorkerProcess.OnProcessExited, HttpFunctionInvocationDispatcher): exit 0
// is never restarted; exit 200 is restarted without counting; a crash
// (another code, killed) is counted and restarted, and the third of a chain
// stops the host (StopApplication), which the platform then recycles; a kill
// for a timeout is restarted without counting.
func (in *Instance) supervise() {
	defer in.wg.Done()
	for {
		in.mu.Lock()
		exited, cmd := in.exited, in.cmd
		in.mu.Unlock()
		select {
		case <-in.ctx.Done():
			// The handler started last (stop may have killed the one before).
			_ = cmd.Process.Kill()
			<-exited
			return
		case <-in.recycle:
			in.recycleHost("recycled by the platform")
			continue
		case <-exited:
		}
		if in.ctx.Err() != nil {
			return
		}
		in.mu.Lock()
		timedOut := in.timedOut
		in.mu.Unlock()
		code := cmd.ProcessState.ExitCode() // -1 when killed by a signal
		switch {
		case code == 0:
			in.mu.Lock()
			in.gone = true
			in.setReady(false)
			in.mu.Unlock()
			in.logf("the handler exited with code 0: the host does not restart it (WorkerProcess.OnProcessExited); its listeners go on and every invocation fails until the host is recycled")
			select {
			case <-in.ctx.Done():
				return
			case <-in.recycle:
				in.recycleHost("recycled by the platform")
			}
			continue
		case code == exitRestart:
			in.logf("the handler exited with code %d: restarting it without counting an error (IntentionalRestartExitCode)", code)
		case !timedOut && in.countError():
			in.recycleHost(fmt.Sprintf("Exceeded http worker restart retry count: %d handler errors, each within %s of the previous (the last: %s); the host shut down and its triggers stopped",
				errorBudget, in.host.scale(errorWindow), cmd.ProcessState))
			continue
		}
		in.restarts.Add(1)
		in.host.restarts.Add(1)
		in.logf("handler ended (%s); restarting it", cmd.ProcessState)
		in.restartHandler()
	}
}

func (in *Instance) restartHandler() {
	for in.ctx.Err() == nil {
		if err := in.startHandler(); err != nil {
			in.logf("%v; retrying", err)
			time.Sleep(time.Second)
			continue
		}
		return
	}
}

// recycleHost stops the instance's host (its listeners stop and their calls
// finish, the timer lock is released, the handler is disposed of) and,
// after the recycle delay, starts a fresh one: a new handler, a new crash
// budget ("proactively recycling the Functions Host",
// RpcFunctionInvocationDispatcher; the platform restarts a host that exits).
func (in *Instance) recycleHost(why string) {
	in.mu.Lock()
	in.stopped = why
	in.runCancel()
	if in.ready {
		in.setReady(false)
	}
	cmd, exited := in.cmd, in.exited
	in.mu.Unlock()
	in.logf("%s", why)
	if cmd != nil {
		_ = cmd.Process.Kill()
		<-exited
	}
	in.lwg.Wait()
	delay := in.host.scale(in.host.opts.RecycleDelay)
	in.logf("the platform recycles the host in %s", delay)
	select {
	case <-in.ctx.Done():
		return
	case <-time.After(delay):
	}
	in.mu.Lock()
	in.errors, in.gone, in.stopped = nil, false, ""
	in.mu.Unlock()
	in.newRun()
	in.restartHandler()
	if err := in.awaitReady(); err != nil {
		in.logf("after the recycle: %v", err)
		return
	}
	in.recycles.Add(1)
	in.startListeners()
	in.logf("recycled: a fresh host (handler on 127.0.0.1:%d)", in.port())
}

// countError records a handler error and reports whether the budget is
// spent. As HttpFunctionInvocationDispatcher.AddOrUpdateErrorBucket does, the
// count starts over when an error comes more than 30 minutes after the
// previous one: the budget is for a chain of errors, not a sliding window.
func (in *Instance) countError() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	now := time.Now()
	if n := len(in.errors); n > 0 && now.Sub(in.errors[n-1]) > in.host.scale(errorWindow) {
		in.errors = in.errors[:0]
	}
	in.errors = append(in.errors, now)
	return len(in.errors) >= errorBudget
}

// killForTimeout restarts the handler after an invocation outlived
// functionTimeout; such restarts are not counted as errors.
func (in *Instance) killForTimeout(port int) {
	in.mu.Lock()
	cmd := in.cmd
	mine := in.handlerPort == port
	if mine {
		// The dispatcher is restarting from now on: new invocations wait.
		in.timedOut = true
		if in.ready {
			in.setReady(false)
		}
	}
	in.mu.Unlock()
	if mine && cmd != nil {
		_ = cmd.Process.Kill()
	}
}

// call POSTs an invocation to the handler and judges the answer as the host
// does: 2xx, Content-Type application/json, a JSON object. The host's
// HttpClient would wait functionTimeout + 1 min, but the host stops waiting
// at functionTimeout (+ grace) and restarts the handler, which ends the
// request; here the request carries that deadline.
// A 2xx with an empty or null body never completes: it waits out
// functionTimeout too. Logs of a successful call go to Function.<Name>.User.
func (in *Instance) call(ctx context.Context, function, path string, body []byte) (*result, error) {
	h := in.host
	h.invocations.Add(1)
	out, err := in.roundTrip(ctx, path, body)
	if err != nil {
		h.failures.Add(1)
		return nil, err
	}
	for _, line := range out.logs {
		in.trace(Trace{Category: CategoryUser(function), Level: LevelInformation, Message: line})
	}
	return out, nil
}

// result is what the emulation reads of the host's
// HttpScriptInvocationResult (its ReturnValue, any JSON, is not used): its
// properties match case-insensitively, as Json.NET reads them.
type result struct {
	Outputs json.RawMessage
	Logs    json.RawMessage

	logs []string // Logs as the host reads them
}

// readResult reads an answer as Json.NET reads it into
// HttpScriptInvocationResult: a JSON object whose Outputs, if not null, is an
// object (IDictionary<string, object>) and whose Logs, if not null, is an
// array (List<string>) of strings or other scalars, which become their JSON
// text (JsonTextReader.ReadAsString); anything else fails the call.
func readResult(text []byte) (*result, error) {
	var out result
	if err := json.Unmarshal(text, &out); err != nil {
		return nil, errors.New("it is not a JSON object")
	}
	if o := bytes.TrimSpace(out.Outputs); len(o) > 0 && string(o) != "null" && o[0] != '{' {
		return nil, fmt.Errorf("its Outputs is %s, not an object", clip(o))
	}
	if l := bytes.TrimSpace(out.Logs); len(l) > 0 && string(l) != "null" {
		var lines []json.RawMessage
		if err := json.Unmarshal(l, &lines); err != nil {
			return nil, fmt.Errorf("its Logs is %s, not an array", clip(l))
		}
		for _, line := range lines {
			switch v := bytes.TrimSpace(line); {
			case v[0] == '"':
				var s string
				_ = json.Unmarshal(v, &s)
				out.logs = append(out.logs, s)
			case v[0] == '{' || v[0] == '[':
				return nil, fmt.Errorf("its Logs hold %s, not a string", clip(v))
			case string(v) != "null":
				out.logs = append(out.logs, string(v))
			}
		}
	}
	return &out, nil
}

func (in *Instance) roundTrip(ctx context.Context, path string, body []byte) (*result, error) {
	timeout := in.host.app.FunctionTimeout
	deadline := time.Now().Add(timeout + timeoutGrace)
	port, err := in.currentPort()
	if err != nil {
		wait, cancel := context.WithTimeout(ctx, restartWait)
		port, err = in.readyPort(wait)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("no handler to invoke: %w", err)
		}
	}
	// The host stops waiting at the deadline whatever ctx does; the request
	// ends with it (and the handler is restarted).
	call, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	req, _ := http.NewRequestWithContext(call, http.MethodPost, "http://127.0.0.1:"+strconv.Itoa(port)+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("X-Azure-Functions-InvocationId", uuid.NewString())
	req.Header.Set("X-Azure-Functions-HostVersion", hostVersion)
	req.Header.Set("User-Agent", "Azure-Functions-Host/"+hostVersion)
	var status int
	var ctype string
	var text []byte
	resp, err := in.client.Do(req)
	if err == nil {
		status, ctype = resp.StatusCode, resp.Header.Get("Content-Type")
		text, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err != nil && call.Err() != nil {
		in.logf("%s outlived functionTimeout (%s) and its %s grace: restarting the handler", path, timeout, timeoutGrace)
		in.killForTimeout(port)
		return nil, fmt.Errorf("timeout after %s", timeout)
	}
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			in.markDown(port)
			in.mu.Lock()
			exited := in.exited
			in.mu.Unlock()
			go in.probe(port, exited) // ready again if it was only a hiccup
		}
		return nil, err
	}
	mt, _, _ := mime.ParseMediaType(ctype)
	trimmed := bytes.TrimSpace(text)
	switch {
	case status < 200 || status > 299:
		return nil, fmt.Errorf("status %d: %s", status, clip(text))
	case len(trimmed) == 0 || string(trimmed) == "null":
		// ReadAsAsync gives null and the invocation's result is never set.
		in.logf("%s answered %d with an empty or null body: the host waits out functionTimeout (%s), then restarts the handler", path, status, timeout)
		<-call.Done()
		in.killForTimeout(port)
		return nil, fmt.Errorf("status %d with an empty or null body: timed out after %s", status, timeout)
	case mt != "application/json" && mt != "text/json":
		return nil, fmt.Errorf("Content-Type %q is not application/json", ctype)
	}
	out, err := readResult(text)
	if err != nil {
		return nil, fmt.Errorf("the response is not an invocation result (%v): %s", err, clip(text))
	}
	return out, nil
}

const hostVersion = "4.1036.1.23224"

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// trace files a line with the app's telemetry and echoes it to the
// emulation's log, marked with where it ends up.
func (in *Instance) trace(t Trace) {
	kept, first := in.host.telemetry.record(t)
	if in.host.quiet {
		return
	}
	mark := "→ AI"
	if !kept {
		mark = "(not to AI)" // shown here all the same: only the telemetry filter leaves it out
	}
	fmt.Fprintf(in.host.opts.Log, "%s i%d %s %s [%s]: %s\n", time.Now().Format("15:04:05.000000"), in.ID, mark, t.Category, t.Level, t.Message)
	if first {
		in.logf("%s lines at %s are shown here marked (not to AI): host.json's logging.logLevel (minimum %s) keeps them from Application Insights",
			t.Category, t.Level, in.host.app.Logs.Min(t.Category))
	}
}

// consoleWriter turns the handler's output into console log lines, as the
// host reads stdout and stderr.
type consoleWriter struct {
	in     *Instance
	stderr bool
	mu     sync.Mutex
	buf    []byte
}

func (w *consoleWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := strings.TrimRight(string(w.buf[:i]), "\r")
		w.buf = w.buf[i+1:]
		w.in.trace(Trace{Category: CategoryConsole, Level: consoleLevel(w.stderr, line), Message: line})
	}
}
