package devhost_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/internal/devbus"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
	"github.com/convoy-dev/convoy/handler/internal/syncio"
)

// Flex Consumption as the emulation models it (docs/host-contract.md,
// "Flex Consumption"), shown with this test binary as the handler (mode
// "flex") of an app of three functions: Hello (HTTP, forwarded, at
// /api/sleep), Work (a Service Bus trigger on queue "work") and Tick (a
// timer on %TickSchedule%). The handler tells on stdout what it receives
// and in which process, so the tests judge the emulation by what the
// handler saw, not by what the emulation says it did.

// runFlexHandler is the handler of mode "flex". FAKE_WORK: "crash" exits 2
// on every Work call, "sleep:<ms>" takes that long. FAKE_TICK_SLOW_FIRST_MS:
// the process's first Tick call takes that long.
func runFlexHandler() {
	pid := os.Getpid()
	var inflight, ticks atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	answer := func(w http.ResponseWriter, body string) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}
	mux.HandleFunc("POST /Work", func(w http.ResponseWriter, _ *http.Request) {
		switch work := os.Getenv("FAKE_WORK"); {
		case work == "crash":
			os.Exit(2)
		case strings.HasPrefix(work, "sleep:"):
			ms, _ := strconv.Atoi(strings.TrimPrefix(work, "sleep:"))
			time.Sleep(time.Duration(ms) * time.Millisecond)
		}
		fmt.Printf("work pid=%d\n", pid)
		answer(w, "{}")
	})
	mux.HandleFunc("POST /Tick", func(w http.ResponseWriter, r *http.Request) {
		var inv struct{ Data map[string]json.RawMessage }
		_ = json.NewDecoder(r.Body).Decode(&inv)
		var timer bytes.Buffer
		_ = json.Compact(&timer, inv.Data["timer"])
		fmt.Printf("tick pid=%d at=%s timer=%s\n", pid, time.Now().UTC().Format(time.RFC3339Nano), timer.String())
		if ms, _ := strconv.Atoi(os.Getenv("FAKE_TICK_SLOW_FIRST_MS")); ticks.Add(1) == 1 && ms > 0 {
			time.Sleep(time.Duration(ms) * time.Millisecond)
		}
		fmt.Printf("tick-done pid=%d at=%s\n", pid, time.Now().UTC().Format(time.RFC3339Nano))
		answer(w, "{}")
	})
	sleep := func(w http.ResponseWriter, r *http.Request) {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		body, _ := io.ReadAll(r.Body)
		fmt.Printf("http pid=%d bytes=%d\n", pid, len(body))
		ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
		time.Sleep(time.Duration(ms) * time.Millisecond)
		answer(w, fmt.Sprintf(`{"pid":%d,"inflight":%d}`, pid, n))
	}
	mux.HandleFunc("GET /api/sleep", sleep)
	mux.HandleFunc("POST /api/sleep", sleep)
	// A port taken meanwhile is a failed start (exit 1, restarted), not a clean exit.
	if err := http.ListenAndServe("127.0.0.1:"+os.Getenv("FUNCTIONS_CUSTOMHANDLER_PORT"), mux); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// flexApp stages the app of mode "flex".
func flexApp(t *testing.T, functionTimeout string) string {
	t.Helper()
	app := t.TempDir()
	self, _ := os.Executable()
	host := map[string]any{"version": "2.0", "customHandler": map[string]any{"description": map[string]any{
		"defaultExecutablePath": self, "arguments": []string{"-test.run=^$"}}, "enableForwardingHttpRequest": true},
		"extensions": map[string]any{"serviceBus": map[string]any{"maxConcurrentCalls": 1}}}
	if functionTimeout != "" {
		host["functionTimeout"] = functionTimeout
	}
	writeJSON(t, filepath.Join(app, "host.json"), host)
	writeJSON(t, filepath.Join(app, "Hello", "function.json"), map[string]any{"bindings": []any{
		map[string]any{"type": "httpTrigger", "direction": "in", "name": "req", "methods": []string{"get", "post"}, "route": "sleep", "authLevel": "anonymous"},
		map[string]any{"type": "http", "direction": "out", "name": "res"}}})
	writeJSON(t, filepath.Join(app, "Work", "function.json"), map[string]any{"bindings": []any{map[string]any{"type": "serviceBusTrigger",
		"direction": "in", "name": "message", "queueName": "work", "connection": "ServiceBusConnection", "dataType": "string"}}})
	writeJSON(t, filepath.Join(app, "Tick", "function.json"), map[string]any{"bindings": []any{map[string]any{"type": "timerTrigger",
		"direction": "in", "name": "timer", "schedule": "%TickSchedule%", "useMonitor": true}}})
	return app
}

// flexHost runs the emulation over the app of mode "flex"; settings are
// added to the app settings (TickSchedule defaults to once a year).
func flexHost(t *testing.T, functionTimeout string, settings map[string]string, edit func(*devhost.Options)) (*devhost.Host, *syncio.Writer) {
	t.Helper()
	log := &syncio.Writer{}
	all := map[string]string{fakeHandlerMode: "flex", "TickSchedule": "0 0 0 1 1 *"}
	for k, v := range settings {
		all[k] = v
	}
	opts := devhost.Options{AppDir: flexApp(t, functionTimeout), Settings: all, Log: log,
		Queues: map[string]devbus.QueueProperties{"work": {MaxDeliveryCount: 100}}}
	if edit != nil {
		edit(&opts)
	}
	return startLogged(t, opts, log), log
}

// helloResult is what the handler answers at /api/sleep.
type helloResult struct {
	Status   int
	PID      int
	Inflight int
	Took     time.Duration
}

func hello(t *testing.T, h *devhost.Host, ms int) helloResult {
	t.Helper()
	start := time.Now()
	resp, err := http.Get(fmt.Sprintf("%s/api/sleep?ms=%d", h.URL(), ms))
	if err != nil {
		t.Error(err)
		return helloResult{}
	}
	defer resp.Body.Close()
	out := helloResult{Status: resp.StatusCode, Took: time.Since(start)}
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return out
}

// pidsSaid collects the pids of the handler's stdout lines "<what> pid=N".
func pidsSaid(log, what string) map[int]int {
	pids := map[int]int{}
	for _, m := range regexp.MustCompile(`\]: `+what+` pid=(\d+)`).FindAllStringSubmatch(log, -1) {
		pid, _ := strconv.Atoi(m[1])
		pids[pid]++
	}
	return pids
}

func waitFor(t *testing.T, what string, limit time.Duration, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, limit)
		}
	}
}

// TestFlexGroups: each non-HTTP function runs in its own handler process,
// the HTTP functions in another (per-function scaling): the process that
// answers HTTP, the one that runs Work and the one the timer fires in are
// three different processes, and each is the one its group reports, so
// state one handler keeps in memory is invisible to the others.
func TestFlexGroups(t *testing.T) {
	t.Parallel()
	h, log := flexHost(t, "", map[string]string{"TickSchedule": "*/1 * * * * *"}, nil)
	if got := strings.Join(h.Groups(), " "); got != "http function:Tick function:Work" {
		t.Fatalf("groups %q", got)
	}
	group := func(name string) *devhost.Instance {
		ins := h.Group(name)
		if len(ins) != 1 {
			t.Fatalf("group %s has %d instances, want 1", name, len(ins))
		}
		return ins[0]
	}
	httpIn, work, tick := group("http"), group("function:Work"), group("function:Tick")
	if strings.Join(work.Functions(), ",") != "Work" || strings.Join(httpIn.Functions(), ",") != "Hello" || work.Group != "function:Work" {
		t.Fatalf("functions: http %v, work %v (%s)", httpIn.Functions(), work.Functions(), work.Group)
	}
	h.Queue("work").Send([]devbus.Message{{MessageID: "m-1", Body: []byte(`{}`)}})
	answered := hello(t, h, 0)
	waitFor(t, "Work call and Tick firing", 5*time.Second, func() bool {
		s := log.String()
		return len(pidsSaid(s, "work")) > 0 && len(pidsSaid(s, "tick")) > 0
	})
	s := log.String()
	workPIDs, tickPIDs, httpPIDs := pidsSaid(s, "work"), pidsSaid(s, "tick"), pidsSaid(s, "http")
	if answered.Status != 200 || len(httpPIDs) != 1 || httpPIDs[answered.PID] != 1 || answered.PID != httpIn.HandlerPID() {
		t.Fatalf("HTTP answered %+v by pids %v; the http group's handler is %d", answered, httpPIDs, httpIn.HandlerPID())
	}
	if len(workPIDs) != 1 || workPIDs[work.HandlerPID()] != 1 {
		t.Fatalf("Work ran in pids %v; its group's handler is %d", workPIDs, work.HandlerPID())
	}
	if len(tickPIDs) != 1 || tickPIDs[tick.HandlerPID()] == 0 {
		t.Fatalf("Tick fired in pids %v; its group's handler is %d", tickPIDs, tick.HandlerPID())
	}
	if answered.PID == work.HandlerPID() || answered.PID == tick.HandlerPID() || work.HandlerPID() == tick.HandlerPID() {
		t.Fatalf("pids http %d, work %d, tick %d: want three processes", answered.PID, work.HandlerPID(), tick.HandlerPID())
	}
}

// TestFlexScaleOutAddsUp: a backlog scales Work out on its own target
// (one message per instance: maxConcurrentCalls 1) while the other groups
// keep one instance each, and the instances of all groups together stay
// within MaxInstances (4: Work gets 2); once idle, Work scales back in.
func TestFlexScaleOutAddsUp(t *testing.T) {
	t.Parallel()
	h, log := flexHost(t, "", map[string]string{"FAKE_WORK": "sleep:200"}, func(o *devhost.Options) {
		o.MaxInstances, o.TimeScale = 4, 0.005 // scale-in after 1.5 s idle
	})
	var msgs []devbus.Message
	for i := range 20 {
		msgs = append(msgs, devbus.Message{MessageID: fmt.Sprintf("m-%d", i), Body: []byte(`{}`)})
	}
	h.Queue("work").Send(msgs)
	most := 0
	for h.Queue("work").Stats().Active > 0 || len(pidsSaid(log.String(), "work")) == 0 {
		most = max(most, len(h.Instances()))
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.WaitIdle(ctx, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	pids := pidsSaid(log.String(), "work")
	total := 0
	for _, n := range pids {
		total += n
	}
	if len(pids) != 2 || total != 20 || most > 4 || len(h.Group("http")) != 1 || len(h.Group("function:Tick")) != 1 {
		t.Fatalf("Work ran in %d processes (%v), at most %d instances in all, http %d, Tick %d: want 2 Work processes within 4 instances",
			len(pids), pids, most, len(h.Group("http")), len(h.Group("function:Tick")))
	}
	waitFor(t, "scale-in of Work", 10*time.Second, func() bool { return len(h.Group("function:Work")) == 1 })
	if n := len(h.Instances()); n != 3 {
		t.Fatalf("%d instances after scale-in, want 3", n)
	}
}

// TestCrashBudgetTakesDownOnlyItsGroup: Work's handler crashes on every
// call; its host stops at the third crash and is recycled later, while the
// HTTP group's handler goes on answering, never restarted.
func TestCrashBudgetTakesDownOnlyItsGroup(t *testing.T) {
	t.Parallel()
	h, _ := flexHost(t, "", map[string]string{"FAKE_WORK": "crash"}, func(o *devhost.Options) { o.RecycleDelay = 3 * time.Second })
	httpIn, work := h.Group("http")[0], h.Group("function:Work")[0]
	pid := httpIn.HandlerPID()
	h.Queue("work").Send([]devbus.Message{{MessageID: "m-1", Body: []byte(`{}`)}})
	waitFor(t, "stop of Work's host", 10*time.Second, func() bool { return work.Stopped() != "" })
	for range 3 {
		if r := hello(t, h, 0); r.Status != 200 || r.PID != pid {
			t.Fatalf("HTTP while Work's host is down: %+v, want 200 from pid %d", r, pid)
		}
	}
	if httpIn.Restarts() != 0 || httpIn.Stopped() != "" || httpIn.HandlerPID() != pid || work.Restarts() != 2 {
		t.Fatalf("http: %d restarts, stopped %q; work: %d restarts", httpIn.Restarts(), httpIn.Stopped(), work.Restarts())
	}
}

// TestForwardedHTTPTimeout: functionTimeout (1.5 s here) applies to
// forwarded HTTP: a call past it is answered 500 at the timeout, and 2 s
// later (the grace) the handler is killed and restarted, failing the
// instance's other call in flight, which would have succeeded before its
// own timeout; other groups are untouched.
func TestForwardedHTTPTimeout(t *testing.T) {
	t.Parallel()
	h, _ := flexHost(t, "00:00:01.5", nil, nil)
	httpIn, work := h.Group("http")[0], h.Group("function:Work")[0]
	pid, workPID := httpIn.HandlerPID(), work.HandlerPID()
	var wg sync.WaitGroup
	var slow, victim helloResult
	wg.Add(2)
	go func() { defer wg.Done(); slow = hello(t, h, 60000) }()
	go func() {
		defer wg.Done()
		time.Sleep(2500 * time.Millisecond) // in flight when the kill comes at 1.5 + 2 s
		victim = hello(t, h, 1400)
	}()
	wg.Wait()
	if slow.Status != 500 || slow.Took < 1500*time.Millisecond || slow.Took > 2500*time.Millisecond {
		t.Fatalf("the call past functionTimeout: %+v, want 500 after 1.5 s", slow)
	}
	if victim.Status != 500 || victim.Took > 1350*time.Millisecond {
		t.Fatalf("the call in flight at the kill: %+v, want 500 when the handler was killed", victim)
	}
	waitFor(t, "restarted handler", 5*time.Second, func() bool { return httpIn.Restarts() == 1 })
	if r := hello(t, h, 0); r.Status != 200 || r.PID == pid || r.PID != httpIn.HandlerPID() {
		t.Fatalf("after the restart: %+v (old pid %d)", r, pid)
	}
	if work.HandlerPID() != workPID || work.Restarts() != 0 {
		t.Fatal("Work's handler was restarted too")
	}
}

// TestRequestBodyLimit: the front end refuses a body above 100 MB
// (ScriptConstants.DefaultMaxRequestBodySize) with 413 before the handler
// sees anything; smaller bodies are forwarded.
func TestRequestBodyLimit(t *testing.T) {
	t.Parallel()
	h, log := flexHost(t, "", nil, nil)
	post := func(n int64) int {
		req, _ := http.NewRequest(http.MethodPost, h.URL()+"/api/sleep", io.LimitReader(zeros{}, n))
		req.ContentLength = n
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST %d bytes: %v", n, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post(100*1024*1024 + 1); got != 413 || strings.Contains(log.String(), "http pid=") {
		t.Fatalf("a body of 100 MB + 1: status %d, handler log %v; want 413 and nothing forwarded", got, pidsSaid(log.String(), "http"))
	}
	if got := post(1024); got != 200 {
		t.Fatalf("a body of 1 KiB: status %d", got)
	}
	// The handler's line comes through its stdout, which the host reads
	// apart from the response: it may follow the answer by a moment.
	waitFor(t, "the handler's line for the 1 KiB body", 10*time.Second, func() bool { return strings.Contains(log.String(), "bytes=1024") })
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestFunctionTimeoutDefault: without functionTimeout in host.json the
// host uses 30 minutes on Flex Consumption (functions-scale.md, "Function
// app timeout duration"; ScriptJobHostOptionsSetup).
func TestFunctionTimeoutDefault(t *testing.T) {
	t.Parallel()
	app, err := devhost.LoadApp(flexApp(t, ""), map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if app.FunctionTimeout != 30*time.Minute {
		t.Fatalf("functionTimeout %s, want 30m", app.FunctionTimeout)
	}
}

// TestHTTPConcurrency: an HTTP instance takes 16 requests at once by
// default (Flex's HTTP concurrency for 2048 MB instances); with no room to
// scale out, the rest wait and run when slots free. With room (and a
// limit of 2), the HTTP group scales out instead, each process still
// holding at most 2.
func TestHTTPConcurrency(t *testing.T) {
	t.Parallel()
	burst := func(h *devhost.Host, n, ms int) []helloResult {
		out := make([]helloResult, n)
		var wg sync.WaitGroup
		for i := range out {
			wg.Add(1)
			go func() { defer wg.Done(); out[i] = hello(t, h, ms) }()
		}
		wg.Wait()
		return out
	}
	peak := func(rs []helloResult) (map[int]int, time.Duration) {
		most := map[int]int{}
		var slowest time.Duration
		for _, r := range rs {
			if r.Status != 200 {
				t.Fatalf("answer %+v", r)
			}
			most[r.PID] = max(most[r.PID], r.Inflight)
			slowest = max(slowest, r.Took)
		}
		return most, slowest
	}
	h, _ := flexHost(t, "", nil, nil)
	most, slowest := peak(burst(h, 24, 500))
	if len(most) != 1 || most[h.Group("http")[0].HandlerPID()] != 16 || slowest < 1000*time.Millisecond {
		t.Fatalf("24 requests of 0.5 s on one instance: most in flight per pid %v, slowest %s; want 16 at once, the rest after", most, slowest)
	}
	h2, _ := flexHost(t, "", nil, func(o *devhost.Options) { o.HTTPConcurrency, o.MaxInstances = 2, 6 })
	most, _ = peak(burst(h2, 6, 3000)) // long enough for new instances to start and take some
	for pid, n := range most {
		if n > 2 {
			t.Fatalf("pid %d held %d requests at once, limit 2", pid, n)
		}
	}
	if len(most) < 2 || h2.PeakInstances("http") < 2 {
		t.Fatalf("6 requests with a limit of 2: pids %v, at most %d HTTP instances; want a scale-out", most, h2.PeakInstances("http"))
	}
}
