package devhost_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/convoy-dev/convoy/handler/accounts"
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/internal/convoytest"
	"github.com/convoy-dev/convoy/handler/internal/devbus"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
	"github.com/convoy-dev/convoy/handler/internal/devhost/cmd/convoy-devhost/demo"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/servicebus"
)

// The account domain end to end, beside orders (issue 44): ledgers that mix
// both, published through the real handler under the emulation, with the
// faults the order suite survives. Every scenario ends with every account
// equal to the account fold (convoytest.FoldAccount) of its commands in the
// seq order of the messages sent, and every order equal to its own fold.
// The same ids name an order and an account, which must stay apart.

// accountEntries makes n account commands (ledger entries with "domain":
// "accounts") over ids, each opened first when open. Rule breaches are
// mixed in: overdrafts, a reference used twice, reversals of what is
// unknown, already reversed or itself a reversal, a second open, a close
// with money left.
func accountEntries(r *rand.Rand, ledgerID string, n int, ids []string, open bool) []map[string]any {
	type tx = map[string]any
	var txs []tx
	if open {
		for _, a := range ids {
			txs = append(txs, tx{"domain": "accounts", "accountId": a, "kind": "open", "currency": "EUR", "limit": r.IntN(3) * 1000})
		}
	}
	refs := map[string][]string{} // per account, the references this ledger made
	for i := len(txs); i < n; i++ {
		a := ids[r.IntN(len(ids))]
		ref := fmt.Sprintf("%s-%d", ledgerID, i)
		t := tx{"domain": "accounts", "accountId": a}
		switch k := r.IntN(20); {
		case k < 8:
			t["kind"], t["amount"], t["reference"] = "deposit", 1+r.IntN(3000), ref
		case k < 14:
			t["kind"], t["amount"], t["reference"] = "withdraw", 1+r.IntN(4000), ref
		case k < 17 && len(refs[a]) > 0:
			t["kind"], t["reference"], t["reverses"] = "reverse", ref, refs[a][r.IntN(len(refs[a]))]
		case k < 18:
			t["kind"], t["amount"], t["reference"] = "deposit", 1, "dup" // rejected after its first use
		case k < 19:
			t["kind"], t["currency"] = "open", "USD" // rejected: already open
		default:
			t["kind"] = "close" // rejected unless the balance is zero
		}
		if t["reference"] == ref {
			refs[a] = append(refs[a], ref)
		}
		txs = append(txs, t)
	}
	return txs
}

// mixedWorkload makes count ledgers, each of orderTxs order transactions
// (genLedger's) and accountTxs account commands, interleaved at random,
// over keys prefix-NN that name an order and an account each; the first
// ledger creates the orders and opens the accounts.
func mixedWorkload(seed uint64, prefix string, count, orderTxs, accountTxs, keys int) [][]byte {
	r := rand.New(rand.NewPCG(seed, seed+1))
	ids := orderIDs(prefix, keys)
	var docs [][]byte
	for i := range count {
		id := fmt.Sprintf("L-%s-%d", prefix, i)
		var orderDoc struct{ Transactions []json.RawMessage }
		if err := json.Unmarshal(genLedger(r, id, orderTxs, ids, i == 0), &orderDoc); err != nil {
			panic(err)
		}
		ords, accts := orderDoc.Transactions, accountEntries(r, id, accountTxs, ids, i == 0)
		var txs []any
		for len(ords)+len(accts) > 0 {
			if len(accts) == 0 || len(ords) > 0 && r.IntN(len(ords)+len(accts)) < len(ords) {
				txs, ords = append(txs, ords[0]), ords[1:]
			} else {
				txs, accts = append(txs, accts[0]), accts[1:]
			}
		}
		doc, _ := json.Marshal(map[string]any{"ledgerId": id, "transactions": txs})
		docs = append(docs, doc)
	}
	return docs
}

// accountEnvelopes are the account messages of l as its publisher sends
// them (seqs 1, 2, … per account, as for a ledger that opens its accounts),
// under the MessageIds given.
func accountEnvelopes(l *ledger.Ledger, messageID func(i int) string) []convoy.Envelope {
	var out []convoy.Envelope
	seqs := map[string]int64{}
	for i, e := range l.Entries() {
		if e.Domain != accounts.Domain.Name() {
			continue
		}
		seqs[e.Key]++
		body, err := accounts.EncodeBody(e.Command.(accounts.Command))
		if err != nil {
			panic(err)
		}
		out = append(out, convoy.Envelope{SessionID: e.Key, MessageID: messageID(i), LedgerID: l.ID, Seq: seqs[e.Key], Body: body})
	}
	return out
}

// accountMessages are accountEnvelopes as a producer sends them.
func accountMessages(l *ledger.Ledger, messageID func(i int) string) []*azservicebus.Message {
	var msgs []*azservicebus.Message
	for _, m := range accountEnvelopes(l, messageID) {
		msgs = append(msgs, servicebus.ToMessage(m))
	}
	return msgs
}

// checkAccounts is checkFold's counterpart: every account of the ledgers
// equals the fold of its commands in the seq order of the messages sent
// (the accounts queue's journal unless given), and no account message was
// dead-lettered.
func (e *env) checkAccounts(ctx context.Context, ledgers []*ledger.Ledger, sent ...devbus.Message) {
	e.t.Helper()
	if sent == nil {
		sent = e.host.Queue("accounts").Sent()
	}
	want, err := demo.ExpectedAccounts(ledgers, sent)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(want) == 0 {
		e.t.Fatal("no account to check")
	}
	for id, w := range want {
		got, err := demo.GetAccount(ctx, e.host.URL(), id)
		if err != nil {
			e.t.Fatalf("account %s: %v", id, err)
		}
		if problem := convoytest.CompareAccount(got, w); problem != "" {
			e.t.Fatalf("account %s: %s", id, problem)
		}
	}
	if dl := e.host.Queue("accounts").Stats().DeadLettered; dl != 0 {
		e.t.Fatalf("%d account message(s) were dead-lettered", dl)
	}
}

// TestAccountsCrashDuplicatesReordering: on two instances of each group,
// mixed ledgers are published (one twice: the same MessageId, dropped by
// duplicate detection) while AccountProcessor's handlers are killed with
// SIGKILL in the middle of invocations, twice each (as much as a host
// survives: TestCrashBudget). Meanwhile a ledger of the test's own reaches
// the accounts queue as its messages, shuffled, some twice under other
// MessageIds, so accounts see their seqs out of order. Afterwards the first
// ledger comes again under another MessageId, and every account message of
// it again under new MessageIds: no-ops. Every account and every order
// ends exactly right.
func TestAccountsCrashDuplicatesReordering(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, 2*time.Minute)
	e := startWith(t, stage(t, nil), azurite.Options{}, func(o *devhost.Options) { o.MinInstances = 2 })
	docs := mixedWorkload(41, "acc", 3, 60, 120, 8)
	ledgers := e.publish(ctx, append(docs, docs[0])...)[:len(docs)]

	r := rand.New(rand.NewPCG(43, 44))
	ownDoc, _ := json.Marshal(map[string]any{"ledgerId": "L-shuffled", "transactions": accountEntries(r, "L-shuffled", 60, orderIDs("shuffled", 3), true)})
	own, err := ledger.Parse(ownDoc, ledger.Limits{}, ledgertest.OrdersAndAccounts)
	if err != nil {
		t.Fatal(err)
	}
	shuffled := accountMessages(own, func(i int) string { return convoy.MessageID(own.ID, i) })
	for i, m := range shuffled[:15] {
		again := *m
		id := fmt.Sprintf("again-%d", i)
		again.MessageID = &id
		shuffled = append(shuffled, &again)
	}
	r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	e.send(ctx, "accounts", shuffled...)

	processors := e.host.Group("function:AccountProcessor")
	killed := make([]int, len(processors)) // each instance's last killed handler
	midCall := 0
	for k := range 4 {
		in := processors[k%2]
		waitFor(t, "the instance's handler back, an account message in flight", 30*time.Second, func() bool {
			pid := in.HandlerPID()
			return pid != 0 && pid != killed[k%2] && e.host.Queue("accounts").Stats().InFlight > 0
		})
		time.Sleep(time.Duration(20*k) * time.Millisecond)
		if e.host.Queue("accounts").Stats().InFlight > 0 {
			midCall++
		}
		killed[k%2] = in.HandlerPID()
		in.KillHandler()
	}
	e.waitIdle(ctx)
	if midCall == 0 {
		t.Fatal("no kill found an account message in flight: the scenario tests nothing")
	}
	for _, in := range processors {
		if in.Restarts() != 2 || in.Stopped() != "" {
			t.Fatalf("instance %d: %d restarts, stopped %q; want 2 restarts and the host running", in.ID, in.Restarts(), in.Stopped())
		}
	}
	resentID := "resent-" + ledgers[0].ID
	e.send(ctx, "ledgers", &azservicebus.Message{MessageID: &resentID, SessionID: &ledgers[0].Stream, Body: docs[0]})
	e.send(ctx, "accounts", accountMessages(ledgers[0], func(i int) string { return fmt.Sprintf("again-%s-%d", ledgers[0].ID, i) })...)
	e.waitIdle(ctx)
	e.checkFold(ctx, ledgers)
	e.checkAccounts(ctx, append(ledgers, own))
	t.Logf("%d kills with an account message in flight; %d invocations, %d failed, %d restarts", midCall, e.host.Invocations(), e.host.Failures(), e.host.Restarts())
}

// TestAccountsStorageRestart: Azurite (on disk) is stopped while mixed
// ledgers are being applied and started again on the same port; both
// domains ride out the outage.
func TestAccountsStorageRestart(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, 2*time.Minute)
	dir := t.TempDir()
	e := start(t, stage(t, nil), azurite.Options{Dir: dir})
	ledgers := e.publish(ctx, mixedWorkload(45, "down", 3, 40, 80, 6)...)
	waitFor(t, "the first account message", 30*time.Second, func() bool { return len(e.host.Queue("accounts").Sent()) > 0 })
	e.az.Stop()
	pending := e.host.Queue("ledgers").Stats().Active + e.host.Queue("accounts").Stats().Active
	if e.host.Queue("accounts").Stats().Active == 0 {
		t.Fatal("every account message was processed before the outage began: the scenario tests nothing")
	}
	time.Sleep(2 * time.Second)
	restarted, err := azurite.Start(azurite.Options{Dir: dir, Port: e.az.Port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(restarted.Stop)
	e.waitIdle(ctx)
	e.checkFold(ctx, ledgers)
	e.checkAccounts(ctx, ledgers)
	t.Logf("storage down for 2 s with %d ledger and account messages pending; %d invocations, %d failed", pending, e.host.Invocations(), e.host.Failures())
}

// TestAccountLockLostMidCall: two instances on one account. A call of
// AccountProcessor outlives its session lock; the other instance accepts
// the session and goes on while the first call still runs, which then
// reaches the handler late and whose completion fails. Then both
// instances' handlers are called at once with the same and adjacent
// messages of another account (TestConcurrentInvocationsOfOneSession's
// streams, across two processes: only storage's compare-and-swap keeps
// them apart). Both accounts end in their folds.
func TestAccountLockLostMidCall(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, time.Minute)
	// One session per instance, so only the other instance can take it; a
	// call that hangs fails in 15 s (functionTimeout), not the test's minute.
	app := stage(t, hostJSON(map[string]any{"maxAutoLockRenewalDuration": "00:00:00.2", "maxConcurrentSessions": 1}, func(name string, doc map[string]any) {
		if name == "host.json" {
			doc["functionTimeout"] = "00:00:15"
		}
	}))
	e := startWith(t, app, azurite.Options{}, func(o *devhost.Options) {
		o.MinInstances, o.MaxInstances = 2, 2
		p := o.Queues["accounts"]
		p.LockDuration = 200 * time.Millisecond
		o.Queues["accounts"] = p
	})
	doc := mixedWorkload(47, "slowpoke", 1, 10, 30, 1)[0]
	l, err := ledger.Parse(doc, ledger.Limits{}, ledgertest.OrdersAndAccounts)
	if err != nil {
		t.Fatal(err)
	}
	victim := accountEnvelopes(l, func(i int) string { return convoy.MessageID(l.ID, i) })[4].MessageID // seq 5
	var mu sync.Mutex
	var firstEnded, secondStarted time.Time
	e.host.InjectFault(func(fn string, msgs []*devbus.Message) error {
		for _, m := range msgs {
			if fn != "AccountProcessor" || m.MessageID != victim {
				continue
			}
			if m.DeliveryCount == 1 {
				time.Sleep(time.Second) // the lock runs out 0.4 s after acceptance
				mu.Lock()
				firstEnded = time.Now()
				mu.Unlock()
			} else {
				mu.Lock()
				if secondStarted.IsZero() {
					secondStarted = time.Now()
				}
				mu.Unlock()
			}
		}
		return nil
	})
	e.publish(ctx, doc)
	e.waitIdle(ctx)
	mu.Lock()
	second, first := secondStarted, firstEnded
	mu.Unlock()
	if second.IsZero() || first.IsZero() || !second.Before(first) {
		t.Fatalf("second delivery began %v, first call ended %v: want the session taken while the first call ran", second, first)
	}
	if e.host.LockLosses() == 0 {
		t.Fatal("the late call's completion did not fail")
	}

	// Failed calls are redelivered, as the queue would. Exactly once.
	r := rand.New(rand.NewPCG(51, 52))
	raceDoc, _ := json.Marshal(map[string]any{"ledgerId": "L-race", "transactions": accountEntries(r, "L-race", 40, []string{"raced"}, true)})
	race, err := ledger.Parse(raceDoc, ledger.Limits{}, ledgertest.OrdersAndAccounts)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*devbus.Message
	for i, m := range accountEnvelopes(race, func(i int) string { return convoy.MessageID(race.ID, i) }) {
		msgs = append(msgs, &devbus.Message{SequenceNumber: int64(i + 1), MessageID: m.MessageID, SessionID: m.SessionID,
			ContentType: convoy.ContentType, Body: m.Body, DeliveryCount: 1, EnqueuedTime: time.Now(), Properties: m.Properties()})
	}
	processors := e.host.Group("function:AccountProcessor")
	if len(processors) != 2 {
		t.Fatalf("AccountProcessor has %d instances, want 2", len(processors))
	}
	var wg sync.WaitGroup
	for k, offset := range []int{0, 0, 1, 2} { // two identical streams, two shifted by one and two, on both instances
		wg.Go(func() {
			for i := range msgs {
				m := msgs[(i+offset)%len(msgs)]
				for try := 1; e.host.InvokeOn(ctx, processors[k%2], "AccountProcessor", []*devbus.Message{m}) != nil; try++ {
					if try == 20 {
						t.Errorf("message %s failed 20 calls in a row", m.MessageID)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	sent := e.host.Queue("accounts").Sent()
	for _, m := range msgs {
		sent = append(sent, *m)
	}
	e.checkFold(ctx, []*ledger.Ledger{l})
	e.checkAccounts(ctx, []*ledger.Ledger{l, race}, sent...)
}

// TestAccountsNeverHoldUpOrders: one domain's trouble stays its own. While
// AccountProcessor's handler is hung (SIGSTOP: every account backlogged,
// one unreadable account message and one that fails every delivery among
// them), every order of the same ledgers applies. Resumed, the two bad
// messages are dead-lettered and block their accounts alone; a ledger
// published then applies to every order, the order that shares the blocked
// account's id included, while that account's new commands wait behind its
// gap. The operator replays the one and skips the other through the
// account routes; every account ends in its fold.
func TestAccountsNeverHoldUpOrders(t *testing.T) {
	t.Parallel()
	ctx := timeout(t, 2*time.Minute)
	e := startWith(t, stage(t, nil), azurite.Options{}, func(o *devhost.Options) {
		o.Settings["AutoReplayEnabled"] = "false" // the operator's tools alone
		p := o.Queues["accounts"]
		p.MaxDeliveryCount = 3
		o.Queues["accounts"] = p
	})
	docs := mixedWorkload(49, "iso", 4, 40, 40, 4)
	first, err := ledger.Parse(docs[0], ledger.Limits{}, ledgertest.OrdersAndAccounts)
	if err != nil {
		t.Fatal(err)
	}
	const blockedID = "iso-01"
	var ofBlocked []string // the MessageIds of its commands in the first ledger
	for i, en := range first.Entries() {
		if en.Domain == accounts.Domain.Name() && en.Key == blockedID {
			ofBlocked = append(ofBlocked, convoy.MessageID(first.ID, i))
		}
	}
	victim := ofBlocked[2] // seq 3
	e.host.InjectFault(func(fn string, msgs []*devbus.Message) error {
		if fn == "AccountProcessor" && msgs[0].MessageID == victim {
			return fmt.Errorf("injected: account message %s fails on every delivery", victim)
		}
		return nil
	})
	unreadable := func(seq int64, cmd string) *azservicebus.Message {
		return rawOrderMessage(fmt.Sprintf("U:%d", seq), "unreadable", "U", seq, `{"command":`+cmd+`}`)
	}
	e.send(ctx, "accounts",
		unreadable(1, `{"accountId":"unreadable","kind":"open","currency":"EUR"}`),
		unreadable(2, `{"accountId":"unreadable","kind":"deposit","amount":"a lot","reference":"d-1"}`),
		unreadable(3, `{"accountId":"unreadable","kind":"deposit","amount":5,"reference":"d-2"}`))

	// 1. Every account backlogged behind a hung handler; the orders apply.
	pid := e.host.Group("function:AccountProcessor")[0].HandlerPID()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	ledgers := e.publish(ctx, docs[:3]...)
	count := func(domain string) (n int) {
		for _, l := range ledgers {
			for _, en := range l.Entries() {
				if en.Domain == domain {
					n++
				}
			}
		}
		return n
	}
	orderMsgs, accountMsgs := count("orders"), count(accounts.Domain.Name())
	waitFor(t, "every order applied while the accounts are hung", time.Minute, func() bool {
		return e.host.Queue("ledgers").Idle() && len(e.host.Queue("orders").Sent()) == orderMsgs && e.host.Queue("orders").Idle()
	})
	e.checkFold(ctx, ledgers)
	if active := e.host.Queue("accounts").Stats().Active; active != accountMsgs+3 {
		t.Fatalf("%d account messages waiting, want all %d: the scenario tests nothing", active, accountMsgs+3)
	}
	if _, err := demo.GetAccount(ctx, e.host.URL(), blockedID); err == nil {
		t.Fatalf("account %s has a state while its handler is hung", blockedID)
	}

	// 2. Resumed: the two bad messages block their accounts, and them alone.
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	e.waitIdle(ctx)
	if n := len(e.host.Queue("accounts").DeadLetters()); n != 2 {
		t.Fatalf("%d account messages dead-lettered, want the two bad ones", n)
	}
	blocked := map[string]any{}
	for _, b := range e.blockedIn(t, "accounts") {
		blocked[b["accountId"].(string)] = b["missingSeq"]
	}
	if len(blocked) != 2 || blocked[blockedID] != 3.0 || blocked["unreadable"] != 2.0 {
		t.Fatalf("blocked accounts %v, want %s missing seq 3 and unreadable missing seq 2", blocked, blockedID)
	}
	if b := e.blocked(t); len(b) != 0 {
		t.Fatalf("blocked orders %v, want none", b)
	}

	// 3. A ledger published now applies to every order; the blocked
	// account's commands in it wait behind its gap.
	ledgers = append(ledgers, e.publish(ctx, docs[3])...)
	if !slices.Contains(ledgers[3].Keys("orders"), blockedID) || !slices.Contains(ledgers[3].Keys(accounts.Domain.Name()), blockedID) {
		t.Fatalf("the further ledger has no order and no account %s: the scenario tests nothing", blockedID)
	}
	e.waitIdle(ctx)
	e.checkFold(ctx, ledgers)
	v, err := demo.GetAccount(ctx, e.host.URL(), blockedID)
	if err != nil {
		t.Fatal(err)
	}
	want, err := demo.ExpectedAccounts(ledgers, e.host.Queue("accounts").Sent())
	if err != nil {
		t.Fatal(err)
	}
	if v.AppliedSeq != 2 || v.MissingSeq != 3 || int64(v.Parked) != want[blockedID].AppliedSeq-3 {
		t.Fatalf("account %s after a further ledger: applied %d, missing %d, %d parked; want 2, 3, %d", blockedID, v.AppliedSeq, v.MissingSeq, v.Parked, want[blockedID].AppliedSeq-3)
	}

	// 4. The operator replays the one once its cause is fixed and skips the
	// unreadable one.
	e.host.InjectFault(nil)
	var rep map[string]any
	if code := e.post(t, "/api/accounts/"+blockedID+"/replay", &rep); code != 200 || len(rep["replayed"].([]any)) != 1 {
		t.Fatalf("replay of account %s: %d %v", blockedID, code, rep)
	}
	if code := e.post(t, "/api/accounts/unreadable/skip?seq=2", &rep); code != 200 {
		t.Fatalf("skip of the unreadable account's seq 2: %d %v", code, rep)
	}
	e.waitIdle(ctx)
	e.checkAccounts(ctx, ledgers)
	v, err = demo.GetAccount(ctx, e.host.URL(), "unreadable")
	if err != nil {
		t.Fatal(err)
	}
	skipped := convoytest.ExpectAccount([]accounts.Command{
		{AccountID: "unreadable", Kind: accounts.Open, Currency: "EUR"},
		{}, // skipped: rejected with no effect
		{AccountID: "unreadable", Kind: accounts.Deposit, Amount: 5, Reference: "d-2"}})
	if problem := convoytest.CompareAccount(v, skipped); problem != "" {
		t.Fatalf("account unreadable after the skip: %s", problem)
	}
	if b := e.blockedIn(t, "accounts"); len(b) != 0 {
		t.Fatalf("still blocked: %v", b)
	}
}
