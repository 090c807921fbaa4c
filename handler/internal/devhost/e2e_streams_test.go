package devhost_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/internal/convoytest"
	"github.com/convoy-dev/convoy/handler/internal/devbus"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
	"github.com/convoy-dev/convoy/handler/internal/devhost/cmd/convoy-devhost/demo"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/ledger"
)

// Ledger streams (docs/contract.md, issue 15): the ledgers queue is
// session-enabled and a ledger's stream is its SessionId, so the ledgers of
// one stream are de-batched one at a time, in the order they were sent,
// whichever instance takes them; streams run in parallel; a ledger that
// fails holds its stream until it succeeds or is dead-lettered.

// streamLedgers makes count ledgers of n transactions over the stream's own
// orders (prefix-NN); the first creates them. Every ledger of a stream
// touches the same orders, so any overtaking changes the orders' states.
func streamLedgers(seed uint64, stream string, count, n, orders int) [][]byte {
	var docs [][]byte
	for _, doc := range workload(seed, stream, count, n, orders) {
		withStream, err := ledger.WithStream(doc, stream)
		if err != nil {
			panic(err)
		}
		docs = append(docs, withStream)
	}
	return docs
}

// foldInOrder is the oracle: each order's transactions taken from the
// ledgers in the order given (send order per stream), numbered 1, 2, …,
// folded by the independent fold. It never looks at seqs the product chose.
func foldInOrder(ledgers []*ledger.Ledger) map[string]convoytest.Expected {
	msgs := map[string][]convoy.Message{}
	for _, l := range ledgers {
		for _, e := range l.Entries() {
			msgs[e.Key] = append(msgs[e.Key], convoy.Message{Seq: int64(len(msgs[e.Key]) + 1), Last: e.Last, Command: e.Command})
		}
	}
	want := map[string]convoytest.Expected{}
	for id, m := range msgs {
		want[id] = convoytest.Fold(m)
	}
	return want
}

// invocations records, through the fault hook, every LedgerIngest call as it
// starts (the hook runs before the call is made), and fails the deliveries
// a test asks to fail.
type invocations struct {
	mu    sync.Mutex
	calls []string       // MessageIds in the order their calls began
	fail  map[string]int // MessageId → deliveries to fail (up to and including this DeliveryCount)
	hold  time.Duration  // how long a failing delivery takes (an outage is slow)
}

func (r *invocations) hook(fn string, msgs []*devbus.Message) error {
	if fn != "LedgerIngest" {
		return nil
	}
	r.mu.Lock()
	r.calls = append(r.calls, msgs[0].MessageID)
	failing := msgs[0].DeliveryCount <= r.fail[msgs[0].MessageID]
	r.mu.Unlock()
	if failing {
		time.Sleep(r.hold)
		return fmt.Errorf("injected: Table Storage unavailable for ledger %s (delivery %d)", msgs[0].MessageID, msgs[0].DeliveryCount)
	}
	return nil
}

func (r *invocations) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// publishedLine is a successful LedgerIngest call's outcome as the emulation
// logs it: which instance, which ledger.
var publishedLine = regexp.MustCompile(`(?m) i(\d+) → AI Function\.LedgerIngest\.User \[Information\]: ledger published ledgerId=(\S+) stream=(\S+)`)

// streamScenario runs the scenario and returns what went wrong (nothing when
// the product keeps its promise), and whether the schedule spread the
// streams over the three instances and moved one (with sessions; the
// scenario stops there when it did not). sessions=false is the mutation:
// the same app with LedgerIngest on a queue without sessions.
func streamScenario(t *testing.T, sessions bool) (problems []string, spread bool) {
	ctx := timeout(t, 3*time.Minute)
	// One session per instance: three streams at once take all three
	// instances, whichever receiver wins each session.
	app := stage(t, hostJSON(map[string]any{"maxConcurrentSessions": 1, "sessionIdleTimeout": "00:00:00.2"}, func(name string, doc map[string]any) {
		if name == "LedgerIngest" && !sessions {
			doc["bindings"].([]any)[0].(map[string]any)["isSessionsEnabled"] = false
		}
	}))
	e := startWith(t, app, azurite.Options{}, func(o *devhost.Options) {
		o.MinInstances, o.MaxInstances = 3, 3
		if !sessions {
			p := o.Queues["ledgers"]
			p.RequiresSession = false
			o.Queues["ledgers"] = p
		}
	})
	const waves, perWave = 6, 2
	a := streamLedgers(31, "erp-eu", waves*perWave, 40, 6)
	b := streamLedgers(32, "erp-us", waves*perWave, 40, 6)
	c := streamLedgers(33, "pos-1", 4, 20, 3)
	parse := func(docs [][]byte) []*ledger.Ledger {
		var ls []*ledger.Ledger
		for _, d := range docs {
			l, err := ledger.Parse(d, ledger.Limits{}, ledgertest.Orders)
			if err != nil {
				t.Fatal(err)
			}
			ls = append(ls, l)
		}
		return ls
	}
	la, lb, lc := parse(a), parse(b), parse(c)
	// erp-eu's fifth ledger meets a storage outage on its first three
	// deliveries (each slow); pos-1's second ledger on every delivery, so it
	// is dead-lettered after ten.
	rec := &invocations{fail: map[string]int{la[4].ID: 3, lc[1].ID: 10}, hold: 150 * time.Millisecond}
	e.host.InjectFault(rec.hook)

	// Waves of ledgers, each sent in order; between waves the sessions go
	// idle and any instance may take a stream next. The second wave is sent
	// while pos-1's failing ledger is still being delivered, so that its
	// stream's later ledgers wait behind it; after that, each wave is taken
	// whole before the next is sent: on a loaded machine a fixed pause left
	// every session with the instance that had it, and no stream moved.
	for w := range waves {
		var batch [][]byte
		for i := w * perWave; i < (w+1)*perWave; i++ {
			batch = append(batch, a[i], b[i])
			if i < len(c) {
				batch = append(batch, c[i])
			}
		}
		e.publish(ctx, batch...)
		if w > 0 {
			waitFor(t, fmt.Sprintf("wave %d's ledgers all taken", w), time.Minute, func() bool { return e.host.Queue("ledgers").Stats().Active == 0 })
		}
		time.Sleep(600 * time.Millisecond) // three idle timeouts: the receivers let their sessions go
	}
	e.waitIdle(ctx)

	bad := func(format string, args ...any) {
		p := fmt.Sprintf(format, args...)
		if len(p) > 400 {
			p = p[:400] + "…"
		}
		problems = append(problems, p)
	}

	// 1. Per stream, calls began one at a time in send order: a later ledger
	// never began before an earlier one's last delivery (the failing ones included).
	calls := rec.list()
	for _, stream := range [][]*ledger.Ledger{la, lb, lc} {
		index := map[string]int{}
		for i, l := range stream {
			index[l.ID] = i
		}
		last := -1
		for _, id := range calls {
			i, ok := index[id]
			if !ok {
				continue
			}
			if i < last {
				bad("stream %s: ledger %d was delivered after ledger %d had begun (calls %v)", stream[0].Stream, i, last, filter(calls, index))
				break
			}
			last = i
		}
	}
	// 2. The dead-lettered ledger was delivered ten times, then its stream moved on.
	dead := e.host.Queue("ledgers").DeadLetters()
	if len(dead) != 1 || dead[0].MessageID != lc[1].ID || dead[0].DeliveryCount != 10 {
		bad("ledgers dead-lettered: %+v, want %s after 10 deliveries", dead, lc[1].ID)
	}
	// 3. Every order equals the fold of its stream's ledgers in send order
	// (pos-1 without its dead-lettered ledger).
	applied := append(append(slices.Clone(la), lb...), lc[0])
	applied = append(applied, lc[2:]...)
	for id, w := range foldInOrder(applied) {
		got, err := demo.GetOrder(ctx, e.host.URL(), id)
		if err != nil {
			t.Fatalf("order %s: %v", id, err)
		}
		if problem := demo.CompareViews(got, w); problem != "" {
			bad("order %s: %s", id, problem)
		}
	}
	if n := e.host.Queue("orders").Stats().DeadLettered; n != 0 {
		bad("%d order message(s) dead-lettered", n)
	}
	// 4. The instances: all three de-batched ledgers, and a stream moved
	// between instances (its session was taken by another once idle).
	log := e.log.String()
	byStream := map[string]map[string]bool{}
	all := map[string]bool{}
	for _, m := range publishedLine.FindAllStringSubmatch(log, -1) {
		if byStream[m[3]] == nil {
			byStream[m[3]] = map[string]bool{}
		}
		byStream[m[3]][m[1]] = true
		all[m[1]] = true
	}
	moved := false
	for _, ins := range byStream {
		moved = moved || len(ins) > 1
	}
	if sessions && (len(all) < 3 || !moved) {
		t.Logf("ledgers were de-batched on instances %v per stream: this schedule did not spread the streams over 3 instances", byStream)
		return problems, false
	}
	t.Logf("sessions %v: instances per stream %v; %d LedgerIngest calls; %d invocations, %d failed", sessions, byStream, len(calls),
		e.host.Invocations(), e.host.Failures())

	// 5. The operator re-sends the dead-lettered ledger over HTTP once the
	// cause is fixed: published now, after the stream's later ledgers.
	if sessions {
		resp, err := http.Post(e.host.URL()+"/api/ledgers", "application/json", strings.NewReader(string(c[1])))
		if err != nil {
			t.Fatal(err)
		}
		var sum map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&sum)
		resp.Body.Close()
		if resp.StatusCode != 202 {
			t.Fatalf("re-upload of the dead-lettered ledger: %d %v", resp.StatusCode, sum)
		}
		e.waitIdle(ctx)
		for id, w := range foldInOrder(append(lc[:1:1], append(slices.Clone(lc[2:]), lc[1])...)) {
			got, _ := demo.GetOrder(ctx, e.host.URL(), id)
			if problem := demo.CompareViews(got, w); problem != "" {
				bad("after the re-upload, order %s: %s", id, problem)
			}
		}
	}
	return problems, true
}

func filter(calls []string, index map[string]int) []int {
	var out []int
	for _, id := range calls {
		if i, ok := index[id]; ok {
			out = append(out, i)
		}
	}
	return out
}

// TestLedgerStreamsInOrderAcrossInstances: three instances, three streams
// sent in waves; one ledger meets a storage outage on its first deliveries,
// another fails until it is dead-lettered. Each stream's ledgers begin one
// after the other in send order, whatever instance takes them, and every
// order equals the fold of its stream's ledgers in send order.
//
// Which instance takes a session is the scheduler's (and, on a loaded
// machine, the clock's) choice; with one session per instance the three
// streams take all three instances, but a run whose schedule never moved a
// stream proves less, so it is run again, up to three times.
func TestLedgerStreamsInOrderAcrossInstances(t *testing.T) {
	t.Parallel()
	const attempts = 3
	for range attempts {
		problems, spread := streamScenario(t, true)
		if len(problems) > 0 {
			t.Fatalf("%d problem(s):\n%s", len(problems), strings.Join(problems, "\n"))
		}
		if spread {
			return
		}
	}
	t.Fatalf("in %d runs the schedule never spread the streams over 3 instances", attempts)
}

// TestLedgerStreamsNeedSessions is the scenario's mutation check: with
// LedgerIngest on a queue without sessions (as before streams), instances
// take a stream's ledgers concurrently and a later one overtakes the one
// that fails: the checks above must see it.
func TestLedgerStreamsNeedSessions(t *testing.T) {
	t.Parallel()
	problems, _ := streamScenario(t, false)
	if len(problems) == 0 {
		t.Fatal("without sessions the scenario found nothing wrong: it cannot tell ordered streams from unordered ones")
	}
	t.Logf("without sessions, as expected: %s", strings.Join(problems, "\n"))
}
