package ledger_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/convoy-dev/convoy/handler/internal/golden"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/ledger"
)

// goldenLedgers are ledgers whose hash is pinned: the contract's example,
// the same in a named stream, with data (keys out of order, numbers spelt
// oddly, characters json.Marshal escapes), and one respelled (which must
// hash the same as the one before it).
var goldenLedgers = []struct{ name, doc string }{
	{"contract example", `{
  "ledgerId": "L-2026-11-21-0001",
  "transactions": [
    {"orderId": "o-1", "op": "CreateOrder", "currency": "EUR"},
    {"orderId": "o-2", "op": "CreateOrder", "currency": "USD"},
    {"orderId": "o-1", "op": "AddTransaction", "txId": "t-1", "amount": 1250},
    {"orderId": "o-1", "op": "ModifyTransaction", "txId": "t-1", "amount": 1200},
    {"orderId": "o-2", "op": "DeleteOrder", "last": true}
  ]
}`},
	{"contract example, stream erp-eu", `{
  "ledgerId": "L-2026-11-21-0001", "stream": "erp-eu",
  "transactions": [
    {"orderId": "o-1", "op": "CreateOrder", "currency": "EUR"},
    {"orderId": "o-2", "op": "CreateOrder", "currency": "USD"},
    {"orderId": "o-1", "op": "AddTransaction", "txId": "t-1", "amount": 1250},
    {"orderId": "o-1", "op": "ModifyTransaction", "txId": "t-1", "amount": 1200},
    {"orderId": "o-2", "op": "DeleteOrder", "last": true}
  ]
}`},
	{"with data", `{"ledgerId": "L-data", "transactions": [
    {"orderId": "o-1", "op": "CreateOrder", "currency": "EUR", "data": {"z": 1.50, "a": [1e2, "<&>"], "n": {"y": null, "x": "\u00e9"}}},
    {"orderId": "o-1", "op": "AddTransaction", "txId": "t-1", "amount": -3, "data": {"k": "v"}, "last": false},
    {"orderId": "o-1", "op": "DeleteOrder", "last": true}
  ]}`},
	{"with data, respelled", `{"transactions":[{"op":"CreateOrder","orderId":"o-1","data":{"n":{"x":"é","y":null},"a":[100,"\u003c&>"],"z":1.5},"currency":"EUR"},
    {"data":{"k":"v"},"amount":-3,"txId":"t-1","op":"AddTransaction","orderId":"o-1"},{"last":true,"op":"DeleteOrder","orderId":"o-1"}],"ledgerId":"L-data"}`},
}

// TestGoldenLedgerHashes (issue 43's compatibility goldens, written on the
// code before the engine was taken apart from the order fold): the hash a
// ledger's record holds (the idempotency check: a re-published ledger is
// recognised by it), for the ledgers above, in
// testdata/golden/ledger-hashes.json. The legacy hash of records written
// before streams is pinned by TestRecordOfEarlierVersion; this pins the
// current one. Each ledger recognises the hash in the file as its own.
func TestGoldenLedgerHashes(t *testing.T) {
	type hash struct {
		Ledger string `json:"ledger"`
		ID     string `json:"ledgerId"`
		Stream string `json:"stream"`
		Hash   string `json:"hash"`
	}
	var got []hash
	for _, g := range goldenLedgers {
		l, err := ledger.Parse([]byte(g.doc), ledger.Limits{}, ledgertest.Orders)
		if err != nil {
			t.Fatalf("%s: %v", g.name, err)
		}
		got = append(got, hash{Ledger: g.name, ID: l.ID, Stream: l.Stream, Hash: l.Hash})
	}
	golden.Check(t, "ledger-hashes.json", golden.Marshal(t, got))
	if golden.Updating() {
		return
	}
	var pinned []hash
	if err := json.Unmarshal(golden.Read(t, "ledger-hashes.json"), &pinned); err != nil {
		t.Fatal(err)
	}
	for i, p := range pinned {
		l, _ := ledger.Parse([]byte(goldenLedgers[i].doc), ledger.Limits{}, ledgertest.Orders)
		if !l.SameContent(p.Hash) {
			t.Errorf("%s: the hash recorded today (%s) is not recognised as its own", p.Ledger, p.Hash)
		}
	}
}

// TestGoldenPublishedMessages (issue 43): the messages the publisher sends
// for a ledger (the one with data above), as testdata/golden/published.json:
// session id, message id, application properties with their Go types, body
// byte for byte.
func TestGoldenPublishedMessages(t *testing.T) {
	sender := &ledgertest.Sender{}
	if _, err := publisher(memstore.NewLedgers(), sender).Publish(context.Background(), []byte(goldenLedgers[2].doc)); err != nil {
		t.Fatal(err)
	}
	type message struct {
		SessionID  string            `json:"sessionId"`
		MessageID  string            `json:"messageId"`
		Properties map[string]string `json:"properties"` // "<Go type> <value>"
		Body       string            `json:"body"`
	}
	var got []message
	for _, m := range sender.Messages() {
		props := map[string]string{}
		for k, v := range m.Properties() {
			props[k] = fmt.Sprintf("%T %v", v, v)
		}
		got = append(got, message{SessionID: m.SessionID, MessageID: m.MessageID, Properties: props, Body: string(m.Body)})
	}
	golden.Check(t, "published.json", golden.Marshal(t, got))
}
