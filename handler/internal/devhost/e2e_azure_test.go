package devhost_test

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/internal/devbus"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
	"github.com/convoy-dev/convoy/handler/internal/devhost/cmd/convoy-devhost/demo"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/orders"
)

// Azure as it really is (docs/host-contract.md): session locks that run out,
// several host instances, expiry, logs through host.json's filter. Each
// scenario ends with every order equal to the independent fold.

// hostJSON returns a stage edit that sets host.json's serviceBus settings.
func hostJSON(sb map[string]any, fn func(name string, doc map[string]any)) func(string, map[string]any) {
	return func(name string, doc map[string]any) {
		if name == "host.json" {
			for k, v := range sb {
				doc["extensions"].(map[string]any)["serviceBus"].(map[string]any)[k] = v
			}
		}
		if fn != nil {
			fn(name, doc)
		}
	}
}

// slowCalls makes every invocation of function take at least d before it
// reaches the handler, so that a session is held long enough for its lock
// to run out however fast the machine is.
func slowCalls(e *env, function string, d time.Duration) {
	e.host.InjectFault(func(fn string, _ []*devbus.Message) error {
		if fn == function {
			time.Sleep(d)
		}
		return nil
	})
}

// orderLock sets the orders queue's lock duration.
func orderLock(d time.Duration) func(*devhost.Options) {
	return func(o *devhost.Options) {
		p := o.Queues["orders"]
		p.LockDuration = d
		o.Queues["orders"] = p
	}
}

// TestBacklogOnThreeInstancesWithLockLoss: a backlog scales OrderProcessor
// out to three instances (its group's share of the app's seven: the four
// other groups, AccountProcessor's among them, keep one each), whose session locks run out under it (renewal stops 1 s
// after a session is accepted; the lock lasts 0.5 s more): calls of one
// session overlap across instances, completions fail, messages come back.
// Nothing is lost or applied twice.
func TestBacklogOnThreeInstancesWithLockLoss(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, 3*time.Minute)
	app := stage(t, hostJSON(map[string]any{"maxAutoLockRenewalDuration": "00:00:01", "maxConcurrentSessions": 4}, nil))
	e := startWith(t, app, azurite.Options{}, func(o *devhost.Options) {
		o.MaxInstances = 7
		orderLock(500 * time.Millisecond)(o)
	})
	slowCalls(e, "OrderProcessor", 30*time.Millisecond) // ~65 messages of 30 ms per session outlast its 1.5 s lock on any machine
	ledgers := e.publish(ctx, workload(21, "backlog", 4, 200, 12)...)
	e.waitIdle(ctx)
	if n := e.host.PeakInstances("function:OrderProcessor"); n != 3 {
		t.Fatalf("OrderProcessor ran on up to %d instances, want the backlog to scale it out to 3", n)
	}
	if e.host.LockLosses() == 0 {
		t.Fatal("no session lock was lost: the scenario tests nothing")
	}
	e.checkFold(ctx, ledgers)
	t.Logf("%d invocations, %d failed, %d lock losses", e.host.Invocations(), e.host.Failures(), e.host.LockLosses())
}

// TestLockLostMidCall: a call outlives its session lock; a second instance
// accepts the session and goes on while the first call still runs, then the
// first call reaches the handler late and its completion fails.
func TestLockLostMidCall(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, time.Minute)
	// One session per instance, so only the other instance can take it.
	app := stage(t, hostJSON(map[string]any{"maxAutoLockRenewalDuration": "00:00:00.2", "maxConcurrentSessions": 1}, nil))
	e := startWith(t, app, azurite.Options{}, func(o *devhost.Options) {
		o.MinInstances, o.MaxInstances = 2, 2
		orderLock(200 * time.Millisecond)(o)
	})
	doc := genLedger(rand.New(rand.NewPCG(5, 6)), "L-slow", 30, []string{"slowpoke"}, true)
	l, _ := ledger.Parse(doc, ledger.Limits{}, ledgertest.Orders)
	victim := convoy.MessageID(l.ID, 4) // seq 5
	var mu sync.Mutex
	var firstEnded, secondStarted time.Time
	e.host.InjectFault(func(_ string, msgs []*devbus.Message) error {
		for _, m := range msgs {
			if m.MessageID != victim {
				continue
			}
			if m.DeliveryCount == 1 {
				time.Sleep(time.Second) // the lock runs out 0.4 s after acceptance
				mu.Lock()
				firstEnded = time.Now()
				mu.Unlock()
			} else if secondStarted.IsZero() {
				mu.Lock()
				secondStarted = time.Now()
				mu.Unlock()
			}
		}
		return nil
	})
	e.publish(ctx, doc)
	e.waitIdle(ctx)
	mu.Lock()
	defer mu.Unlock()
	if secondStarted.IsZero() || firstEnded.IsZero() || !secondStarted.Before(firstEnded) {
		t.Fatalf("second delivery began %v, first call ended %v: want the session taken while the first call ran", secondStarted, firstEnded)
	}
	if e.host.LockLosses() == 0 {
		t.Fatal("the late call's completion did not fail")
	}
	e.checkFold(ctx, []*ledger.Ledger{l})
}

// TestExpiredSession: one message of a session outlives its time to live
// while the session waits, so the whole session's waiting messages expire
// to the dead-letter queue (deadLetteringOnMessageExpiration); the order
// applied what came before and waits. A replay puts the rest back in order.
func TestExpiredSession(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, time.Minute)
	e := start(t, stage(t, nil), azurite.Options{})
	doc := genLedger(rand.New(rand.NewPCG(9, 10)), "L-ttl", 6, []string{"expiring"}, true)
	l, _ := ledger.Parse(doc, ledger.Limits{}, ledgertest.Orders)
	first := convoy.MessageID(l.ID, 0)
	e.host.InjectFault(func(_ string, msgs []*devbus.Message) error {
		if msgs[0].MessageID == first && msgs[0].DeliveryCount == 1 {
			time.Sleep(400 * time.Millisecond) // seq 2 expires meanwhile
		}
		return nil
	})
	var msgs []devbus.Message
	for i, entry := range l.Entries() {
		body, _ := orders.EncodeBody(entry.Command.(orders.Transaction))
		m := devbus.Message{MessageID: convoy.MessageID(l.ID, i), SessionID: "expiring", ContentType: "application/json", Body: body,
			Properties: map[string]any{"ledgerId": l.ID, "seq": int64(i + 1), "last": entry.Last}}
		if i == 1 {
			m.TimeToLive = 100 * time.Millisecond
		}
		msgs = append(msgs, m)
	}
	e.host.Queue("orders").Send(msgs)
	e.waitIdle(ctx)
	dead := e.host.Queue("orders").DeadLetters()
	if len(dead) != 5 {
		t.Fatalf("%d dead letters, want the 5 waiting messages of the session", len(dead))
	}
	for _, m := range dead {
		if m.DeadLetterReason != devbus.ReasonExpired {
			t.Fatalf("dead letter %s: reason %q", m.MessageID, m.DeadLetterReason)
		}
	}
	v, err := demo.GetOrder(ctx, e.host.URL(), "expiring")
	if err != nil || v.AppliedSeq != 1 || v.Parked != 0 {
		t.Fatalf("order after the expiry: %+v, %v; want seq 1 applied, nothing parked", v, err)
	}
	var rep map[string]any
	if code := e.post(t, "/api/orders/expiring/replay", &rep); code != 200 || len(rep["replayed"].([]any)) != 5 {
		t.Fatalf("replay: %d %v", code, rep)
	}
	e.waitIdle(ctx)
	e.checkFold(ctx, []*ledger.Ledger{l})
}

// blockedLine is what the README's Kusto query parses out of an "order
// blocked" trace.
var blockedLine = regexp.MustCompile(`^order blocked .*sessionId=(\S+) missingSeq=(\d+) parked=(\d+) `)

// TestLogsReachApplicationInsights: with the shipped host.json, the lines
// operators rely on survive the host's log filter (docs/host-contract.md, "Logs"):
// outcomes, "order blocked"/"order unblocked" and "ledger rejected" from
// successful calls' Logs (Function.<Name>.User), the reason of a failed call
// from stderr at Warning (Host.Function.Console); stdout's Information lines
// are dropped.
func TestLogsReachApplicationInsights(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, time.Minute)
	e := start(t, stage(t, nil), azurite.Options{})
	doc := genLedger(rand.New(rand.NewPCG(13, 14)), "L-logs", 4, []string{"logged"}, true)
	l, _ := ledger.Parse(doc, ledger.Limits{}, ledgertest.Orders)
	var msgs []devbus.Message
	for i, entry := range l.Entries() {
		body, _ := orders.EncodeBody(entry.Command.(orders.Transaction))
		msgs = append(msgs, devbus.Message{MessageID: convoy.MessageID(l.ID, i), SessionID: "logged", ContentType: "application/json",
			Body: body, Properties: map[string]any{"ledgerId": l.ID, "seq": int64(i + 1), "last": entry.Last}})
	}
	q := e.host.Queue("orders")
	q.Send(msgs[1:2]) // seq 2 first: the order blocks
	e.waitIdle(ctx)
	q.Send(append(msgs[:1:1], msgs[2:]...)) // then the rest: it unblocks
	q.Send([]devbus.Message{{MessageID: "no-seq", SessionID: "logged", Body: msgs[0].Body}})
	e.host.Queue("ledgers").Send([]devbus.Message{{MessageID: "L-bad", SessionID: "default", Body: []byte(`{"ledgerId":"L-bad","transactions":[{"orderId":"x","op":"Explode"}]}`)}})
	e.waitIdle(ctx)

	found := map[string]bool{}
	for _, tr := range e.host.Telemetry().Traces() {
		switch {
		case tr.Category == devhost.CategoryUser("OrderProcessor") && strings.HasPrefix(tr.Message, "order message "):
			found["outcome"] = true
		case tr.Category == devhost.CategoryUser("OrderProcessor") && blockedLine.MatchString(tr.Message+" "):
			m := blockedLine.FindStringSubmatch(tr.Message + " ")
			found["blocked"] = m[1] == "logged" && m[2] == "1"
		case tr.Category == devhost.CategoryUser("OrderProcessor") && strings.HasPrefix(tr.Message, "order unblocked ") &&
			strings.Contains(tr.Message, "sessionId=logged"):
			found["unblocked"] = true
		case tr.Category == devhost.CategoryUser("LedgerIngest") && strings.HasPrefix(tr.Message, "ledger rejected"):
			found["rejected"] = true
		case tr.Category == devhost.CategoryConsole && tr.Level == devhost.LevelWarning && strings.Contains(tr.Message, "unreadable message"):
			found["unreadable"] = true
		}
	}
	for _, want := range []string{"outcome", "blocked", "unblocked", "rejected", "unreadable"} {
		if !found[want] {
			t.Errorf("Application Insights would not receive the %q line", want)
		}
	}
	if e.host.Telemetry().Dropped()[devhost.CategoryConsole+"/Information"] == 0 {
		t.Error("no stdout line was dropped: the filter of the shipped host.json was not applied")
	}
}

// TestChunkedUploadUnderForwarding: with enableForwardingHttpRequest the
// host forwards a body only when Content-Length > 0; a chunked upload
// arrives empty and gets a 400 naming the cause, never a success.
func TestChunkedUploadUnderForwarding(t *testing.T) {
	t.Parallel()
	e := start(t, stage(t, nil), azurite.Options{})
	doc, _ := os.ReadFile(filepath.Join(root, "testdata", "ledgers", "01-morning.json"))
	chunked := io.MultiReader(strings.NewReader(string(doc[:10])), strings.NewReader(string(doc[10:])))
	resp, err := http.Post(e.host.URL()+"/api/ledgers", "application/json", chunked)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	msg, _ := body["error"].(string)
	if resp.StatusCode != 400 || !strings.Contains(msg, "Content-Length") {
		t.Fatalf("chunked upload: %d %v; want 400 naming Content-Length", resp.StatusCode, body)
	}
	if st := e.host.Queue("orders").Stats(); st.Active != 0 || len(e.host.Queue("orders").Sent()) != 0 {
		t.Fatalf("an empty upload published something: %+v", st)
	}
	resp, err = http.Post(e.host.URL()+"/api/ledgers", "application/json", strings.NewReader(string(doc)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 202 {
		t.Fatalf("the same upload with Content-Length: %d, want 202", resp.StatusCode)
	}
}

// TestBatchModeLongSessionWithLockLoss: in batch dispatch nothing renews the
// session lock, so a long session loses it every lockDuration; the batch in
// flight comes back whole and the session still drains to its fold.
func TestBatchModeLongSessionWithLockLoss(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, 3*time.Minute)
	app := stage(t, hostJSON(map[string]any{"sessionIdleTimeout": "00:00:00.3", "maxMessageBatchSize": 20}, func(name string, fj map[string]any) {
		if name == "OrderProcessor" {
			fj["bindings"].([]any)[0].(map[string]any)["cardinality"] = "many"
		}
	}))
	e := startWith(t, app, azurite.Options{}, orderLock(100*time.Millisecond))
	slowCalls(e, "OrderProcessor", 10*time.Millisecond) // 20 batches per session outlast its 100 ms lock on any machine
	ledgers := e.publish(ctx, workload(17, "long", 2, 400, 2)...)
	e.waitIdle(ctx)
	if e.host.LockLosses() == 0 {
		t.Fatal("no batch lost its session lock: the scenario tests nothing")
	}
	e.checkFold(ctx, ledgers)
	t.Logf("%d invocations, %d lock losses", e.host.Invocations(), e.host.LockLosses())
}

// TestChunkedUploadUnderProxying: with enableProxyingHttpRequest the request
// is passed on as it is, so a chunked upload arrives whole.
func TestChunkedUploadUnderProxying(t *testing.T) {
	t.Parallel()
	app := stage(t, func(name string, doc map[string]any) {
		if name == "host.json" {
			ch := doc["customHandler"].(map[string]any)
			ch["enableForwardingHttpRequest"], ch["enableProxyingHttpRequest"] = false, true
		}
	})
	e := start(t, app, azurite.Options{})
	doc, _ := os.ReadFile(filepath.Join(root, "testdata", "ledgers", "01-morning.json"))
	chunked := io.MultiReader(strings.NewReader(string(doc[:10])), strings.NewReader(string(doc[10:])))
	resp, err := http.Post(e.host.URL()+"/api/ledgers", "application/json", chunked)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 202 {
		t.Fatalf("chunked upload under proxying: %d, want 202", resp.StatusCode)
	}
}
