package devhost_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/internal/devbus"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
	"github.com/convoy-dev/convoy/handler/internal/syncio"
)

// fakeHandlerMode, when set, makes this test binary a misbehaving custom
// handler instead of running tests (see TestMain).
const fakeHandlerMode = "DEVHOST_FAKE_HANDLER"

// runFakeHandler answers GET / and every invocation the way mode says.
func runFakeHandler(mode string) {
	if mode == "flex" {
		runFlexHandler() // flex_test.go
		return
	}
	// Tell on stdout if the host ever sends SIGTERM (it must not: it kills).
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	go func() {
		<-terms
		fmt.Println("fake handler: got SIGTERM")
		os.Exit(3)
	}()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("POST /", func(w http.ResponseWriter, _ *http.Request) {
		switch mode {
		case "text": // Go's default content type when none is set
			_, _ = w.Write([]byte("ok"))
		case "badjson":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte("{not json"))
		case "exit0": // a handler that ends "cleanly" while the host needs it
			os.Exit(0)
		case "crash":
			os.Exit(2)
		case "exit200": // asks the host for a restart
			os.Exit(200)
		case "empty": // 200 with no body: the host never completes the call
			w.Header().Set("Content-Type", "application/json")
		case "null":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte("null"))
		case "slow": // outlives functionTimeout
			time.Sleep(time.Minute)
		case "badlogs": // Json.NET cannot read a string into List<string>
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"Outputs":{},"Logs":"one line"}`))
		case "badoutputs": // nor an array into IDictionary<string, object>
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"Outputs":[1],"Logs":[]}`))
		case "looselogs": // names in any case, scalars read as their text
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"outputs":null,"logs":["a",5,true,null]}`))
		case "status":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"Logs":["lost"]}`))
		default: // "good", "slowstart"
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			_, _ = w.Write([]byte(`{}`))
		}
	})
	if mode == "slowstart" { // takes a while before it listens, as a cold start does
		time.Sleep(700 * time.Millisecond)
	}
	// A port taken meanwhile is a failed start (exit 1, restarted), not a clean exit.
	if err := http.ListenAndServe("127.0.0.1:"+os.Getenv("FUNCTIONS_CUSTOMHANDLER_PORT"), mux); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// TestResponseValidation: the emulation judges answers as the host does:
// anything but a 2xx application/json JSON body fails the invocation, and the
// message comes back until it is dead-lettered.
func TestResponseValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode string
		ok   bool
	}{{"good", true}, {"looselogs", true}, {"text", false}, {"badjson", false}, {"status", false}, {"badlogs", false}, {"badoutputs", false}} {
		t.Run(tc.mode, func(t *testing.T) {
			h := fakeHost(t, tc.mode, "")
			dead := drain(t, h)
			if tc.ok && (len(dead) != 0 || h.Failures() != 0) {
				t.Fatalf("a valid answer failed: %d dead letters, %d failures", len(dead), h.Failures())
			}
			if !tc.ok && (len(dead) != 1 || dead[0].DeliveryCount != 3 || h.Failures() != 3) {
				t.Fatalf("answer %q: dead letters %+v, %d failures; want the message dead-lettered after 3 failed deliveries", tc.mode, dead, h.Failures())
			}
		})
	}
}

// fakeHost runs the emulation over this test binary as a handler in mode,
// with one queue "work" (MaxDeliveryCount 3 unless given) holding one message.
func fakeHost(t *testing.T, mode, functionTimeout string, maxDelivery ...int) *devhost.Host {
	t.Helper()
	return fakeHostLog(t, mode, functionTimeout, &syncio.Writer{}, maxDelivery...)
}

// fakeHostLog is fakeHost writing the emulation's log to log.
func fakeHostLog(t *testing.T, mode, functionTimeout string, log *syncio.Writer, maxDelivery ...int) *devhost.Host {
	t.Helper()
	return fakeHostOpts(t, mode, functionTimeout, log, nil, maxDelivery...)
}

// fakeHostWith is fakeHost with the emulation's options edited.
func fakeHostWith(t *testing.T, mode, functionTimeout string, edit func(*devhost.Options), maxDelivery ...int) *devhost.Host {
	t.Helper()
	return fakeHostOpts(t, mode, functionTimeout, &syncio.Writer{}, edit, maxDelivery...)
}

func fakeHostOpts(t *testing.T, mode, functionTimeout string, log *syncio.Writer, edit func(*devhost.Options), maxDelivery ...int) *devhost.Host {
	t.Helper()
	opts := devhost.Options{AppDir: fakeApp(t, functionTimeout), Settings: map[string]string{fakeHandlerMode: mode},
		Queues: map[string]devbus.QueueProperties{"work": {MaxDeliveryCount: append(maxDelivery, 3)[0]}}, Log: log}
	if edit != nil {
		edit(&opts)
	}
	h := startLogged(t, opts, log)
	h.Queue("work").Send([]devbus.Message{{MessageID: "m-1", Body: []byte(`{"a":1}`)}})
	return h
}

// startLogged starts the emulation with opts, stops it when the test ends,
// and shows the end of its log if the test failed.
func startLogged(t *testing.T, opts devhost.Options, log *syncio.Writer) *devhost.Host {
	t.Helper()
	h, err := devhost.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.Stop()
		if t.Failed() {
			t.Logf("emulation log:\n%s", tail(log.String(), 6144))
		}
	})
	return h
}

// fakeApp stages an app whose handler is this test binary and whose one
// function Work is triggered by the queue "work".
func fakeApp(t *testing.T, functionTimeout string) string {
	t.Helper()
	app := t.TempDir()
	self, _ := os.Executable()
	host := map[string]any{"version": "2.0", "customHandler": map[string]any{"description": map[string]any{
		"defaultExecutablePath": self, "arguments": []string{"-test.run=^$"}}}}
	if functionTimeout != "" {
		host["functionTimeout"] = functionTimeout
	}
	fn := map[string]any{"bindings": []any{map[string]any{"type": "serviceBusTrigger", "direction": "in", "name": "message",
		"queueName": "work", "connection": "ServiceBusConnection", "dataType": "string"}}}
	writeJSON(t, filepath.Join(app, "host.json"), host)
	writeJSON(t, filepath.Join(app, "Work", "function.json"), fn)
	return app
}

// drain waits until the queue is idle and returns its dead letters.
func drain(t *testing.T, h *devhost.Host) []devbus.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.WaitIdle(ctx, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	return h.Queue("work").DeadLetters()
}

// TestExitZeroIsNotRestarted: the host never restarts a handler that exits
// 0 (WorkerProcess.OnProcessExited only closes the process) and nothing
// stops or recycles the host for it: its listener goes on, every
// invocation fails at once, and the message is dead-lettered after 3
// deliveries.
func TestExitZeroIsNotRestarted(t *testing.T) {
	t.Parallel()
	h := fakeHost(t, "exit0", "")
	dead := drain(t, h)
	in := h.Instances()[0]
	if in.Restarts() != 0 || in.Stopped() != "" || in.Recycles() != 0 || len(dead) != 1 || dead[0].DeliveryCount != 3 || h.Failures() != 3 {
		t.Fatalf("restarts %d, stopped %q, recycles %d, %d failures, dead letters %+v; want no restart or recycle, the message dead-lettered after 3 failed deliveries",
			in.Restarts(), in.Stopped(), in.Recycles(), h.Failures(), dead)
	}
}

// TestExit200RestartsWithoutCounting: exit code 200 asks for a restart
// (IntentionalRestartExitCode): the handler exits so on every call (some
// redeliveries meet it down), is restarted more than three times and never
// spends the crash budget of three.
func TestExit200RestartsWithoutCounting(t *testing.T) {
	t.Parallel()
	h := fakeHost(t, "exit200", "", 10)
	dead := drain(t, h)
	in := h.Instances()[0]
	if in.Restarts() < 3 || in.Stopped() != "" || in.Recycles() != 0 || len(dead) != 1 || dead[0].DeliveryCount != 10 {
		t.Fatalf("restarts %d, stopped %q, recycles %d, dead letters %+v; want 3 restarts or more, the host running, the message dead-lettered after 10 deliveries",
			in.Restarts(), in.Stopped(), in.Recycles(), dead)
	}
}

// TestCrashBudget: the third handler error in a row stops the instance's
// host (two restarts): its triggers stop and the message waits; the
// platform recycles the host after a delay (1 s here), with a fresh handler
// and budget, and the message is delivered again.
func TestCrashBudget(t *testing.T) {
	t.Parallel()
	h := fakeHostWith(t, "crash", "", func(o *devhost.Options) { o.RecycleDelay = time.Second }, 100)
	in := h.Instances()[0]
	deadline := time.Now().Add(20 * time.Second)
	for in.Stopped() == "" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	stopped, pid := time.Now(), in.HandlerPID()
	if !strings.Contains(in.Stopped(), "Exceeded http worker restart retry count") || in.Restarts() != 2 {
		t.Fatalf("stopped %q after %d restarts; want the host stopped at the third crash", in.Stopped(), in.Restarts())
	}
	invocations := h.Invocations()
	time.Sleep(700 * time.Millisecond)
	st := h.Queue("work").Stats()
	if h.Invocations() != invocations || st.Active != 1 || st.DeadLettered != 0 {
		t.Fatalf("while the host is down: %d more invocations, queue %+v; want its triggers stopped and the message waiting",
			h.Invocations()-invocations, st)
	}
	for in.Recycles() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	back := time.Since(stopped)
	for h.Invocations() == invocations && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if in.Recycles() != 1 || back < 900*time.Millisecond || back > 10*time.Second || h.Invocations() == invocations || in.HandlerPID() == pid {
		t.Fatalf("recycles %d after %s, %d more invocations, pid %d (was %d); want one recycle about 1 s after the stop, a new handler invoked again",
			in.Recycles(), back, h.Invocations()-invocations, in.HandlerPID(), pid)
	}
}

// TestNoAnswerWaitsOutFunctionTimeout: a 2xx with an empty or null body,
// like a call that never answers, fails only at functionTimeout (+ the 2 s
// grace) and restarts the handler; timeout restarts do not count towards the
// crash budget, so three in a row leave the host running.
func TestNoAnswerWaitsOutFunctionTimeout(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"empty", "null", "slow"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			h := fakeHost(t, mode, "00:00:00.3")
			dead := drain(t, h)
			in := h.Instances()[0]
			took := time.Since(start)
			if len(dead) != 1 || in.Restarts() != 3 || in.Stopped() != "" || took < 3*2300*time.Millisecond {
				t.Fatalf("after %s: dead letters %d, restarts %d, stopped %q; want 3 timeouts of 2.3 s, 3 restarts, the host running",
					took, len(dead), in.Restarts(), in.Stopped())
			}
		})
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	_ = os.MkdirAll(filepath.Dir(path), 0o755)
	data, _ := json.Marshal(v)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestStopKills: the host disposes of the handler with Process.Kill (SIGKILL)
// on shutdown, never SIGTERM: the handler never sees a signal it could handle.
func TestStopKills(t *testing.T) {
	t.Parallel()
	log := &syncio.Writer{}
	h := fakeHostLog(t, "good", "", log)
	drain(t, h)
	pid := h.Instances()[0].HandlerPID()
	h.Stop()
	if strings.Contains(log.String(), "got SIGTERM") {
		t.Fatal("the handler got SIGTERM")
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("handler %d still runs after Stop", pid)
	}
}

// TestTimeScale: Options.TimeScale compresses the modelled durations.
func TestTimeScale(t *testing.T) {
	t.Parallel()
	app := fakeApp(t, "")
	h, err := devhost.Start(devhost.Options{AppDir: app, Settings: map[string]string{fakeHandlerMode: "good"}, TimeScale: 0.002,
		Queues: map[string]devbus.QueueProperties{"work": {LockDuration: time.Minute, DefaultMessageTimeToLive: time.Hour}}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	if p := h.Queue("work").Properties(); p.LockDuration != 120*time.Millisecond || p.DefaultMessageTimeToLive != 7200*time.Millisecond {
		t.Fatalf("scaled properties %+v", p)
	}
}

// TestReadinessProbe: the host probes GET / until any answer (every 25 ms,
// for up to 30 s) before it invokes: a handler that listens late still gets
// its first message, on its first delivery.
func TestReadinessProbe(t *testing.T) {
	t.Parallel()
	start := time.Now()
	h := fakeHost(t, "slowstart", "")
	if waited := time.Since(start); waited < 700*time.Millisecond {
		t.Fatalf("Start returned after %s, before the handler listened", waited)
	}
	if dead := drain(t, h); len(dead) != 0 || h.Failures() != 0 || h.Invocations() != 1 {
		t.Fatalf("%d invocations, %d failed, dead letters %+v; want one successful delivery", h.Invocations(), h.Failures(), dead)
	}
}
