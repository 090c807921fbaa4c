package convoy_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/internal/convoytest"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/orders"
)

// randomOrder returns the messages of one order, seq 1..n: mostly valid
// transactions, with business violations mixed in.
func randomOrder(r *rand.Rand, id string) []convoy.Message {
	n := 1 + r.IntN(25)
	amount := func() *int64 { return amt(r.Int64N(2001) - 1000) }
	if r.IntN(4) == 0 { // amounts that take the total past ±(2^53 - 1) after about nine
		sign := 1 - 2*r.Int64N(2)
		amount = func() *int64 { return amt(sign * (orders.MaxAmount - r.Int64N(1000))) }
	}
	var msgs []convoy.Message
	var txIDs []string
	for seq := int64(1); seq <= int64(n); seq++ {
		tx := orders.Transaction{OrderID: id}
		switch k := r.IntN(20); {
		case seq == 1 && k < 17, k == 0: // create first (or, rarely, again)
			tx.Op, tx.Currency = orders.CreateOrder, []string{"EUR", "USD"}[r.IntN(2)]
		case k < 11 || len(txIDs) == 0:
			tx.Op, tx.TxID, tx.Amount = orders.AddTransaction, fmt.Sprintf("t-%d", r.IntN(int(seq)+1)), amount()
			txIDs = append(txIDs, tx.TxID)
		case k < 18:
			tx.Op, tx.Amount = orders.ModifyTransaction, amount()
			tx.TxID = txIDs[r.IntN(len(txIDs))]
			if r.IntN(6) == 0 {
				tx.TxID = "t-unknown"
			}
		default:
			tx.Op = orders.DeleteOrder
		}
		msgs = append(msgs, convoy.Message{Seq: seq, MessageID: fmt.Sprintf("L:%s:%d", id, seq), Command: tx})
	}
	if r.IntN(3) == 0 { // end the sequence somewhere, maybe before the end
		msgs[r.IntN(n)].Last = true
	}
	return msgs
}

// delivery is one invocation: one message or a batch of one order's messages.
type delivery struct {
	order string
	msgs  []convoy.Message
}

// TestProcessorProperty: whatever the delivery (duplicates, any order,
// batches, failures before a commit, failures after one, two instances with
// their own caches), every order ends in the state of its fold.
func TestProcessorProperty(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 30
	}
	for seed := range uint64(seeds) {
		r := rand.New(rand.NewPCG(seed, 42))
		store := memstore.New()
		store.Fail = func(string, string) error {
			if r.IntN(10) == 0 {
				return fault.Errorf(fault.Unavailable, "injected outage")
			}
			return nil
		}
		store.LoseReply = func(string) bool { return r.IntN(10) == 0 }
		// No retries inside the invocation: every failure becomes a redelivery.
		opts := convoy.ProcessorOptions{Domain: orders.Domain, Retry: fault.RetryPolicy{MaxAttempts: 1}, CacheSize: 2 + r.IntN(4)}
		instances := []*convoy.Processor{convoy.NewProcessor(store, opts), convoy.NewProcessor(store, opts)}

		byOrder := map[string][]convoy.Message{}
		var queue []delivery
		for i := range 1 + r.IntN(8) {
			id := fmt.Sprintf("o-%d", i)
			byOrder[id] = randomOrder(r, id)
			var msgs []convoy.Message
			for _, m := range byOrder[id] {
				msgs = append(msgs, m)
				for r.IntN(5) == 0 { // duplicates
					msgs = append(msgs, m)
				}
			}
			r.Shuffle(len(msgs), func(a, b int) { msgs[a], msgs[b] = msgs[b], msgs[a] })
			for len(msgs) > 0 { // single messages and batches
				k := 1
				if r.IntN(3) == 0 {
					k = 1 + r.IntN(len(msgs))
				}
				queue = append(queue, delivery{id, msgs[:k]})
				msgs = msgs[k:]
			}
		}
		r.Shuffle(len(queue), func(a, b int) { queue[a], queue[b] = queue[b], queue[a] })

		for steps := 0; len(queue) > 0; steps++ {
			if steps > 100_000 {
				t.Fatalf("seed %d: deliveries never settled", seed)
			}
			d := queue[0]
			queue = queue[1:]
			p := instances[r.IntN(len(instances))]
			if _, err := p.Process(context.Background(), d.order, d.msgs); err != nil {
				if !fault.IsTransient(err) {
					t.Fatalf("seed %d: permanent error %v", seed, err)
				}
				queue = append(queue, d) // abandoned: delivered again later
			}
		}

		store.Fail, store.LoseReply = nil, nil
		for id, msgs := range byOrder {
			o, err := store.Load(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			cv, err := convoy.ReadView(context.Background(), orders.Domain, store, store, id, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			v := orders.ViewOf(cv)
			sum := int64(0)
			for _, x := range v.Transactions {
				sum += x.Amount
			}
			if txCount := orders.StateOf(o).TxCount; sum != v.Total || txCount != int64(len(v.Transactions)) {
				t.Fatalf("seed %d, order %s: head total %d and count %d, transactions %+v", seed, id, v.Total, txCount, v.Transactions)
			}
			want, got := convoytest.Fold(msgs), convoytest.Observe(cv)
			if len(want.Txs) == 0 {
				want.Txs = nil
			}
			if len(got.Txs) == 0 {
				got.Txs = nil
			}
			if !reflect.DeepEqual(got, want) || o.AppliedSeq != int64(len(msgs)) || len(o.Parked) != 0 {
				t.Fatalf("seed %d, order %s: appliedSeq %d of %d, parked %d\n got %+v\nwant %+v",
					seed, id, o.AppliedSeq, len(msgs), len(o.Parked), got, want)
			}
		}
	}
}

// TestLongDrainCommitsInSteps: a gap filled behind more parked messages than
// one commit can hold drains completely, in several atomic commits.
func TestLongDrainCommitsInSteps(t *testing.T) {
	store := memstore.New()
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain})
	ctx := context.Background()
	const n = 350
	for seq := int64(n); seq >= 2; seq-- {
		if _, err := p.Process(ctx, "o-1", []convoy.Message{add(seq, fmt.Sprintf("t-%d", seq), 1)}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := p.Process(ctx, "o-1", []convoy.Message{create(1)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Outcomes) != n || res.Commits < 2*n/convoy.MaxChangeRecords {
		t.Fatalf("%d outcomes in %d commits; want %d outcomes in several commits", len(res.Outcomes), res.Commits, n)
	}
	o, _ := store.Load(ctx, "o-1")
	if total := orders.StateOf(o).Total; o.AppliedSeq != n || len(o.Parked) != 0 || total != n-1 {
		t.Fatalf("after drain: applied %d parked %d total %d", o.AppliedSeq, len(o.Parked), total)
	}
}

// TestRetryInsideInvocation: a brief outage is ridden out within one call.
func TestRetryInsideInvocation(t *testing.T) {
	store := memstore.New()
	failures := 3
	store.Fail = func(op, _ string) error {
		if op == "commit" && failures > 0 {
			failures--
			return fault.Errorf(fault.Unavailable, "injected outage")
		}
		return nil
	}
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Retry: fault.RetryPolicy{Initial: time.Millisecond, MaxElapsed: 5 * time.Second}})
	res, err := p.Process(context.Background(), "o-1", []convoy.Message{create(1)})
	if err != nil || res.Outcomes[0].Disposition != convoy.Applied || failures != 0 {
		t.Fatalf("outcome %+v, err %v, failures left %d", res.Outcomes, err, failures)
	}
}

// TestSkipReportsAFailedCommit: a skip whose commit fails says so and
// changes nothing.
func TestSkipReportsAFailedCommit(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Retry: fault.RetryPolicy{MaxAttempts: 1}})
	if _, err := p.Process(ctx, "o-1", []convoy.Message{add(3, "t-1", 5)}); err != nil {
		t.Fatal(err)
	}
	store.Fail = func(op, _ string) error {
		if op == "commit" {
			return fault.Errorf(fault.Unavailable, "storage down")
		}
		return nil
	}
	if _, _, err := p.Skip(ctx, "o-1", 1); err == nil {
		t.Fatal("a skip whose commit failed reported success")
	}
	store.Fail = nil
	o, _ := store.Load(ctx, "o-1")
	if o.AppliedSeq != 0 || len(o.Parked) != 1 {
		t.Fatalf("the failed skip changed the order: %+v", viewOf(o))
	}
	// With storage back, the same skip succeeds: seq 1 is rejected, seq 3 still waits for seq 2.
	if _, _, err := p.Skip(ctx, "o-1", 1); err != nil {
		t.Fatal(err)
	}
	o, _ = store.Load(ctx, "o-1")
	if o.AppliedSeq != 1 || len(o.Parked) != 1 || o.MissingSeq() != 2 {
		t.Fatalf("after the skip: %+v", viewOf(o))
	}
}

// TestBlockedReportedAfterPartialCommit: a call whose first commit blocks
// the order and whose next commit fails still reports the blocking once it
// succeeds on retry (the first attempt's commit is durable).
func TestBlockedReportedAfterPartialCommit(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	commits := 0
	store.Fail = func(op, _ string) error {
		if op == "commit" {
			commits++
			if commits == 2 {
				return fault.Errorf(fault.Unavailable, "storage down")
			}
		}
		return nil
	}
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Retry: fault.RetryPolicy{Initial: time.Millisecond, MaxElapsed: 5 * time.Second}})
	// 150 early messages: more than one commit holds, so the first commit parks
	// part of them (blocking the order) and the second fails.
	var msgs []convoy.Message
	for seq := int64(2); seq <= 151; seq++ {
		msgs = append(msgs, add(seq, fmt.Sprintf("t-%d", seq), 1))
	}
	res, err := p.Process(ctx, "o-1", msgs)
	if err != nil {
		t.Fatal(err)
	}
	if commits < 3 || !res.Blocked {
		t.Fatalf("%d commits, Blocked %v: want the retry to report the order blocked", commits, res.Blocked)
	}
}

// TestFirstMessageSkipsTheRead: an order's seq 1 is applied without reading
// the order first; when the guess that it has no state is wrong (seq 1
// redelivered to another instance), nothing is written, the order is read and
// the messages decided from it, "blocked before" included.
func TestFirstMessageSkipsTheRead(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	loads := 0
	store.Fail = func(op, _ string) error {
		if op == "load" {
			loads++
		}
		return nil
	}
	first, second := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain}), convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain})
	for _, m := range []convoy.Message{create(1), add(3, "t-3", 30)} {
		if _, err := first.Process(ctx, "o-1", []convoy.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	if loads != 0 {
		t.Fatalf("a new order was read %d times, want 0", loads)
	}
	res, err := second.Process(ctx, "o-1", []convoy.Message{create(1), add(2, "t-2", 20)})
	if err != nil {
		t.Fatal(err)
	}
	o, _ := store.Load(ctx, "o-1")
	if total := orders.StateOf(o).Total; loads != 2 || res.Outcomes[0].Disposition != convoy.Duplicate || o.AppliedSeq != 3 || total != 50 || o.Version != 3 {
		t.Fatalf("redelivered seq 1: %d loads, outcomes %+v, applied %d, total %d, version %d; want a duplicate decided from the stored order",
			loads-1, res.Outcomes, o.AppliedSeq, total, o.Version)
	}
	if !res.Unblocked || res.Blocked {
		t.Fatalf("Unblocked %v, Blocked %v: the order was blocked behind seq 2 before this call", res.Unblocked, res.Blocked)
	}
}

// failCommit makes the k-th commit (from 1) fail before writing anything,
// as throttling would; 0 fails none.
func failCommit(store *memstore.Store, k int) *int {
	commits := 0
	store.Fail = func(op, _ string) error {
		if op == "commit" {
			if commits++; commits == k {
				return fault.Errorf(fault.Unavailable, "throttled")
			}
		}
		return nil
	}
	return &commits
}

// wantEach: outcomes hold each seq of want exactly once, with disposition d.
func wantEach(t *testing.T, outs []convoy.Outcome, d convoy.Disposition, want []int64) {
	t.Helper()
	seen := map[int64]int{}
	for _, out := range outs {
		if out.Disposition != d {
			t.Fatalf("seq %d %s, want every outcome %s", out.Seq, out.Disposition, d)
		}
		seen[out.Seq]++
	}
	for _, seq := range want {
		if seen[seq] != 1 {
			t.Fatalf("seq %d reported %d times, want once (outcomes %d)", seq, seen[seq], len(outs))
		}
	}
	if len(outs) != len(want) {
		t.Fatalf("%d outcomes, want %d", len(outs), len(want))
	}
}

func seqs(from, to int64) []int64 {
	var s []int64
	for seq := from; seq <= to; seq++ {
		s = append(s, seq)
	}
	return s
}

var quickRetry = fault.RetryPolicy{Initial: time.Millisecond, MaxElapsed: 5 * time.Second}

// TestOutcomesAreWhatCommitsDid: a call that needs several commits, with a
// failure injected before each one in turn: every message is reported once,
// as what the commit that wrote it did (never as a duplicate of itself), and
// the order is reported blocked, then unblocked, by the calls whose commits
// did so.
func TestOutcomesAreWhatCommitsDid(t *testing.T) {
	ctx := context.Background()
	var early []convoy.Message
	for seq := int64(2); seq <= 151; seq++ {
		early = append(early, add(seq, fmt.Sprintf("t-%d", seq), 1))
	}
	for k := 0; k <= 5; k++ { // 149 messages take 2 commits to park, 150 take 4 to drain
		t.Run(fmt.Sprintf("fail commit %d", k), func(t *testing.T) {
			store := memstore.New()
			p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Retry: quickRetry})
			if _, err := p.Process(ctx, "o-1", []convoy.Message{create(1)}); err != nil {
				t.Fatal(err)
			}
			failCommit(store, k)
			res, err := p.Process(ctx, "o-1", early[1:]) // seqs 3..151 park behind seq 2
			if err != nil {
				t.Fatal(err)
			}
			wantEach(t, res.Outcomes, convoy.Parked, seqs(3, 151))
			if !res.Blocked || res.Unblocked || res.MissingSeq != 2 {
				t.Fatalf("parking: Blocked %v Unblocked %v missing %d, want blocked behind 2", res.Blocked, res.Unblocked, res.MissingSeq)
			}
			failCommit(store, k)
			res, err = p.Process(ctx, "o-1", early[:1])
			if err != nil {
				t.Fatal(err)
			}
			wantEach(t, res.Outcomes, convoy.Applied, seqs(2, 151))
			if res.Blocked || !res.Unblocked || res.AppliedSeq != 151 {
				t.Fatalf("draining: Blocked %v Unblocked %v applied %d, want unblocked at 151", res.Blocked, res.Unblocked, res.AppliedSeq)
			}
		})
	}
}

// TestUnblockedAfterAFailedGuess: seq 1 of a blocked order reaches an
// instance that has not cached it; the commit made on the guess that the
// order is new fails transiently (not a conflict). The retry reads the order
// and fills the gap: that commit unblocked it, and the call says so.
func TestUnblockedAfterAFailedGuess(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	if _, err := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain}).Process(ctx, "o-1", []convoy.Message{add(2, "t-2", 2)}); err != nil {
		t.Fatal(err)
	}
	failCommit(store, 1)
	res, err := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Retry: quickRetry}).Process(ctx, "o-1", []convoy.Message{create(1)})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Unblocked || res.Blocked || res.AppliedSeq != 2 {
		t.Fatalf("Unblocked %v Blocked %v applied %d: the commit that filled the gap unblocked the order", res.Unblocked, res.Blocked, res.AppliedSeq)
	}
	wantEach(t, res.Outcomes, convoy.Applied, []int64{1, 2})
}

// TestBlockedAgainInOneCommit: one call fills an order's gap, drains its
// parked tail and parks a later message behind a new gap, all in one
// commit. That commit ends the first block and begins the second: the
// index lists the order once, blocked on its new missing seq, never on the
// old one.
func TestBlockedAgainInOneCommit(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Index: store, Now: func() time.Time { now = now.Add(time.Second); return now }})
	for _, m := range []convoy.Message{create(1), add(3, "t-3", 3)} {
		if _, err := p.Process(ctx, "o-1", []convoy.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := p.Process(ctx, "o-1", []convoy.Message{add(2, "t-2", 2), add(5, "t-5", 5)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commits != 1 || !res.Unblocked || !res.Blocked || res.MissingSeq != 4 {
		t.Fatalf("%+v: want one commit that unblocked the order and blocked it again on seq 4", res)
	}
	page, err := convoy.ListBlocked(ctx, store, "", 10)
	if err != nil || len(page.Orders) != 1 || page.Orders[0].MissingSeq != 4 || page.Orders[0].Parked != 1 {
		t.Fatalf("blocked orders %+v, %v; want o-1 once, missing seq 4, 1 parked", page.Orders, err)
	}
}

// countingStore counts the calls a processor makes to its store: each is one
// Table round trip in tablestore.
type countingStore struct {
	*memstore.Store
	loads, txs, commits int
}

func (c *countingStore) Load(ctx context.Context, id string) (*convoy.Key, error) {
	c.loads++
	return c.Store.Load(ctx, id)
}

func (c *countingStore) Row(ctx context.Context, id string, ref keyed.RowRef) (keyed.Props, bool, error) {
	c.txs++
	return c.Store.Row(ctx, id, ref)
}

func (c *countingStore) Commit(ctx context.Context, o *convoy.Key, base int64, ch *convoy.Change) error {
	c.commits++
	return c.Store.Commit(ctx, o, base, ch)
}

func (c *countingStore) reset() { c.loads, c.txs, c.commits = 0, 0, 0 }

// TestCostIndependentOfHistory (issue 27): what one message costs the store
// is the same after 10 and after 3,000 transactions: on a cold cache, an
// AddTransaction is a load and a commit, a ModifyTransaction of the first
// transaction one point read more; on a warm cache, a commit alone; and
// that modification, from a warm cache, once the order has long forgotten
// the transaction, is a point read and a commit.
func TestCostIndependentOfHistory(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{10, 3000} {
		store := &countingStore{Store: memstore.New()}
		msgs := []convoy.Message{create(1)}
		for i := range n {
			msgs = append(msgs, add(int64(i+2), fmt.Sprintf("t-%d", i), 1))
		}
		if _, err := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain}).Process(ctx, "o-1", msgs); err != nil {
			t.Fatal(err)
		}
		seq := int64(n + 2)
		step := func(what string, p *convoy.Processor, m convoy.Message, loads, txs, commits int) {
			t.Helper()
			store.reset()
			res, err := p.Process(ctx, "o-1", []convoy.Message{m})
			if err != nil || res.Outcomes[0].Disposition != convoy.Applied {
				t.Fatalf("n=%d, %s: %+v, %v", n, what, res, err)
			}
			if store.loads != loads || store.txs != txs || store.commits != commits {
				t.Fatalf("n=%d, %s: %d loads, %d point reads, %d commits; want %d, %d, %d",
					n, what, store.loads, store.txs, store.commits, loads, txs, commits)
			}
			seq++
		}
		step("cold add", convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain}), add(seq, "new-1", 5), 1, 0, 1)
		step("cold modify", convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain}), modify(seq, "t-0", 7), 1, 1, 1)
		warm := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain})
		step("cold add", warm, add(seq, "new-2", 5), 1, 0, 1)
		step("warm add", warm, add(seq, "new-3", 5), 0, 0, 1)
		step("warm modify of a transaction just added", warm, modify(seq, "new-3", 6), 0, 0, 1)
		step("warm modify of an old transaction", warm, modify(seq, "t-1", 9), 0, 1, 1)
		o, _ := store.Store.Load(ctx, "o-1")
		// Oracle: the arithmetic of the messages sent.
		if want, s := int64(n)-1+7-1+9+5+5+6, orders.StateOf(o); s.Total != want || s.TxCount != int64(n)+3 {
			t.Fatalf("n=%d: total %d over %d transactions, want %d over %d", n, s.Total, s.TxCount, want, n+3)
		}
	}
}

// TestAddOfExistingTxIdOnColdCache: an instance that does not know the
// order's transactions takes an AddTransaction as new; the commit finds the
// txId and fails, and the message is then rejected, exactly once: within
// the call when it may retry, on the next delivery when it may not.
func TestAddOfExistingTxIdOnColdCache(t *testing.T) {
	ctx := context.Background()
	for _, attempts := range []int{0, 1} {
		store := memstore.New()
		if _, err := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain}).Process(ctx, "o-1",
			[]convoy.Message{create(1), add(2, "t-1", 5), add(3, "t-2", 6)}); err != nil {
			t.Fatal(err)
		}
		p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Retry: fault.RetryPolicy{MaxAttempts: attempts, Initial: time.Millisecond}})
		var res convoy.Result
		var err error
		for try := 0; try < 3; try++ {
			if res, err = p.Process(ctx, "o-1", []convoy.Message{add(4, "t-1", 100)}); err == nil {
				break
			}
			if !fault.IsTransient(err) {
				t.Fatal(err)
			}
		}
		if err != nil || len(res.Outcomes) != 1 || res.Outcomes[0].Disposition != convoy.Rejected || !strings.Contains(res.Outcomes[0].Reason, "already exists") {
			t.Fatalf("attempts %d: %+v, %v; want rejected: already exists", attempts, res, err)
		}
		cv, err := convoy.ReadView(ctx, orders.Domain, store, store, "o-1", "", 0)
		v := orders.ViewOf(cv)
		if err != nil || v.Total != 11 || len(v.Transactions) != 2 || len(v.Rejected) != 1 || v.Rejected[0].Seq != 4 || v.AppliedSeq != 4 {
			t.Fatalf("attempts %d: %+v, %v", attempts, v, err)
		}
	}
}

// TestSkipDrainsAnExistingTxIdAsRejected: a skip whose parked tail adds a
// txId the order has (unknown to a cold instance) rejects it once: the
// optimistic commit conflicts, the retry looks it up.
func TestSkipDrainsAnExistingTxIdAsRejected(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	if _, err := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain}).Process(ctx, "o-1", []convoy.Message{create(1), add(2, "t-1", 5)}); err != nil {
		t.Fatal(err)
	}
	if _, err := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain}).Process(ctx, "o-1", []convoy.Message{add(4, "t-1", 7), add(5, "t-2", 1)}); err != nil {
		t.Fatal(err)
	}
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Retry: fault.RetryPolicy{Initial: time.Millisecond}})
	res, cv, err := p.Skip(ctx, "o-1", 3)
	if err != nil {
		t.Fatal(err)
	}
	view := orders.ViewOf(cv)
	var got []string
	for _, out := range res.Outcomes {
		got = append(got, fmt.Sprint(out.Seq, out.Disposition))
	}
	if strings.Join(got, " ") != "3rejected 4rejected 5applied" {
		t.Fatalf("outcomes %v, want 3 rejected (skipped), 4 rejected (t-1 exists), 5 applied", got)
	}
	if view.Total != 6 || len(view.Transactions) != 2 || len(view.Rejected) != 2 || view.Rejected[1].Seq != 4 ||
		!strings.Contains(view.Rejected[1].Reason, "already exists") || view.AppliedSeq != 5 {
		t.Fatalf("the skip's answer: %+v", view)
	}
}

// viewOf is the order's head as OrderStatus shows it, without its history.
func viewOf(o *convoy.Key) orders.View {
	_, _ = o.Bind(orders.Domain)
	return orders.ViewOf(convoy.View{Order: o})
}
