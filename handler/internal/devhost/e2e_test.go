package devhost_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/internal/devbus"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
	"github.com/convoy-dev/convoy/handler/internal/devhost/cmd/convoy-devhost/demo"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/internal/syncio"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/servicebus"
)

// The end-to-end fault suite: the real handler binary, staged like `make
// stage`, under the host and Service Bus emulation, against real Azurite.
// Every scenario ends by comparing every order with the expected fold.

var (
	root   = filepath.Join("..", "..", "..")
	binary string
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeHandlerMode); mode != "" {
		runFakeHandler(mode) // started by the emulation as a custom handler
		return
	}
	dir, err := os.MkdirTemp("", "convoy-e2e")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "convoy")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build the handler: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	azurite.StopShared()
	os.RemoveAll(dir)
	os.Exit(code)
}

// stage stages the app into a temporary directory (devhost.Stage).
func stage(t *testing.T, edit func(name string, doc map[string]any)) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := devhost.Stage(root, binary, dir, edit); err != nil {
		t.Fatal(err)
	}
	return dir
}

type env struct {
	t       *testing.T
	storage azurite.Account // the handler's StateStorage
	az      *azurite.Server // its server, when the test has one of its own
	host    *devhost.Host
	log     *syncio.Writer       // the emulation's and the handler's log
	bus     *azservicebus.Client // to the emulated namespace, as any producer connects
}

func start(t *testing.T, app string, az azurite.Options) *env {
	t.Helper()
	return startWith(t, app, az, nil)
}

// startWith is start with the emulation's options edited on the way
// (instances, time scale, queue properties). Storage is an account of the
// package's shared Azurite, or with az set (a directory to restart it on)
// an Azurite of the test's own.
func startWith(t *testing.T, app string, az azurite.Options, edit func(*devhost.Options)) *env {
	t.Helper()
	queues, err := devhost.LoadQueueConfig(filepath.Join(root, "infra", "local", "servicebus-emulator-config.json"))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, log: &syncio.Writer{}}
	if az == (azurite.Options{}) {
		e.storage = azurite.Shared(t)
	} else {
		if e.az, err = azurite.Start(az); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.az.Stop)
		e.storage = e.az.Account
	}
	opts := devhost.Options{AppDir: app, Queues: queues, Log: e.log, Settings: devhost.WithQueueSettings(map[string]string{
		"StateStorage": e.storage.ConnectionString(), "TransientRetrySeconds": "10",
	})}
	if edit != nil {
		edit(&opts)
	}
	e.host, err = devhost.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.host.Stop)
	t.Cleanup(func() {
		if dir := os.Getenv("E2E_LOG_DIR"); dir != "" { // the whole log, for debugging this suite
			_ = os.WriteFile(filepath.Join(dir, t.Name()+".log"), []byte(e.log.String()), 0o644)
		}
		if t.Failed() {
			t.Logf("emulation log (last 4 KiB):\n%s", tail(e.log.String(), 4096))
		}
	})
	return e
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// client is an azservicebus client of the emulated namespace.
func (e *env) client() *azservicebus.Client {
	e.t.Helper()
	if e.bus == nil {
		var err error
		if e.bus, err = azservicebus.NewClientFromConnectionString(e.host.ServiceBusConnectionString(), nil); err != nil {
			e.t.Fatal(err)
		}
		bus := e.bus
		e.t.Cleanup(func() { _ = bus.Close(context.Background()) })
	}
	return e.bus
}

// send sends messages to queue in one batch with azservicebus, as any producer would.
func (e *env) send(ctx context.Context, queue string, msgs ...*azservicebus.Message) {
	e.t.Helper()
	s, err := e.client().NewSender(queue, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer s.Close(ctx)
	b, err := s.NewMessageBatch(ctx, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, m := range msgs {
		if err := b.AddMessage(m, nil); err != nil {
			e.t.Fatal(err)
		}
	}
	if err := s.SendMessageBatch(ctx, b, nil); err != nil {
		e.t.Fatal(err)
	}
}

// rawOrderMessage is an order message with any body, as a producer of our
// own could send it.
func rawOrderMessage(messageID, order, ledgerID string, seq int64, body string) *azservicebus.Message {
	contentType := "application/json"
	return &azservicebus.Message{MessageID: &messageID, SessionID: &order, ContentType: &contentType,
		ApplicationProperties: map[string]any{"ledgerId": ledgerID, "seq": seq}, Body: []byte(body)}
}

// publish sends ledger documents to the ledgers queue, as `convoy publish`
// does; their entries may be of any registered domain.
func (e *env) publish(ctx context.Context, docs ...[]byte) []*ledger.Ledger {
	e.t.Helper()
	sender, err := servicebus.NewSender(e.client(), "ledgers")
	if err != nil {
		e.t.Fatal(err)
	}
	defer sender.Close(ctx)
	var out []*ledger.Ledger
	for _, doc := range docs {
		l, err := ledger.Parse(doc, ledger.Limits{}, ledgertest.OrdersAndAccounts)
		if err != nil {
			e.t.Fatal(err)
		}
		if err := sender.SendLedger(ctx, l.ID, l.Stream, doc); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

func (e *env) waitIdle(ctx context.Context) {
	e.t.Helper()
	if err := e.host.WaitIdle(ctx, 500*time.Millisecond); err != nil {
		e.t.Fatal(err)
	}
}

// checkFold compares every order's state with the fold of its transactions
// in the seq order of the messages sent (the orders queue's journal unless
// the test invoked the function itself).
func (e *env) checkFold(ctx context.Context, ledgers []*ledger.Ledger, sent ...devbus.Message) {
	e.t.Helper()
	if sent == nil {
		sent = e.host.Queue("orders").Sent()
	}
	want, err := demo.ExpectedOrders(ledgers, sent)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(want) == 0 {
		e.t.Fatal("no order to check")
	}
	for id, w := range want {
		got, err := demo.GetOrder(ctx, e.host.URL(), id)
		if err != nil {
			e.t.Fatalf("order %s: %v", id, err)
		}
		if problem := demo.CompareViews(got, w); problem != "" {
			e.t.Fatalf("order %s: %s", id, problem)
		}
	}
	if dl := e.host.Queue("orders").Stats().DeadLettered; dl != 0 {
		e.t.Fatalf("%d order message(s) were dead-lettered", dl)
	}
}

// genLedger makes a ledger of n transactions over orders, interleaved, with
// business violations mixed in. Orders are created by the first ledger (seq 0).
func genLedger(r *rand.Rand, id string, n int, orders []string, create bool) []byte {
	type tx = map[string]any
	var txs []tx
	if create {
		for _, o := range orders {
			txs = append(txs, tx{"orderId": o, "op": "CreateOrder", "currency": "EUR"})
		}
	}
	for i := len(txs); i < n; i++ {
		o := orders[r.IntN(len(orders))]
		switch k := r.IntN(20); {
		case k < 12:
			txs = append(txs, tx{"orderId": o, "op": "AddTransaction", "txId": fmt.Sprintf("%s-%d", id, i), "amount": r.IntN(2000) - 500})
		case k < 17:
			txs = append(txs, tx{"orderId": o, "op": "ModifyTransaction", "txId": fmt.Sprintf("%s-%d", id, r.IntN(i+1)), "amount": r.IntN(100)})
		case k < 19:
			txs = append(txs, tx{"orderId": o, "op": "AddTransaction", "txId": "dup", "amount": 1})
		default:
			txs = append(txs, tx{"orderId": o, "op": "CreateOrder", "currency": "USD"}) // rejected: already created
		}
	}
	doc, _ := json.Marshal(map[string]any{"ledgerId": id, "transactions": txs})
	return doc
}

// workload makes count ledgers of n transactions each over orders named
// prefix-NN; the first ledger creates the orders.
func workload(seed uint64, prefix string, count, n, orders int) [][]byte {
	r := rand.New(rand.NewPCG(seed, seed+1))
	ids := orderIDs(prefix, orders)
	var docs [][]byte
	for i := range count {
		docs = append(docs, genLedger(r, fmt.Sprintf("L-%s-%d", prefix, i), n, ids, i == 0))
	}
	return docs
}

func orderIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%02d", prefix, i)
	}
	return ids
}

func timeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestDemo runs `make demo`'s scenario: sample ledgers, one pair out of order.
func TestDemo(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := demo.Run(timeout(t, time.Minute), demo.Options{AppDir: stage(t, nil), LedgersDir: filepath.Join(root, "testdata", "ledgers"),
		QueueConfig: filepath.Join(root, "infra", "local", "servicebus-emulator-config.json"), Late: "03-afternoon.json", Out: &out, Log: &bytes.Buffer{}})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"is blocked", "All 6 orders match"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestDuplicates: a ledger sent twice (same MessageId: dropped by duplicate
// detection; another MessageId: an idempotent no-op) and order messages
// re-sent under new MessageIds (past duplicate detection) change nothing.
func TestDuplicates(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, time.Minute)
	e := start(t, stage(t, nil), azurite.Options{})
	r := rand.New(rand.NewPCG(1, 2))
	ids := orderIDs("dup", 5)
	doc := genLedger(r, "L-dup-1", 60, ids, true)
	ledgers := e.publish(ctx, doc, doc)
	e.waitIdle(ctx)
	// The same ledger under another MessageId reaches the handler: a no-op.
	resentID := "resent-" + ledgers[0].ID
	e.send(ctx, "ledgers", &azservicebus.Message{MessageID: &resentID, SessionID: &ledgers[0].Stream, Body: doc})
	// Every order message again, under new MessageIds.
	var again []*azservicebus.Message
	seqs := map[string]int64{}
	for i, entry := range ledgers[0].Entries() {
		seqs[entry.Key]++
		body, _ := orders.EncodeBody(entry.Command.(orders.Transaction))
		again = append(again, servicebus.ToMessage(convoy.Envelope{SessionID: entry.Key, MessageID: fmt.Sprintf("again-%d", i),
			LedgerID: ledgers[0].ID, Seq: seqs[entry.Key], Last: entry.Last, Body: body}))
	}
	e.send(ctx, "orders", again...)
	e.waitIdle(ctx)
	e.checkFold(ctx, ledgers[:1])
}

// TestHandlerKilled: OrderProcessor's handlers are killed with SIGKILL
// mid-flight on its two instances, twice each: as much as a real host
// survives (the third crash in a row stops it: TestCrashBudget). Every order
// still ends exactly right.
func TestHandlerKilled(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, 2*time.Minute)
	e := startWith(t, stage(t, nil), azurite.Options{}, func(o *devhost.Options) { o.MinInstances = 2 })
	ledgers := e.publish(ctx, workload(3, "kill", 4, 150, 12)...)
	processors := e.host.Group("function:OrderProcessor")
	for k := range 4 {
		time.Sleep(time.Duration(150+100*k) * time.Millisecond)
		processors[k%2].KillHandler()
	}
	e.waitIdle(ctx)
	for _, in := range processors {
		if in.Restarts() != 2 || in.Stopped() != "" {
			t.Fatalf("instance %d: %d restarts, stopped %q; want 2 restarts and the host running", in.ID, in.Restarts(), in.Stopped())
		}
	}
	e.checkFold(ctx, ledgers)
	t.Logf("%d invocations, %d failed, %d restarts", e.host.Invocations(), e.host.Failures(), e.host.Restarts())
}

// TestStorageRestart: Azurite (on disk) is stopped mid-run and started again
// on the same port; the handler rides out the outage.
func TestStorageRestart(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, 2*time.Minute)
	dir := t.TempDir()
	e := start(t, stage(t, nil), azurite.Options{Dir: dir})
	ledgers := e.publish(ctx, workload(5, "outage", 3, 120, 10)...)
	e.az.Stop()
	pending := e.host.Queue("ledgers").Stats().Active + e.host.Queue("orders").Stats().Active
	if pending == 0 {
		t.Fatal("everything was processed before the outage began: the scenario tests nothing")
	}
	time.Sleep(2 * time.Second)
	restarted, err := azurite.Start(azurite.Options{Dir: dir, Port: e.az.Port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(restarted.Stop)
	e.waitIdle(ctx)
	e.checkFold(ctx, ledgers)
	t.Logf("storage down for 2 s with %d messages pending; %d invocations, %d failed", pending, e.host.Invocations(), e.host.Failures())
}

// TestPoisonMessage: a message that cannot be read is delivered
// MaxDeliveryCount times, dead-lettered, and its order waits behind the gap
// with the later messages parked.
func TestPoisonMessage(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, time.Minute)
	e := start(t, stage(t, nil), azurite.Options{})
	msg := func(seq int64, body string) *azservicebus.Message {
		return rawOrderMessage(fmt.Sprintf("P:%d", seq), "poisoned", "P", seq, body)
	}
	e.send(ctx, "orders",
		msg(1, `{"transaction":{"orderId":"poisoned","op":"CreateOrder","currency":"EUR"}}`),
		msg(2, `{"transaction":{"orderId":"poisoned","op":"AddTransaction","txId":"t-1","amount":"a lot"}}`),
		msg(3, `{"transaction":{"orderId":"poisoned","op":"AddTransaction","txId":"t-2","amount":5}}`),
		msg(4, `{"transaction":{"orderId":"poisoned","op":"AddTransaction","txId":"t-3","amount":7}}`),
	)
	e.waitIdle(ctx)
	dead := e.host.Queue("orders").DeadLetters()
	if len(dead) != 1 || dead[0].MessageID != "P:2" || dead[0].DeliveryCount != 10 {
		t.Fatalf("dead letters %+v, want P:2 after 10 deliveries", dead)
	}
	v, err := demo.GetOrder(ctx, e.host.URL(), "poisoned")
	if err != nil {
		t.Fatal(err)
	}
	if v.AppliedSeq != 1 || v.Parked != 2 || v.MissingSeq != 2 || v.BlockedSince == "" || len(v.Transactions) != 0 {
		t.Fatalf("poisoned order %+v, want applied 1, 2 parked, missing seq 2", v)
	}
	blocked := e.blocked(t)
	if len(blocked) != 1 || blocked[0]["orderId"] != "poisoned" || blocked[0]["missingSeq"] != 2.0 || blocked[0]["parked"] != 2.0 {
		t.Fatalf("blocked orders %v", blocked)
	}
	// A replay cannot help an unreadable message: the operator skips its seq.
	var skipped map[string]any
	if code := e.post(t, "/api/orders/poisoned/skip?seq=3", &skipped); code != 409 {
		t.Fatalf("skipping a seq that is not missing: %d %v, want 409", code, skipped)
	}
	if code := e.post(t, "/api/orders/poisoned/skip?seq=2", &skipped); code != 200 {
		t.Fatalf("skip: %d %v", code, skipped)
	}
	v, _ = demo.GetOrder(ctx, e.host.URL(), "poisoned")
	if v.AppliedSeq != 4 || v.Parked != 0 || v.Total != 12 || len(v.Rejected) != 1 || v.Rejected[0].Reason != convoy.ReasonSkipped {
		t.Fatalf("after the skip: %+v", v)
	}
	if blocked := e.blocked(t); len(blocked) != 0 {
		t.Fatalf("still blocked after the skip: %v", blocked)
	}
	// The skipped seq's dead letter is completed: it no longer counts (and
	// alerts) as a dead letter of a permanent cause (issue 25).
	dl, _ := skipped["deadLetter"].(map[string]any)
	if left := e.host.Queue("orders").DeadLetters(); len(left) != 0 || fmt.Sprint(dl["completed"]) != "[P:2]" {
		t.Fatalf("after the skip: dead letters %+v, answer's deadLetter %v; want P:2 completed", left, dl)
	}
}

// TestReplayAfterFix: a message fails all its deliveries (a broken
// dependency) and is dead-lettered; its order shows up as blocked with the
// right missing seq; once the cause is fixed, a replay puts the message back
// and the order ends in the state of its fold. Replaying again changes nothing.
func TestReplayAfterFix(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, time.Minute)
	e := start(t, stage(t, nil), azurite.Options{})
	r := rand.New(rand.NewPCG(11, 12))
	doc := genLedger(r, "L-replay", 12, []string{"replayed"}, true)
	l, _ := ledger.Parse(doc, ledger.Limits{}, ledgertest.Orders)
	victim := convoy.MessageID(l.ID, 3) // seq 4 of the order
	e.host.InjectFault(func(fn string, msgs []*devbus.Message) error {
		for _, m := range msgs {
			if m.MessageID == victim {
				return fmt.Errorf("injected: a dependency of %s is down", fn)
			}
		}
		return nil
	})
	e.publish(ctx, doc)
	e.waitIdle(ctx)
	if dead := e.host.Queue("orders").DeadLetters(); len(dead) != 1 || dead[0].MessageID != victim || dead[0].DeliveryCount != 10 {
		t.Fatalf("dead letters %+v, want %s after 10 deliveries", dead, victim)
	}
	blocked := e.blocked(t)
	if len(blocked) != 1 || blocked[0]["orderId"] != "replayed" || blocked[0]["missingSeq"] != 4.0 || blocked[0]["parked"] != 8.0 {
		t.Fatalf("blocked orders %v, want replayed missing seq 4 with 8 parked", blocked)
	}
	e.host.InjectFault(nil) // the cause is fixed
	var rep map[string]any
	if code := e.post(t, "/api/orders/replayed/replay", &rep); code != 200 || len(rep["replayed"].([]any)) != 1 {
		t.Fatalf("replay: %d %v", code, rep)
	}
	e.waitIdle(ctx)
	e.checkFold(ctx, []*ledger.Ledger{l})
	if code := e.post(t, "/api/orders/replayed/replay", &rep); code != 200 || len(rep["replayed"].([]any)) != 0 {
		t.Fatalf("a second replay: %d %v, want nothing replayed", code, rep)
	}
	if blocked := e.blocked(t); len(blocked) != 0 {
		t.Fatalf("still blocked after the replay: %v", blocked)
	}
}

// blocked lists the blocked orders through BlockedOrders, every page.
func (e *env) blocked(t *testing.T) []map[string]any { return e.blockedIn(t, "orders") }

// blockedIn lists the blocked keys of a domain (its Name: "orders",
// "accounts") through its blocked list, every page.
func (e *env) blockedIn(t *testing.T, domain string) []map[string]any {
	t.Helper()
	var all []map[string]any
	token := ""
	for range 100 {
		var page map[string]json.RawMessage
		if code := e.get(t, "/api/"+domain+"?blocked=true&pageSize=1&continuation="+token, &page); code != 200 {
			t.Fatalf("blocked %s: %d", domain, code)
		}
		var keys []map[string]any
		if err := json.Unmarshal(page[domain], &keys); err != nil {
			t.Fatalf("blocked %s: %v", domain, err)
		}
		all = append(all, keys...)
		token = ""
		_ = json.Unmarshal(page["continuation"], &token)
		if token == "" {
			return all
		}
	}
	t.Fatalf("the blocked list of %s never ends", domain)
	return nil
}

// TestConcurrentInvocationsOfOneSession: the same and adjacent messages of
// one order are invoked at once on two instances' handlers, as when a
// session lock is lost and two instances work the session (one handler
// process serialises a key's calls: two make storage's version check
// decide); failed calls are redelivered. Exactly once.
func TestConcurrentInvocationsOfOneSession(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, time.Minute)
	e := startWith(t, stage(t, nil), azurite.Options{}, func(o *devhost.Options) { o.MinInstances = 2 })
	r := rand.New(rand.NewPCG(7, 8))
	doc := genLedger(r, "L-race", 40, []string{"raced"}, true)
	l, _ := ledger.Parse(doc, ledger.Limits{}, ledgertest.Orders)
	var msgs []*devbus.Message
	for i, entry := range l.Entries() {
		body, _ := orders.EncodeBody(entry.Command.(orders.Transaction))
		msgs = append(msgs, &devbus.Message{SequenceNumber: int64(i + 1), MessageID: convoy.MessageID(l.ID, i), SessionID: "raced",
			ContentType: "application/json", Body: body, DeliveryCount: 1, EnqueuedTime: time.Now(),
			Properties: map[string]any{"ledgerId": l.ID, "seq": int64(i + 1), "last": entry.Last}})
	}
	processors := e.host.Group("function:OrderProcessor")
	var wg sync.WaitGroup
	for k, offset := range []int{0, 0, 1, 2} { // two identical streams, two shifted by one and two
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range msgs {
				m := msgs[(i+offset)%len(msgs)]
				for e.host.InvokeOn(ctx, processors[k%len(processors)], "OrderProcessor", []*devbus.Message{m}) != nil {
					if ctx.Err() != nil {
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	var sent []devbus.Message
	for _, m := range msgs {
		sent = append(sent, *m)
	}
	e.checkFold(ctx, []*ledger.Ledger{l}, sent...)
}

// TestBatchMode: the same guarantees with "cardinality": "many".
func TestBatchMode(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, 2*time.Minute)
	app := stage(t, func(name string, fj map[string]any) {
		switch name {
		case "OrderProcessor":
			fj["bindings"].([]any)[0].(map[string]any)["cardinality"] = "many"
		case "host.json":
			// Batch dispatch works one session at a time: a short idle timeout keeps the test brief.
			fj["extensions"].(map[string]any)["serviceBus"].(map[string]any)["sessionIdleTimeout"] = "00:00:00.3"
		}
	})
	e := start(t, app, azurite.Options{})
	ledgers := e.publish(ctx, workload(9, "batch", 3, 100, 6)...)
	time.Sleep(200 * time.Millisecond)
	e.host.KillHandler() // a failed batch comes back whole
	e.waitIdle(ctx)
	e.checkFold(ctx, ledgers)
}

// TestHTTPEnvelopes: with request forwarding off, the host wraps each HTTP
// request in an envelope (Data.req) and unwraps Outputs.res; the functions
// answer the same through it.
func TestHTTPEnvelopes(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, time.Minute)
	app := stage(t, func(name string, fj map[string]any) {
		if name == "host.json" {
			fj["customHandler"].(map[string]any)["enableForwardingHttpRequest"] = false
		}
	})
	e := start(t, app, azurite.Options{})
	doc, _ := os.ReadFile(filepath.Join(root, "testdata", "ledgers", "01-morning.json"))
	resp, err := http.Post(e.host.URL()+"/api/ledgers", "application/json", bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	var sum map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&sum)
	resp.Body.Close()
	if resp.StatusCode != 202 || sum["outcome"] != "published" || sum["messages"] != 9.0 {
		t.Fatalf("LedgerUpload through the envelope: %d %v", resp.StatusCode, sum)
	}
	e.waitIdle(ctx)
	var view map[string]any
	if code := e.get(t, "/api/orders/ord-1001", &view); code != 200 || view["appliedSeq"] != 4.0 || view["total"] != 1500.0 {
		t.Fatalf("OrderStatus through the envelope: %d %v", code, view)
	}
	var missing map[string]any
	if code := e.get(t, "/api/orders/nobody", &missing); code != 404 || missing["error"] == nil {
		t.Fatalf("unknown order through the envelope: %d %v", code, missing)
	}
	var bad map[string]any
	if code := e.post(t, "/api/orders/ord-1001/skip?seq=abc", &bad); code != 400 || bad["error"] == nil {
		t.Fatalf("bad skip through the envelope: %d %v", code, bad)
	}
}
