package ledger_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/handler/accounts"
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/orders"
)

// mixed is a publisher of orders and accounts on one memory table, with a
// queue each.
type mixed struct {
	store            *memstore.Ledgers
	orders, accounts *ledgertest.Sender
	p                *ledger.Publisher
}

func newMixed(opts ledger.PublisherOptions) *mixed {
	m := &mixed{store: memstore.NewLedgers(), orders: &ledgertest.Sender{MaxBatchBytes: 4 << 10}, accounts: &ledgertest.Sender{MaxBatchBytes: 1 << 10}}
	m.p = ledgertest.MixedPublisher(m.store, m.store.Keys("account"), m.orders, m.accounts, opts)
	return m
}

// wantMessage is what the document says a message is: read with
// encoding/json, apart from the code under test.
type wantMessage struct {
	queue, key string
	seq        int64
	last       bool
}

// oracle reads doc as plain JSON: each entry's queue (its "domain", else
// orders), its key (orderId or accountId) and its seq, counted per domain
// and key from next (the seqs the keys had before) in ledger order.
func oracle(t *testing.T, doc []byte, next map[[2]string]int64) map[string]wantMessage {
	t.Helper()
	var d struct {
		LedgerID     string `json:"ledgerId"`
		Transactions []struct {
			Domain    string `json:"domain"`
			OrderID   string `json:"orderId"`
			AccountID string `json:"accountId"`
			Last      bool   `json:"last"`
		} `json:"transactions"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	want := map[string]wantMessage{}
	for i, e := range d.Transactions {
		w := wantMessage{queue: "orders", key: e.OrderID, last: e.Last}
		if e.Domain == "accounts" {
			w.queue, w.key = "accounts", e.AccountID
		}
		next[[2]string{w.queue, w.key}]++
		w.seq = next[[2]string{w.queue, w.key}]
		want[fmt.Sprintf("%s:%d", d.LedgerID, i)] = w
	}
	return want
}

// sent returns the messages sent so far, by MessageId, each read back by
// its queue's domain: a message on the wrong queue does not read.
func (m *mixed) sent(t *testing.T) map[string]wantMessage {
	t.Helper()
	got := map[string]wantMessage{}
	for queue, s := range map[string]*ledgertest.Sender{"orders": m.orders, "accounts": m.accounts} {
		for _, b := range s.Batches() {
			for _, msg := range b {
				var err error
				switch queue {
				case "orders":
					_, err = orders.Rules{}.ReadCommand(msg.SessionID, msg.Body)
				case "accounts":
					_, err = accounts.Rules{}.ReadCommand(msg.SessionID, msg.Body)
				}
				if err != nil {
					t.Fatalf("%s on the %s queue: %v", msg.MessageID, queue, err)
				}
				if _, twice := got[msg.MessageID]; twice {
					t.Fatalf("%s sent twice", msg.MessageID)
				}
				got[msg.MessageID] = wantMessage{queue: queue, key: msg.SessionID, seq: msg.Seq, last: msg.Last}
			}
		}
	}
	return got
}

// TestMixedLedger: a ledger of orders and accounts interleaved, the same
// ids naming an order and an account, publishes each entry once, to its
// own domain's queue, with its own key's seqs; a second ledger continues
// each key's seqs, an order's and an account's of the same id apart.
func TestMixedLedger(t *testing.T) {
	ctx := context.Background()
	m := newMixed(ledger.PublisherOptions{Retry: noRetry})
	next := map[[2]string]int64{}
	want := map[string]wantMessage{}
	for i, doc := range [][]byte{
		ledgertest.MixedDoc("L-1", 31, []string{"k-1", "k-2", "k-3"}, 300),
		ledgertest.MixedDoc("L-2", 12, []string{"k-3", "k-4"}, 0),
	} {
		if i == 1 {
			// The second ledger opens k-3 again, which its account's
			// rules would reject: what the ledger sends is its concern.
			doc = bytes.Replace(doc, []byte(`"accountId":"k-3","kind":"open","currency":"EUR"`), []byte(`"accountId":"k-3","kind":"close"`), 1)
		}
		for id, w := range oracle(t, doc, next) {
			want[id] = w
		}
		sum, err := m.p.Publish(ctx, doc)
		if err != nil {
			t.Fatal(err, fault.ProblemsOf(err))
		}
		l, _ := ledger.Parse(doc, ledger.Limits{}, ledgertest.OrdersAndAccounts)
		if sum.Messages != l.Len() || sum.Orders != len(l.Keys("orders")) || !reflect.DeepEqual(sum.Keys, map[string]int{"accounts": len(l.Keys("accounts"))}) {
			t.Fatalf("ledger %d: %+v", i+1, sum)
		}
	}
	if got := m.sent(t); !reflect.DeepEqual(got, want) {
		for id, w := range want {
			if got[id] != w {
				t.Errorf("%s: sent %+v, want %+v", id, got[id], w)
			}
		}
		t.Fatalf("%d messages sent, want %d", len(got), len(want))
	}
	// The seqs are in each domain's own counters.
	for _, c := range []struct {
		idx  convoy.Allocations
		last int64
	}{{m.store, next[[2]string{"orders", "k-3"}]}, {m.store.Keys("account"), next[[2]string{"accounts", "k-3"}]}} {
		if p, err := c.idx.Published(ctx, "k-3", 1); err != nil || p.LastSeq != c.last {
			t.Fatalf("k-3: %+v, %v; want last seq %d", p, err, c.last)
		}
	}
	// The ledger's record counts the keys of each domain.
	rec, _ := m.store.GetLedger(ctx, "L-1")
	if rec.Orders != 3 || !reflect.DeepEqual(rec.Keys, map[string]int{"accounts": 3}) || rec.Transactions != 31 {
		t.Fatalf("record %+v", rec)
	}
}

// TestMixedPlan: the messages go out domain by domain in order of first
// appearance, key by key, each key's in ledger order; a batch holds one
// queue's messages, and with BatchPerSession one key's.
func TestMixedPlan(t *testing.T) {
	store := memstore.NewLedgers()
	var order []string // queue and key of each message, in send order
	var queues []*ledgertest.Sender
	for range 2 {
		queues = append(queues, &ledgertest.Sender{})
	}
	doc := []byte(`{"ledgerId":"L-plan","transactions":[
		{"domain":"accounts","accountId":"b","kind":"open","currency":"EUR"},
		{"orderId":"a","op":"CreateOrder","currency":"EUR"},
		{"domain":"accounts","accountId":"a","kind":"open","currency":"EUR"},
		{"orderId":"b","op":"CreateOrder","currency":"EUR"},
		{"domain":"accounts","accountId":"b","kind":"deposit","amount":1,"reference":"r"},
		{"orderId":"a","op":"DeleteOrder","domain":"orders"}]}`)
	p := ledger.NewPublisher(store, []ledger.Route{
		{Domain: ledgertest.OrdersAndAccounts[0], Allocator: store, Sender: queues[0], BatchPerSession: true},
		{Domain: ledgertest.OrdersAndAccounts[1], Allocator: store.Keys("account"), Sender: queues[1]},
	}, ledger.PublisherOptions{Retry: noRetry, Progress: func(sent, _ int) {
		order = append(order, fmt.Sprint(sent))
	}})
	if _, err := p.Publish(context.Background(), doc); err != nil {
		t.Fatal(err)
	}
	// Accounts first (the first entry is one), b then a; then orders a, b.
	var ids []string
	for _, q := range queues {
		for _, b := range q.Batches() {
			var batch []string
			for _, m := range b {
				batch = append(batch, m.MessageID)
			}
			ids = append(ids, strings.Join(batch, " "))
		}
	}
	if want := []string{"L-plan:1 L-plan:5", "L-plan:3", "L-plan:0 L-plan:4 L-plan:2"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("batches (orders' queue, then accounts') %q, want %q", ids, want)
	}
	if want := []string{"3", "5", "6"}; !reflect.DeepEqual(order, want) {
		t.Fatalf("checkpoints %v, want %v: the accounts' batch, then one per order", order, want)
	}
}

// noLedger is rules that are no keyed.Publisher: its commands cannot be in
// a ledger.
type noLedger struct{}

func (noLedger) Name() string                                             { return "devices" }
func (noLedger) ReadCommand(string, []byte) (int, error)                  { return 0, nil }
func (noLedger) Needs(int, int) keyed.Needs                               { return keyed.Needs{} }
func (noLedger) Decide(s, _ int, _ keyed.Rows) (int, keyed.Writes, error) { return s, nil, nil }
func (noLedger) Tag(int) keyed.Props                                      { return nil }
func (noLedger) Version() int                                             { return 1 }
func (noLedger) EncodeState(int) keyed.Props                              { return nil }
func (noLedger) DecodeState(int, keyed.Props) (int, error)                { return 0, nil }
func (noLedger) EncodeCommand(int) keyed.Props                            { return nil }
func (noLedger) DecodeCommand(string, keyed.Props) (int, error)           { return 0, nil }
func (noLedger) Budget() keyed.Budget                                     { return keyed.Budget{} }

// TestEntryDomain: an entry's "domain" names a registered domain whose
// commands a ledger may carry, as a string; else it is a problem of that
// entry's "domain", which lists the names it may be, and nothing else is
// said of the entry. An entry without one is the default domain's, even
// when "domain" is in its data.
func TestEntryDomain(t *testing.T) {
	domains := append(ledgertest.OrdersAndAccounts[:2:2], ledger.Domain{Rules: keyed.Erase[int, int](noLedger{})})
	doc := `{"ledgerId":"L","transactions":[
		{"domain":"acounts","accountId":"a","kind":"open","currency":"EUR"},
		{"domain":7,"orderId":"o","op":"DeleteOrder"},
		{"domain":"devices","accountId":"a"},
		{"domain":"orders","accountId":"a","kind":"close"},
		{"orderId":"o","op":"DeleteOrder","data":{"domain":"accounts"}},
		{"domain":"accounts","domain":"accounts","accountId":"a","kind":"close"},
		{"domain":null,"orderId":"o","op":"DeleteOrder"}]}`
	_, err := ledger.Parse([]byte(doc), ledger.Limits{}, domains)
	want := []fault.Problem{
		{Index: 0, Field: "domain", Reason: `"acounts" is not one of orders, accounts`},
		{Index: 1, Field: "domain", Reason: "must be a string"},
		{Index: 2, Field: "domain", Reason: `"devices" takes no ledger entries (the domains that do: orders, accounts)`},
		{Index: 3, Field: "accountId", Reason: "is not a known field (orderId, op, txId, amount, currency, last, domain, data)"},
		{Index: 3, Field: "kind", Reason: "is not a known field (orderId, op, txId, amount, currency, last, domain, data)"},
		{Index: 3, Field: "orderId", Reason: "is required"},
		{Index: 3, Field: "op", Reason: "is required"},
		{Index: 5, Field: "domain", Reason: "appears twice"},
		{Index: 6, Field: "domain", Reason: "must be a string"},
	}
	if got := fault.ProblemsOf(err); fault.CodeOf(err) != fault.Invalid || !reflect.DeepEqual(got, want) {
		t.Fatalf("%v\nproblems %+v\nwant     %+v", err, got, want)
	}
}

// TestMixedHash: a ledger of orders and accounts is the same content
// however spelt (member order, space, an order's "domain" written out),
// and other content when an account's entry changes; a ledger of orders
// alone hashes the same whether accounts are registered or not.
func TestMixedHash(t *testing.T) {
	parse := func(doc string) *ledger.Ledger {
		t.Helper()
		l, err := ledger.Parse([]byte(doc), ledger.Limits{}, ledgertest.OrdersAndAccounts)
		if err != nil {
			t.Fatal(err, fault.ProblemsOf(err))
		}
		return l
	}
	base := parse(`{"ledgerId":"L","transactions":[{"orderId":"k","op":"CreateOrder","currency":"EUR"},` +
		`{"domain":"accounts","accountId":"k","kind":"open","currency":"EUR","limit":5},{"domain":"accounts","accountId":"k","kind":"deposit","amount":150,"reference":"r-1","last":true}]}`)
	same := parse(`{"transactions":[ {"currency":"EUR","op":"CreateOrder","orderId":"k","domain":"orders"},
		{"limit":5,"currency":"EUR","kind":"open","accountId":"k","domain":"accounts"},
		{"last":true,"reference":"r-1","amount":150,"kind":"deposit","accountId":"k","domain":"accounts"} ], "ledgerId":"L"}`)
	if base.Hash != same.Hash || !same.SameContent(base.Hash) {
		t.Fatalf("the same ledger respelt hashes %s, not %s", same.Hash, base.Hash)
	}
	for _, other := range []string{
		strings.Replace(`{"ledgerId":"L","transactions":[{"orderId":"k","op":"CreateOrder","currency":"EUR"},{"domain":"accounts","accountId":"k","kind":"open","currency":"EUR","limit":5},{"domain":"accounts","accountId":"k","kind":"deposit","amount":150,"reference":"r-1","last":true}]}`, "150", "151", 1),
		`{"ledgerId":"L","transactions":[{"orderId":"k","op":"CreateOrder","currency":"EUR"},{"domain":"accounts","accountId":"k","kind":"open","currency":"EUR","limit":5},{"domain":"accounts","accountId":"k","kind":"deposit","amount":150,"reference":"r-1"}]}`,
		`{"ledgerId":"L","transactions":[{"orderId":"k","op":"CreateOrder","currency":"EUR"},{"domain":"accounts","accountId":"k","kind":"open","currency":"EUR","limit":6},{"domain":"accounts","accountId":"k","kind":"deposit","amount":150,"reference":"r-1","last":true}]}`,
	} {
		if l := parse(other); l.Hash == base.Hash || l.SameContent(base.Hash) {
			t.Fatalf("other content hashes as the ledger: %s", other)
		}
	}
	alone, _ := ledger.Parse([]byte(contractExample), ledger.Limits{}, ledgertest.Orders)
	if both := parse(contractExample); both.Hash != alone.Hash {
		t.Fatalf("a ledger of orders hashes %s with accounts registered, %s without", both.Hash, alone.Hash)
	}
}

// TestSummaryOfOrdersAlone: the answer about a ledger of orders is as it
// was before ledgers carried other domains (no "keys"); a ledger with
// accounts counts them apart.
func TestSummaryOfOrdersAlone(t *testing.T) {
	m := newMixed(ledger.PublisherOptions{Retry: noRetry})
	sum, err := m.p.Publish(context.Background(), []byte(contractExample))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(sum)
	if want := `{"ledgerId":"L-2026-11-21-0001","transactions":5,"orders":2,"messages":5,"outcome":"published"}`; string(b) != want {
		t.Fatalf("summary %s, want %s", b, want)
	}
	sum, err = m.p.Publish(context.Background(), ledgertest.MixedDoc("L-m", 5, []string{"k-1", "k-2"}, 0))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(sum)
	if want := `{"ledgerId":"L-m","transactions":5,"orders":2,"keys":{"accounts":2},"messages":5,"outcome":"published"}`; string(b) != want {
		t.Fatalf("summary %s, want %s", b, want)
	}
}
