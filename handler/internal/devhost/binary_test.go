package devhost_test

// The program itself, started as the Functions host starts it (its own
// tests live here, with the end-to-end suite that builds it once, since
// they need the emulation and Azurite, which only code under handler/ may
// import).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
	"github.com/convoy-dev/convoy/handler/internal/devhost/cmd/convoy-devhost/demo"
	"github.com/convoy-dev/convoy/handler/tracing"
)

const emulatorServiceBus = "Endpoint=sb://localhost;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;"

// hostEnv is the environment the Functions host gives a custom handler.
func hostEnv(port int, values map[string]string) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		fmt.Sprintf("FUNCTIONS_CUSTOMHANDLER_PORT=%d", port),
		fmt.Sprintf("FUNCTIONS_HTTPWORKER_PORT=%d", port),
		"FUNCTIONS_CUSTOMHANDLER_WORKER_ID=7c1d4e06-5a9a-4f5e-9d7c-0c3b9f0c8a11",
		"FUNCTIONS_APP_ROOT_PATH=" + filepath.Dir(binary),
		"FUNCTIONS_WORKER_RUNTIME=custom",
	}
	for k, v := range values {
		env = append(env, k+"="+v)
	}
	return env
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestFailsFastOnBadSettings(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary)
	cmd.Env = hostEnv(freePort(t), map[string]string{"ServiceBusConnection__fullyQualifiedNamespace": "https://bad", "MaxRequestBytes": "lots"})
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("started with bad settings:\n%s", out)
	}
	for _, name := range []string{"StateStorage", "ServiceBusConnection__fullyQualifiedNamespace", "MaxRequestBytes"} {
		if !strings.Contains(string(out), "setting "+name) {
			t.Errorf("error does not name %s:\n%s", name, out)
		}
	}
}

func TestStartedLikeTheHost(t *testing.T) {
	t.Parallel()
	az := azurite.Shared(t)
	port := freePort(t)
	cmd := exec.Command(binary)
	cmd.Dir = filepath.Dir(binary)
	cmd.Env = hostEnv(port, map[string]string{"StateStorage": az.ConnectionString(), "ServiceBusConnection": emulatorServiceBus})
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer cmd.Process.Kill()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)

	// Readiness: the host polls GET / every 25 ms for up to 30 s.
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready in 30s: %v\n%s", err, stderr.String())
		}
		time.Sleep(25 * time.Millisecond)
	}

	invoke := func(method, path, payloadFile string) (int, map[string]any) {
		t.Helper()
		var body []byte
		if payloadFile != "" {
			body, _ = os.ReadFile(filepath.Join(root, "handler", "testdata", payloadFile))
		}
		req, _ := http.NewRequest(method, base+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
		req.Header.Set("X-Azure-Functions-InvocationId", "6f9619ff-8b86-d011-b42d-00c04fc964ff")
		req.Header.Set("User-Agent", "Azure-Functions-Host/4.1036.1.23224")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v\nstderr: %s", method, path, err, stderr.String())
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Fatalf("%s %s: Content-Type %q", method, path, ct)
		}
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("%s %s: body is not JSON: %v", method, path, err)
		}
		return resp.StatusCode, out
	}

	if code, out := invoke("POST", "/OrderProcessor", "servicebus-batch.json"); code != 200 {
		t.Fatalf("batch invocation: %d %v", code, out)
	}
	if code, out := invoke("POST", "/OrderProcessor", "servicebus-single.json"); code != 200 {
		t.Fatalf("single invocation (a duplicate now): %d %v", code, out)
	}
	for _, bad := range []string{"malformed-not-json.json", "malformed-no-data.json", "unreadable-no-seq.json"} {
		if code, _ := invoke("POST", "/OrderProcessor", bad); code < 300 {
			t.Fatalf("%s: %d, want a failed invocation", bad, code)
		}
	}
	code, state := invoke("GET", "/api/orders/o-1", "")
	if code != 200 || state["status"] != "deleted" || state["appliedSeq"] != 3.0 || state["complete"] != true {
		t.Fatalf("order state after the process survived bad invocations: %d %v", code, state)
	}
	// An invalid ledger needs only Table Storage: it is recorded and the message completed.
	if code, out := invoke("POST", "/LedgerIngest", "servicebus-ledger-invalid.json"); code != 200 {
		t.Fatalf("invalid ledger from the queue: %d %v", code, out)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		// Never 0: the host does not restart a handler that exits 0.
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 128+int(syscall.SIGTERM) {
			t.Fatalf("exit after SIGTERM: %v, want exit code %d\n%s", err, 128+int(syscall.SIGTERM), stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("did not stop within 30s of SIGTERM")
	}
	if !strings.Contains(stdout.String(), "stopped") || !strings.Contains(stdout.String(), "outcome=applied") {
		t.Fatalf("stdout lacks the outcome and shutdown lines:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "invocation failed") {
		t.Fatalf("failed invocations were not logged on stderr:\n%s", stderr.String())
	}
	// A clean stop is no error: nothing about it on stderr, which the host
	// logs at Error level.
	if strings.Contains(stderr.String(), "stopped") || strings.Contains(stderr.String(), "SIGTERM") || strings.Contains(stderr.String(), "terminated") {
		t.Fatalf("the clean stop was written to stderr (the host's Error level):\n%s", stderr.String())
	}
}

// TestShutdownFinishesInFlight: SIGTERM during an invocation lets it finish
// (here: storage is unreachable, so it retries for its 2 s budget and then
// fails) before the process exits.
func TestShutdownFinishesInFlight(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	deadStorage := fmt.Sprintf("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=%s;TableEndpoint=http://127.0.0.1:%d/devstoreaccount1;",
		azurite.AccountKey, freePort(t))
	cmd := exec.Command(binary)
	cmd.Env = hostEnv(port, map[string]string{"StateStorage": deadStorage, "ServiceBusConnection": emulatorServiceBus,
		"TransientRetrySeconds": "2", "ShutdownTimeoutSeconds": "20"})
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(25 * time.Millisecond) {
		if resp, err := http.Get(base + "/"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not ready")
		}
	}
	body, _ := os.ReadFile(filepath.Join(root, "handler", "testdata", "servicebus-batch.json"))
	type answer struct {
		status int
		ct     string
		err    error
	}
	answered := make(chan answer, 1)
	start := time.Now()
	go func() {
		resp, err := http.Post(base+"/OrderProcessor", "application/json", bytes.NewReader(body))
		if err != nil {
			answered <- answer{err: err}
			return
		}
		resp.Body.Close()
		answered <- answer{status: resp.StatusCode, ct: resp.Header.Get("Content-Type")}
	}()
	time.Sleep(500 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-answered:
		if a.err != nil || a.status != 503 || !strings.HasPrefix(a.ct, "application/json") {
			t.Fatalf("the in-flight invocation got %+v; want its own JSON failure after the retries", a)
		}
		if took := time.Since(start); took < 2*time.Second || took > 5*time.Second {
			t.Fatalf("answered after %s: want about its 2 s retry budget, neither cut short nor stretched", took)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the in-flight invocation never answered")
	}
	select {
	case err := <-exited:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 128+int(syscall.SIGTERM) {
			t.Fatalf("exit: %v, want code %d", err, 128+int(syscall.SIGTERM))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("did not exit after finishing the in-flight invocation")
	}
	if !strings.Contains(stdout.String(), "finishing in-flight invocations") {
		t.Fatalf("no shutdown line:\n%s", stdout.String())
	}
}

// TestCommands runs `convoy publish` and `convoy replay` as a user would,
// against the local emulation and Azurite.
func TestCommands(t *testing.T) {
	t.Parallel()
	az := azurite.Shared(t)
	app := t.TempDir()
	if _, err := devhost.Stage(root, binary, app, nil); err != nil {
		t.Fatal(err)
	}
	queues, err := devhost.LoadQueueConfig(filepath.Join(root, "infra", "local", "servicebus-emulator-config.json"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := devhost.Start(devhost.Options{AppDir: app, Queues: queues, Settings: devhost.WithQueueSettings(map[string]string{
		"StateStorage": az.ConnectionString()})})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	env := []string{"PATH=" + os.Getenv("PATH"), "ServiceBusConnection=" + h.ServiceBusConnectionString()}
	runEnv := func(env []string, stdin string, args ...string) (string, string, error) {
		cmd := exec.Command(binary, args...)
		cmd.Env = env
		cmd.Dir = t.TempDir() // no local.settings.json there
		cmd.Stdin = strings.NewReader(stdin)
		var out, errs bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errs
		err := cmd.Run()
		return out.String(), errs.String(), err
	}
	run := func(stdin string, args ...string) (string, string, error) {
		return runEnv(append(env, "StateStorage="+az.ConnectionString()), stdin, args...)
	}
	ledger1, _ := filepath.Abs(filepath.Join(root, "testdata", "ledgers", "01-morning.json"))
	recv := &otlpReceiver{}
	otlp := httptest.NewServer(recv)
	defer otlp.Close()
	out, stderr, err := runEnv(append(env, "StateStorage="+az.ConnectionString(), "OTEL_EXPORTER_OTLP_ENDPOINT="+otlp.URL), "", "publish", ledger1)
	if err != nil || !strings.Contains(out, `"outcome":"sent"`) || !strings.Contains(out, `"transactions":9`) {
		t.Fatalf("publish: %v\n%s%s", err, out, stderr)
	}
	queuedTrace(t, h, out, recv)
	// --stream sets the ledger's stream (its SessionId on the ledgers queue);
	// an invalid one is refused before anything is sent.
	out, stderr, err = run(`{"ledgerId":"L-streamed","stream":"shop-eu","transactions":[{"orderId":"ord-s","op":"CreateOrder","currency":"EUR"}]}`,
		"publish", "--stream", "erp-us", "-")
	if err != nil || !strings.Contains(out, `"stream":"erp-us"`) {
		t.Fatalf("publish --stream: %v\n%s%s", err, out, stderr)
	}
	_, stderr, err = run(`{"ledgerId":"L-badstream","transactions":[{"orderId":"ord-s","op":"DeleteOrder"}]}`, "publish", "--stream", "erp us", "-")
	if err == nil || !strings.Contains(stderr, `stream "erp us"`) {
		t.Fatalf("publish --stream with a space: %v\n%s", err, stderr)
	}
	sessions := map[string]string{}
	for _, m := range h.Queue("ledgers").Sent() {
		sessions[m.MessageID] = m.SessionID
	}
	if len(sessions) != 2 || sessions["L-2026-11-21-0001"] != "shop-eu" || sessions["L-streamed"] != "erp-us" {
		t.Fatalf("ledgers queued with SessionIds %v, want each ledger's stream", sessions)
	}
	// Ledgers are applied in the order their seqs are allocated: wait for the
	// queued one to be published before publishing the next one directly.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.WaitIdle(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	out, stderr, err = run(`{"ledgerId":"L-direct","transactions":[{"orderId":"ord-1001","op":"AddTransaction","txId":"t-9","amount":5}]}`, "publish", "--direct", "-")
	if err != nil || !strings.Contains(out, `"outcome":"published"`) || !strings.Contains(stderr, "1/1 messages sent") {
		t.Fatalf("publish --direct: %v\n%s%s", err, out, stderr)
	}
	directTrace(t, h, func(stdin string, env2 ...string) (string, string, error) {
		return runEnv(append(append(env, "StateStorage="+az.ConnectionString()), env2...), stdin, "publish", "--direct", "-")
	})
	_, stderr, err = run(`{"ledgerId":"L-bad","transactions":[{"orderId":"o","op":"AddTransaction","amount":1.5}]}`, "publish", "-")
	if err == nil || !strings.Contains(stderr, "transaction 0: amount") || !strings.Contains(stderr, "transaction 0: txId is required") {
		t.Fatalf("publish of an invalid ledger: %v\n%s", err, stderr)
	}
	if err := h.WaitIdle(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	v, err := demo.GetOrder(ctx, h.URL(), "ord-1001")
	if err != nil || v.AppliedSeq != 5 || v.Total != 1505 {
		t.Fatalf("ord-1001 after both ledgers: %+v, %v", v, err)
	}
	out, stderr, err = run("", "replay", "ord-1001")
	if err != nil || !strings.Contains(out, `"orderId":"ord-1001"`) || !strings.Contains(out, `"replayed":[]`) {
		t.Fatalf("replay with nothing dead-lettered: %v\n%s%s", err, out, stderr)
	}
	publishAgain(ctx, t, h, run, func(stdin string, args ...string) (string, string, error) { return runEnv(env, stdin, args...) })
}

// publishAgain: a ledger re-sent through the queue under the same ledgerId
// (MessageId) is dropped by the queue's duplicate detection within its
// window, so the command says so every time, and with StateStorage it
// checks the ledger's record first: a changed ledger is refused, naming the
// id and what to do (as an upload answers 409); the same one again is
// "already published", not sent.
func publishAgain(ctx context.Context, t *testing.T, h *devhost.Host, run, runWithoutStorage func(stdin string, args ...string) (string, string, error)) {
	const first = `{"ledgerId":"L-again","transactions":[{"orderId":"ord-again","op":"CreateOrder","currency":"EUR"}]}`
	const changed = `{"ledgerId":"L-again","transactions":[{"orderId":"ord-again","op":"CreateOrder","currency":"USD"}]}`
	queued := func() int {
		n := 0
		for _, m := range h.Queue("ledgers").Sent() {
			if m.MessageID == "L-again" {
				n++
			}
		}
		return n
	}
	out, stderr, err := run(first, "publish", "-")
	if err != nil || !strings.Contains(out, `"outcome":"sent"`) || strings.Contains(out, `"note"`) || queued() != 1 {
		t.Fatalf("publish (a new ledger: nothing to note): %v, %d queued\n%s%s", err, queued(), out, stderr)
	}
	if err := h.WaitIdle(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	out, stderr, err = run(changed, "publish", "-")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(stderr, `ledger "L-again" was already received with other content`) ||
		!strings.Contains(stderr, "give the changed ledger a new ledgerId") || queued() != 1 {
		t.Fatalf("publish of a changed ledger under the same id: %v, %d queued\nstdout: %s\nstderr: %s", err, queued(), out, stderr)
	}
	out, stderr, err = run(first, "publish", "-")
	if err != nil || !strings.Contains(out, `"outcome":"already published"`) || !strings.Contains(out, "not sent") || queued() != 1 {
		t.Fatalf("publish of the same ledger again: %v, %d queued\n%s%s", err, queued(), out, stderr)
	}
	// Without StateStorage nothing can be checked: it is sent, the output
	// says that nothing was checked and that the queue drops a MessageId it
	// saw within its window, and the queue (as Service Bus would) drops it.
	out, stderr, err = runWithoutStorage(changed, "publish", "-")
	if err != nil || !strings.Contains(out, `"outcome":"sent"`) || !strings.Contains(out, `the queue drops this copy if ledger \"L-again\" was sent in the last 10 minutes`) ||
		!strings.Contains(out, "StateStorage is not set") || queued() != 1 {
		t.Fatalf("publish without StateStorage: %v, %d queued\n%s%s", err, queued(), out, stderr)
	}
}

// queuedTrace: a queued publish starts the ledger's trace and prints its id
// (out): the ledger's message on the ledgers queue carries it, and with
// OTEL_EXPORTER_OTLP_ENDPOINT set the command exported its send span.
func queuedTrace(t *testing.T, h *devhost.Host, out string, recv *otlpReceiver) {
	t.Helper()
	var answered struct{ LedgerID, TraceID string }
	if err := json.Unmarshal([]byte(out), &answered); err != nil || len(answered.TraceID) != 32 {
		t.Fatalf("publish printed no traceId: %s", out)
	}
	for _, m := range h.Queue("ledgers").Sent() {
		if m.MessageID != answered.LedgerID {
			continue
		}
		tp, _ := m.Properties[tracing.PropTraceParent].(string)
		if sc, err := tracing.ParseTraceParent(tp); err != nil || sc.TraceID().String() != answered.TraceID {
			t.Fatalf("the ledger's message carries traceparent %q (%v); publish printed traceId %s", tp, err, answered.TraceID)
		}
		if spans := find(recv.all(), "send ledger", answered.TraceID); len(spans) != 1 || spans[0].Attrs["convoy.ledger_id"] != answered.LedgerID {
			t.Fatalf("send ledger spans of trace %s exported by the time the command exited: %+v", answered.TraceID, spans)
		}
		return
	}
	t.Fatalf("no message %s on the ledgers queue", answered.LedgerID)
}

// directTrace: publish --direct starts the ledger's trace, as an upload
// without a traceparent does: each message it sends carries a valid
// traceparent, the same in Diagnostic-Id, one trace id for the ledger; with
// OTEL_EXPORTER_OTLP_ENDPOINT set, the command exports its publish span
// before it exits.
func directTrace(t *testing.T, h *devhost.Host, publishDirect func(stdin string, env ...string) (string, string, error)) {
	t.Helper()
	recv := &otlpReceiver{}
	otlp := httptest.NewServer(recv)
	defer otlp.Close()
	const doc = `{"ledgerId":"L-direct-traced","transactions":[{"orderId":"ord-t1","op":"CreateOrder","currency":"EUR"},
		{"orderId":"ord-t2","op":"CreateOrder","currency":"EUR"},{"orderId":"ord-t1","op":"AddTransaction","txId":"t-1","amount":3}]}`
	out, stderr, err := publishDirect(doc, "OTEL_EXPORTER_OTLP_ENDPOINT="+otlp.URL)
	if err != nil || !strings.Contains(out, `"outcome":"published"`) {
		t.Fatalf("publish --direct with an OTLP endpoint: %v\n%s%s", err, out, stderr)
	}
	var answered struct{ TraceID string }
	_ = json.Unmarshal([]byte(out), &answered)
	traces := map[string]map[string]bool{} // ledger id: trace ids
	for _, m := range h.Queue("orders").Sent() {
		ledgerID, _, _ := strings.Cut(m.MessageID, ":")
		if ledgerID != "L-direct" && ledgerID != "L-direct-traced" {
			continue
		}
		tp, _ := m.Properties[tracing.PropTraceParent].(string)
		sc, err := tracing.ParseTraceParent(tp)
		if err != nil || m.Properties[tracing.PropDiagnosticID] != tp {
			t.Fatalf("message %s: traceparent %q (%v), Diagnostic-Id %v: want a valid traceparent, the same in both", m.MessageID, tp, err, m.Properties[tracing.PropDiagnosticID])
		}
		if traces[ledgerID] == nil {
			traces[ledgerID] = map[string]bool{}
		}
		traces[ledgerID][sc.TraceID().String()] = true
	}
	if len(traces["L-direct"]) != 1 || len(traces["L-direct-traced"]) != 1 {
		t.Fatalf("trace ids by ledger %v: want one each", traces)
	}
	var traceID string
	for id := range traces["L-direct-traced"] {
		traceID = id
	}
	if answered.TraceID != traceID {
		t.Fatalf("publish --direct printed traceId %q; its messages carry trace %s", answered.TraceID, traceID)
	}
	if spans := find(recv.all(), "publish ledger", traceID); len(spans) != 1 || spans[0].Attrs["convoy.ledger_id"] != "L-direct-traced" || spans[0].Attrs["messaging.batch.message_count"] != "3" {
		t.Fatalf("publish ledger spans of trace %s received by the time the command exited: %+v (all: %+v)", traceID, spans, recv.all())
	}
}
