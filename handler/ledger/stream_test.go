package ledger_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/ledger"
)

// withStream puts "stream": s (raw JSON) first in the contract example.
func withStream(raw string) []byte {
	return []byte(strings.Replace(contractExample, "{\n", "{\n  \"stream\": "+raw+",\n", 1))
}

// TestStream: a ledger's stream is optional (default "default"), an id of
// the usual alphabet, refused otherwise with a message naming it; it is part
// of the content (another stream is another ledger for idempotency).
func TestStream(t *testing.T) {
	l, err := ledger.Parse([]byte(contractExample), ledger.Limits{}, ledgertest.Orders)
	if err != nil || l.Stream != "default" {
		t.Fatalf("no stream: %q, %v; want default", l.Stream, err)
	}
	eu, err := ledger.Parse(withStream(`"erp-eu"`), ledger.Limits{}, ledgertest.Orders)
	if err != nil || eu.Stream != "erp-eu" {
		t.Fatalf("stream erp-eu: %+v, %v", eu, err)
	}
	if eu.Hash == l.Hash {
		t.Fatal("a ledger of another stream hashes the same")
	}
	def, _ := ledger.Parse(withStream(`"default"`), ledger.Limits{}, ledgertest.Orders)
	if def.Hash != l.Hash {
		t.Fatal(`"stream": "default" is not the same content as no stream`)
	}
	for _, bad := range []string{`""`, `"erp eu"`, `"` + strings.Repeat("s", 101) + `"`, `"é"`, `7`, `null`, `["a"]`, `"a:b"`, `"a/b"`} {
		_, err := ledger.Parse(withStream(bad), ledger.Limits{}, ledgertest.Orders)
		if fault.CodeOf(err) != fault.Invalid || !strings.Contains(fault.MessageOf(err), "stream") {
			t.Errorf("stream %.20s: %v, want an invalid ledger naming the stream", bad, err)
		}
	}
	_, err = ledger.Parse([]byte(strings.Replace(string(withStream(`"a"`)), "{\n", `{"stream":"b",`, 1)), ledger.Limits{}, ledgertest.Orders)
	if !strings.Contains(fault.MessageOf(err), `field "stream" appears twice`) {
		t.Errorf("stream given twice: %v", err)
	}

	ctx := context.Background()
	sender := &ledgertest.Sender{}
	p := publisher(memstore.NewLedgers(), sender)
	if _, err := p.Publish(ctx, withStream(`"erp-eu"`)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Publish(ctx, withStream(`"erp-us"`)); fault.CodeOf(err) != fault.Conflict || len(sender.Messages()) != 5 {
		t.Fatalf("same id, other stream: %v, want a conflict that sends nothing", err)
	}
}

// TestIdempotencyIgnoresSpelling: the same ledger with its keys in another
// order and its numbers spelled otherwise, in data too, is the same ledger;
// a change of value anywhere in data is other content.
func TestIdempotencyIgnoresSpelling(t *testing.T) {
	base := `{"ledgerId":"L-sp","stream":"s1","transactions":[` +
		`{"orderId":"o","op":"CreateOrder","currency":"EUR","data":{"b":1,"a":[2.50,"x",{"z":null,"y":true}],"c":-0.0}},` +
		`{"orderId":"o","op":"AddTransaction","txId":"t","amount":100,"data":{"n":1e3,"big":123456789012345678901234567890}}]}`
	same := []string{
		`{"transactions":[` +
			`{"data":{"c":0,"a":[25e-1,"x",{"y":true,"z":null}],"b":1.0},"currency":"EUR","op":"CreateOrder","orderId":"o"},` +
			`{"amount":100,"txId":"t","op":"AddTransaction","orderId":"o","data":{"big":1.23456789012345678901234567890E29,"n":1000}}],` +
			`"stream":"s1","ledgerId":"L-sp"}`,
		strings.ReplaceAll(base, ",", " , "),
	}
	other := []string{
		strings.Replace(base, `"b":1`, `"b":2`, 1),
		strings.Replace(base, `2.50`, `2.51`, 1),
		strings.Replace(base, `"x"`, `"X"`, 1),
		strings.Replace(base, `[2.50,"x"`, `["x",2.50`, 1), // arrays keep their order
		strings.Replace(base, `1234567890}`, `1234567891}`, 1),
		strings.Replace(base, `"y":true`, `"y":false`, 1),
		strings.Replace(base, `"z":null,`, ``, 1),
		strings.Replace(base, `1e3`, `1e4`, 1),
	}
	l, err := ledger.Parse([]byte(base), ledger.Limits{}, ledgertest.Orders)
	if err != nil {
		t.Fatal(err)
	}
	for i, doc := range same {
		s, err := ledger.Parse([]byte(doc), ledger.Limits{}, ledgertest.Orders)
		if err != nil || s.Hash != l.Hash {
			t.Errorf("respelled ledger %d hashes differently (%v):\n%s", i, err, doc)
		}
	}
	for i, doc := range other {
		o, err := ledger.Parse([]byte(doc), ledger.Limits{}, ledgertest.Orders)
		if err != nil || o.Hash == l.Hash {
			t.Errorf("changed ledger %d hashes the same (%v):\n%s", i, err, doc)
		}
	}
	// Through the publisher: the respelled ledger is already published.
	ctx := context.Background()
	sender := &ledgertest.Sender{}
	p := publisher(memstore.NewLedgers(), sender)
	if _, err := p.Publish(ctx, []byte(base)); err != nil {
		t.Fatal(err)
	}
	if sum, err := p.Publish(ctx, []byte(same[0])); err != nil || sum.Outcome != ledger.OutcomeAlreadyPublished {
		t.Fatalf("respelled ledger: %+v, %v", sum, err)
	}
	if _, err := p.Publish(ctx, []byte(other[0])); fault.CodeOf(err) != fault.Conflict {
		t.Fatalf("other data: %v, want a conflict", err)
	}
}

// TestRecordOfEarlierVersion: a ledger recorded before streams existed (the
// hash then, written here as the earlier code computed it) is the same
// ledger when sent again without a stream, and other content with one.
func TestRecordOfEarlierVersion(t *testing.T) {
	const earlierHash = "00edcca4367cb65efed917ed3f2f3c9c585bf52ccf2a488050c7d1a34ed970ac" // of contractExample
	ctx := context.Background()
	store := memstore.NewLedgers()
	rec := &ledger.Record{ID: "L-2026-11-21-0001", Hash: earlierHash, Status: ledger.StatusPublished, Transactions: 5, Orders: 2, Sent: 5}
	if err := store.CreateLedger(ctx, rec); err != nil {
		t.Fatal(err)
	}
	sender := &ledgertest.Sender{}
	p := publisher(store, sender)
	if sum, err := p.Publish(ctx, []byte(contractExample)); err != nil || sum.Outcome != ledger.OutcomeAlreadyPublished {
		t.Fatalf("the ledger again after the upgrade: %+v, %v", sum, err)
	}
	if _, err := p.Publish(ctx, withStream(`"erp-eu"`)); fault.CodeOf(err) != fault.Conflict {
		t.Fatalf("the same id in a named stream: %v, want a conflict", err)
	}
	if len(sender.Messages()) != 0 {
		t.Fatalf("%d messages sent", len(sender.Messages()))
	}
}

// TestRejectionNeverOverwritesAPublishingRecord: a ledger refused on one
// instance while a valid ledger of the same id starts publishing on another
// (the record appears between the rejection's read and its write) leaves
// the publishing record alone.
func TestRejectionNeverOverwritesAPublishingRecord(t *testing.T) {
	ctx := context.Background()
	store := memstore.NewLedgers()
	sender := &ledgertest.Sender{}
	valid := publisher(store, sender)
	var raced atomic.Bool
	store.Fail = func(op string) error {
		if op == "create" && raced.CompareAndSwap(false, true) {
			store.Fail = nil
			if _, err := valid.Publish(ctx, []byte(contractExample)); err != nil {
				t.Errorf("the valid ledger: %v", err)
			}
		}
		return nil
	}
	bad := []byte(`{"ledgerId":"L-2026-11-21-0001","transactions":[{"orderId":"o-1","op":"Explode"}]}`)
	_, perr := ledger.Parse(bad, ledger.Limits{}, ledgertest.Orders)
	p := ledgertest.Publisher(store, sender, ledger.PublisherOptions{Retry: fault.RetryPolicy{MaxAttempts: 3}})
	if _, err := p.RecordRejection(ctx, bad, perr); err != nil {
		t.Fatal(err)
	}
	rec, _ := store.GetLedger(ctx, "L-2026-11-21-0001")
	if !raced.Load() || rec.Status != ledger.StatusPublished || rec.Sent != 5 {
		t.Fatalf("record %+v after the race, want the valid ledger published", rec)
	}
}

// TestReusedRejectedIDRace: two corrected ledgers of other content reuse a
// rejected id at once; the one that writes second finds the record changed
// and is a conflict: its transactions never get the first one's seqs.
func TestReusedRejectedIDRace(t *testing.T) {
	ctx := context.Background()
	store := memstore.NewLedgers()
	bad := []byte(`{"ledgerId":"L-r","transactions":[{"orderId":"o","op":"Explode"}]}`)
	_, perr := ledger.Parse(bad, ledger.Limits{}, ledgertest.Orders)
	sender := &ledgertest.Sender{}
	if _, err := publisher(store, sender).RecordRejection(ctx, bad, perr); err != nil {
		t.Fatal(err)
	}
	a := []byte(`{"ledgerId":"L-r","transactions":[{"orderId":"o","op":"CreateOrder","currency":"EUR"},{"orderId":"o","op":"DeleteOrder"}]}`)
	b := []byte(`{"ledgerId":"L-r","transactions":[{"orderId":"o","op":"CreateOrder","currency":"USD"}]}`)
	var raced atomic.Bool
	store.Fail = func(op string) error {
		if op == "save" && raced.CompareAndSwap(false, true) { // a read the rejection; b publishes before a writes
			store.Fail = nil
			if _, err := publisher(store, sender).Publish(ctx, b); err != nil {
				t.Errorf("ledger b: %v", err)
			}
		}
		return nil
	}
	p := ledgertest.Publisher(store, sender, ledger.PublisherOptions{Retry: fault.RetryPolicy{MaxAttempts: 3}})
	_, err := p.Publish(ctx, a)
	if fault.CodeOf(err) != fault.Conflict {
		t.Fatalf("ledger a after b took the id: %v, want a conflict", err)
	}
	msgs := sender.Messages()
	if len(msgs) != 1 || msgs[0].MessageID != "L-r:0" || !strings.Contains(string(msgs[0].Body), "USD") {
		t.Fatalf("messages %+v, want b's only", msgs)
	}
	// And a store asked for b's numbers with a's content refuses.
	if _, err := store.Allocate(ctx, "L-r", "v2:other", "o", 2); !errors.Is(err, ledger.ErrAllocationMismatch) {
		t.Fatalf("allocation for other content: %v", err)
	}
}

// TestWithStream: `convoy publish --stream` sets the document's stream,
// replacing one it had, and leaves the rest of the ledger as it was.
func TestWithStream(t *testing.T) {
	for _, doc := range [][]byte{[]byte(contractExample), withStream(`"erp-eu"`)} {
		out, err := ledger.WithStream(doc, "erp-us")
		if err != nil {
			t.Fatal(err)
		}
		got, err := ledger.Parse(out, ledger.Limits{}, ledgertest.Orders)
		if err != nil || got.Stream != "erp-us" {
			t.Fatalf("after WithStream: %+v, %v\n%s", got, err, out)
		}
		want, _ := ledger.Parse(withStream(`"erp-us"`), ledger.Limits{}, ledgertest.Orders)
		if got.Hash != want.Hash {
			t.Fatalf("WithStream changed more than the stream:\n%s", out)
		}
	}
	if _, err := ledger.WithStream([]byte(contractExample), "erp us"); fault.CodeOf(err) != fault.Invalid {
		t.Fatalf("invalid stream: %v", err)
	}
	if _, err := ledger.WithStream([]byte(`[1]`), "s"); fault.CodeOf(err) != fault.Invalid {
		t.Fatalf("not an object: %v", err)
	}
}
