package devhost_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/internal/devbus"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
)

// orderLag is what GET /api/orders/{id} answers of an order's lag, with the
// head's figures it is judged against.
type orderLag struct {
	AppliedSeq int64 `json:"appliedSeq"`
	Parked     int   `json:"parked"`
	Lag        struct {
		Backlog        int64            `json:"backlog"`
		HeadAgeSeconds *float64         `json:"headAgeSeconds"`
		Status         convoy.LagStatus `json:"status"`
		Window         int64            `json:"window"`
		Unavailable    string           `json:"unavailable"`
	} `json:"lag"`
}

// getLag reads an order's lag; ok is false while the order has no state (404).
func (e *env) getLag(ctx context.Context, id string) (orderLag, bool) {
	e.t.Helper()
	var out orderLag
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.host.URL()+"/api/orders/"+id+"?pageSize=1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("GET order %s: %v", id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return out, false
	}
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET order %s: %s", id, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		e.t.Fatalf("GET order %s: %v", id, err)
	}
	if out.Lag.Unavailable != "" {
		e.t.Fatalf("order %s: lag unavailable: %s", id, out.Lag.Unavailable)
	}
	return out, true
}

// lagLedger is a ledger of transactions for the orders given, each order's
// in sequence: n AddTransactions each (a CreateOrder first when create).
func lagLedger(id string, create bool, orders map[string]int) []byte {
	type tx = map[string]any
	var txs []tx
	for o, n := range orders {
		if create {
			txs = append(txs, tx{"orderId": o, "op": "CreateOrder", "currency": "EUR"})
		}
		for i := range n {
			txs = append(txs, tx{"orderId": o, "op": "AddTransaction", "txId": fmt.Sprintf("%s-%d", id, i), "amount": 1})
		}
	}
	doc, _ := json.Marshal(map[string]any{"ledgerId": id, "transactions": txs})
	return doc
}

// TestLagE2E: the lag OrderStatus and the summary report (docs/operations.md,
// "Lag per order"), with a window W of 4 s and AutoReplay run every quarter
// second (figures only: replay off). A healthy busy order, published to
// every half second (40 transactions each) for three windows, is never
// reported stalled, and is ok once it has applied everything. An order
// whose next message hangs its invocation for three windows (a dependency
// that does not answer; the session stays locked) is reported stalled by
// the summary within two windows, then stalled for two windows. An order
// whose next message fails every delivery (seq 2 of 2: dead-lettered,
// nothing parked behind it) is reported blocked once dead-lettered, by the
// summary and OrderStatus alike; an order whose seq 2 of 4 fails the same
// way, with seqs 3 and 4 parked behind the gap, is reported blocked within
// two windows, with a backlog of 3. Each applied message's outcome line
// carries criticalTimeMs, and the summary has critical times. An order fed
// straight to the orders queue by a producer of our own (no publisher: no
// counter, no allocation), blocked as `make break` blocks its poison order
// (seq 2 unreadable, dead-lettered; seq 3 parked), is counted blocked by the
// summary too.
func TestLagE2E(t *testing.T) {
	t.Parallel()
	const window = 4 * time.Second
	ctx := timeout(t, 3*time.Minute)
	e := startWith(t, stage(t, nil), azurite.Options{}, func(o *devhost.Options) {
		o.Settings["LagWindowSeconds"] = fmt.Sprint(int(window / time.Second))
		o.Settings["AutoReplayEnabled"] = "false"
	})
	var hung sync.Once
	e.host.InjectFault(func(fn string, msgs []*devbus.Message) error {
		for _, m := range msgs {
			seq, _ := convoy.IntProperty(m.Properties[convoy.PropSeq])
			switch {
			case fn != "OrderProcessor" || seq != 2:
			case m.SessionID == "lag-stuck" || m.SessionID == "lag-gap":
				return fmt.Errorf("injected: a dependency is down for %s", m.MessageID)
			case m.SessionID == "lag-slow":
				hung.Do(func() { time.Sleep(3 * window) })
			}
		}
		return nil
	})
	published := time.Now()
	e.publish(ctx, lagLedger("L-lag-0", true, map[string]int{"lag-busy": 20, "lag-stuck": 1, "lag-gap": 3, "lag-slow": 1}))
	e.poison(t, "lag-direct")

	// The busy order: a ledger every half second (40 transactions each) for three windows.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; time.Since(published) < 3*window; i++ {
			e.publish(ctx, lagLedger(fmt.Sprintf("L-lag-%d", i), false, map[string]int{"lag-busy": 40}))
			time.Sleep(500 * time.Millisecond)
		}
	}()

	var stalledAt, blockedAt, slowStalledAt, slowTwoWindowsAt, stuckBlockedAt time.Duration
	seen := map[convoy.LagStatus]int{}
	var critical *heal.CriticalTimeFigures
	for time.Since(published) < 4*window {
		if err := e.host.FireTimer(ctx, "AutoReplay", 0); err != nil {
			t.Fatal(err)
		}
		var sum heal.Summary
		if code := e.get(t, "/api/summary", &sum); code != http.StatusOK || sum.Lag == nil {
			t.Fatalf("summary: %d, lag %+v", code, sum.Lag)
		}
		at := time.Since(published)
		for _, h := range sum.Lag.OldestHeads {
			switch {
			case h.OrderID == "lag-busy" && (h.Status == convoy.LagStalled || h.Status == convoy.LagBlocked):
				t.Fatalf("the summary at %v: the busy order %s", at, h.Status)
			case h.OrderID == "lag-slow" && h.Status == convoy.LagStalled && slowStalledAt == 0:
				slowStalledAt = at
			case h.OrderID == "lag-stuck" && h.Status == convoy.LagBlocked && stuckBlockedAt == 0:
				stuckBlockedAt = at
			}
		}
		if sum.Lag.StalledTwoWindows > 0 && slowTwoWindowsAt == 0 {
			slowTwoWindowsAt = at
		}
		if sum.Lag.CriticalTime != nil {
			critical = sum.Lag.CriticalTime
		}
		if l, ok := e.getLag(ctx, "lag-busy"); ok {
			seen[l.Lag.Status]++
			if l.Lag.Status == convoy.LagStalled || l.Lag.Status == convoy.LagBlocked || l.Lag.Window != int64(window/time.Second) {
				t.Fatalf("the busy order at %v: %+v, want ok or catching-up over a window of %v", time.Since(published), l, window)
			}
		}
		if l, ok := e.getLag(ctx, "lag-slow"); ok && stalledAt == 0 && l.Lag.Status == convoy.LagStalled {
			stalledAt = time.Since(published)
			if l.AppliedSeq != 1 || l.Lag.Backlog != 1 || l.Parked != 0 || l.Lag.HeadAgeSeconds == nil || *l.Lag.HeadAgeSeconds < window.Seconds()-1 {
				t.Fatalf("the hung order, stalled: %+v, want appliedSeq 1, backlog 1, nothing parked, head waiting about a window or more", l)
			}
		}
		if l, ok := e.getLag(ctx, "lag-gap"); ok && blockedAt == 0 && l.Lag.Status == convoy.LagBlocked {
			blockedAt = time.Since(published) // seq 3 parked; seq 4 may be on its way
			if l.AppliedSeq != 1 || l.Lag.Backlog != 3 || l.Parked == 0 {
				t.Fatalf("the order with a gap, blocked: %+v, want appliedSeq 1, backlog 3, parked", l)
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	wg.Wait()
	t.Logf("hung order stalled after %v (summary %v, for two windows %v), gap order blocked after %v, dead-lettered order blocked after %v; the busy order's statuses seen: %v",
		stalledAt, slowStalledAt, slowTwoWindowsAt, blockedAt, stuckBlockedAt, seen)
	if stalledAt == 0 || stalledAt > 2*window || slowStalledAt == 0 || slowStalledAt > 2*window {
		t.Errorf("the hung order reported stalled after %v by OrderStatus, %v by the summary (0: never), want within two windows (%v)", stalledAt, slowStalledAt, 2*window)
	}
	if slowTwoWindowsAt < 2*window || slowTwoWindowsAt > 3*window {
		t.Errorf("stalled for two windows first reported at %v, want between two and three windows (%v, %v)", slowTwoWindowsAt, 2*window, 3*window)
	}
	if stuckBlockedAt == 0 {
		t.Errorf("the summary never reported the dead-lettered order blocked")
	}
	if critical == nil || critical.Count == 0 || critical.P50Ms > critical.P99Ms || critical.P99Ms > critical.MaxMs {
		t.Errorf("the summary's critical times: %+v, want some, p50 ≤ p99 ≤ max", critical)
	}
	if blockedAt == 0 || blockedAt > 2*window {
		t.Errorf("the order with a gap reported blocked after %v (0: never), want within two windows (%v)", blockedAt, 2*window)
	}
	if seen[convoy.LagCatchingUp] == 0 {
		t.Errorf("the busy order was never seen catching up (%v): the test did not keep it busy", seen)
	}
	e.waitIdle(ctx)
	if l, _ := e.getLag(ctx, "lag-busy"); l.Lag.Status != convoy.LagOK || l.Lag.Backlog != 0 || l.Lag.HeadAgeSeconds != nil || l.AppliedSeq < 21 {
		t.Errorf("the busy order, idle: %+v, want ok with nothing waiting", l)
	}
	if l, _ := e.getLag(ctx, "lag-gap"); l.Lag.Status != convoy.LagBlocked || l.AppliedSeq != 1 || l.Lag.Backlog != 3 || l.Parked != 2 {
		t.Errorf("the order with a gap, at the end: %+v, want blocked, appliedSeq 1, backlog 3, 2 parked", l)
	}
	// Its message dead-lettered, nothing behind it: blocked, not stalled
	// (as an AutoReplay run noted it).
	if l, _ := e.getLag(ctx, "lag-stuck"); l.Lag.Status != convoy.LagBlocked || l.Lag.Backlog != 1 || l.Parked != 0 {
		t.Errorf("the dead-lettered order, at the end: %+v, want blocked with backlog 1, nothing parked", l)
	}
	// The hung order caught up once its invocation returned.
	if l, _ := e.getLag(ctx, "lag-slow"); l.Lag.Status != convoy.LagOK || l.AppliedSeq != 2 {
		t.Errorf("the hung order, at the end: %+v, want ok, both applied", l)
	}
	// The summary counts the three blocked orders, the one fed directly too.
	if l, _ := e.getLag(ctx, "lag-direct"); l.Lag.Status != convoy.LagBlocked || l.AppliedSeq != 1 || l.Parked != 1 {
		t.Errorf("the order fed directly, at the end: %+v, want blocked, appliedSeq 1, 1 parked", l)
	}
	if err := e.host.FireTimer(ctx, "AutoReplay", 0); err != nil {
		t.Fatal(err)
	}
	var sum heal.Summary
	if code := e.get(t, "/api/summary", &sum); code != http.StatusOK || sum.Lag == nil || sum.Lag.ByStatus[convoy.LagBlocked] != 3 {
		t.Errorf("the summary at the end: %d, lag %+v; want 3 blocked (lag-gap, lag-stuck, lag-direct)", code, sum.Lag)
	}

	logText := e.log.String()
	applied := regexp.MustCompile(`order message [^\n]*sessionId=lag-busy [^\n]*outcome=applied[^\n]*`).FindAllString(logText, -1)
	timed := 0
	for _, line := range applied {
		if strings.Contains(line, "criticalTimeMs=") {
			timed++
		}
	}
	if len(applied) == 0 || timed != len(applied) {
		t.Errorf("%d of the busy order's %d applied lines carry criticalTimeMs, want all", timed, len(applied))
	}
}
