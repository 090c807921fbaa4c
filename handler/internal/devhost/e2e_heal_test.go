package devhost_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/internal/devbus"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
	"github.com/convoy-dev/convoy/handler/internal/devhost/cmd/convoy-devhost/demo"
	"github.com/convoy-dev/convoy/handler/ledger"
)

// Automatic ordered replay (AutoReplay, a timer) on the emulation: an
// outage dead-letters messages, and the orders heal with no operator.

// healSettings: AutoReplay every second, backoff 1 s doubling up to 4 s,
// breaker 1 s; a 1 s in-call retry budget and three deliveries per message,
// so that an outage dead-letters messages within seconds.
func healSettings(o *devhost.Options) {
	for k, v := range map[string]string{"AutoReplaySchedule": "*/1 * * * * *", "AutoReplayBackoffSeconds": "1",
		"AutoReplayBackoffMaxSeconds": "4", "AutoReplayBreakerSeconds": "1", "TransientRetrySeconds": "1"} {
		o.Settings[k] = v
	}
	p := o.Queues["orders"]
	p.MaxDeliveryCount = 3
	o.Queues["orders"] = p
}

// poison sends an order whose seq 2 can never be read (its amount is text).
func (e *env) poison(t *testing.T, order string) {
	t.Helper()
	msg := func(seq int64, body string) *azservicebus.Message {
		return rawOrderMessage(fmt.Sprintf("P-%s:%d", order, seq), order, "P", seq, body)
	}
	e.send(context.Background(), "orders",
		msg(1, fmt.Sprintf(`{"transaction":{"orderId":%q,"op":"CreateOrder","currency":"EUR"}}`, order)),
		msg(2, fmt.Sprintf(`{"transaction":{"orderId":%q,"op":"AddTransaction","txId":"t-1","amount":"a lot"}}`, order)),
		msg(3, fmt.Sprintf(`{"transaction":{"orderId":%q,"op":"AddTransaction","txId":"t-2","amount":5}}`, order)),
	)
}

// foldOf compares the orders of ledgers with their fold (not the poisoned
// order, whose messages are no ledger's).
func (e *env) foldOf(ctx context.Context, ledgers []*ledger.Ledger) string {
	want, err := demo.ExpectedOrders(ledgers, e.host.Queue("orders").Sent())
	if err != nil {
		return err.Error()
	}
	for id, w := range want {
		got, err := demo.GetOrder(ctx, e.host.URL(), id)
		if err != nil {
			return fmt.Sprintf("order %s: %v", id, err)
		}
		if p := demo.CompareViews(got, w); p != "" {
			return fmt.Sprintf("order %s: %s", id, p)
		}
	}
	return ""
}

// TestAutoReplayHealsAfterOutage: Azurite stops while the orders are being
// processed; their messages exhaust their deliveries and are dead-lettered,
// and the later ones park behind them. Azurite comes back; with no operator
// action, AutoReplay replays every dead letter of a transient cause, and
// every order ends equal to its fold within the backoff's bound. The poison
// message is never replayed: it stays dead-lettered, and its order stays
// listed with its reason. Two firings at once (a lost timer lock) replay
// nothing twice.
func TestAutoReplayHealsAfterOutage(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, 3*time.Minute)
	dir := t.TempDir()
	e := startWith(t, stage(t, nil), azurite.Options{Dir: dir}, healSettings)
	e.poison(t, "poisoned")
	e.waitIdle(ctx)
	// Hold the order messages until Azurite is down.
	gate := make(chan struct{})
	e.host.InjectFault(func(fn string, _ []*devbus.Message) error {
		if fn == "OrderProcessor" {
			<-gate
		}
		return nil
	})
	ledgers := e.publish(ctx, workload(31, "heal", 2, 40, 6)...)
	for e.host.Queue("ledgers").Stats().Active > 0 || e.host.Queue("orders").Stats().Active == 0 {
		if ctx.Err() != nil {
			t.Fatal("the ledgers were not de-batched")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the ledgers' calls complete
	e.az.Stop()
	close(gate)
	e.host.InjectFault(nil)
	q := e.host.Queue("orders")
	for len(q.DeadLetters()) < 4 {
		if ctx.Err() != nil {
			t.Fatal("nothing was dead-lettered during the outage")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A run during the outage replays nothing: it says it paused (the
	// breaker opens), in the Logs of its successful call.
	for !e.traced(devhost.CategoryUser("AutoReplay"), "auto-replay paused ") {
		if ctx.Err() != nil {
			t.Fatal("no run said it paused during the outage")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if e.traced(devhost.CategoryUser("AutoReplay"), "auto-replay replayed ") {
		t.Fatal("a run replayed while storage was down")
	}
	restarted, err := azurite.Start(azurite.Options{Dir: dir, Port: e.az.Port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(restarted.Stop)
	back := time.Now()
	dead := len(q.DeadLetters())

	// Meanwhile two firings at once, as with a lost timer lock.
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- e.host.FireTimer(ctx, "AutoReplay", 0) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}

	// Healed with no operator: every ledger order equals its fold.
	var problem string
	for {
		e.waitIdle(ctx)
		if problem = e.foldOf(ctx, ledgers); problem == "" && len(q.DeadLetters()) == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("not healed: %s; dead letters %d", problem, len(q.DeadLetters()))
		}
		time.Sleep(200 * time.Millisecond)
	}
	healed := time.Since(back)
	// Every dead letter was re-sent once: one replay copy per dead-lettered copy.
	copies := map[string]int{}
	for _, m := range q.Sent() {
		if strings.HasPrefix(m.MessageID, "P-poisoned:") && strings.Contains(m.MessageID, "#replay-") {
			t.Fatalf("the poison message was replayed: %s", m.MessageID)
		}
		if root, _, ok := strings.Cut(m.MessageID, "#replay-"); ok {
			copies[m.MessageID]++
			if copies[m.MessageID] > 1 {
				t.Fatalf("%s (of %s) was re-sent twice", m.MessageID, root)
			}
		}
	}
	if left := q.DeadLetters(); len(left) != 1 || left[0].SessionID != "poisoned" {
		t.Fatalf("dead letters left %+v, want the poison message only", left)
	}
	if len(copies) < dead-1 {
		t.Fatalf("%d replayed copies for %d dead letters of a transient cause", len(copies), dead-1)
	}
	// The poisoned order stays blocked, listed with where its message is and why.
	blocked := e.blocked(t)
	if len(blocked) != 1 || blocked[0]["orderId"] != "poisoned" {
		t.Fatalf("blocked orders %v, want the poisoned one only", blocked)
	}
	m, _ := blocked[0]["missing"].(map[string]any)
	if m["where"] != "deadLetter" || m["cause"] != "permanent" || m["deadLetterReason"] != "MaxDeliveryCountExceeded" || !strings.Contains(fmt.Sprint(m["why"]), "unreadable") {
		t.Fatalf("the poisoned order's missing message: %v", m)
	}
	var sum map[string]any
	if code := e.get(t, "/api/summary", &sum); code != 200 {
		t.Fatalf("summary: %d %v", code, sum)
	}
	dl, _ := sum["deadLetters"].(map[string]any)
	ar, _ := sum["autoReplay"].(map[string]any)
	if sum["blockedOrders"] != 1.0 || dl["permanent"] != 1.0 || dl["total"] != 1.0 || ar["pending"] != 0.0 || ar["replayed"].(float64) < float64(dead-1) {
		t.Fatalf("summary %v", sum)
	}
	t.Logf("%d dead letters during the outage; healed %s after storage came back", dead, healed.Round(time.Millisecond))
	// The bound: the breaker's pauses (1, 2, 4 s at most while storage was
	// down) and backoffs of at most 4 s, plus processing.
	if healed > 60*time.Second {
		t.Fatalf("healed after %s, beyond the backoff's bound", healed)
	}
	// What Application Insights received fires each alert rule Bicep deploys,
	// but orders-stalled: this run is shorter than two lag windows
	// (LagWindowSeconds, 300 s by default), and its orders wait behind gaps
	// (blocked), so none has stalled for two; TestAlertQueriesMatchWhatArrives
	// holds that rule to the metrics line.
	for name, rows := range alertRows(t, e.host.Telemetry().Traces(), 0) {
		if rows == 0 && name != "stalled" {
			t.Errorf("alert rule %s: its query matches nothing Application Insights received", name)
		}
	}
}

// traced reports whether Application Insights received a line of category
// starting with prefix.
func (e *env) traced(category, prefix string) bool {
	for _, tr := range e.host.Telemetry().Traces() {
		if tr.Category == category && strings.HasPrefix(tr.Message, prefix) {
			return true
		}
	}
	return false
}
