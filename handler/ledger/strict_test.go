package ledger_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/ledger"
)

// inLedger puts tx as transaction 1 of a ledger, after a valid CreateOrder.
func inLedger(tx string) string {
	return `{"ledgerId":"L","transactions":[{"orderId":"o","op":"CreateOrder","currency":"EUR"},` + tx + `]}`
}

// wantProblem checks that err refuses the ledger for one problem only: the
// transaction at index, field, a reason that says mention.
func wantProblem(t *testing.T, name string, err error, index int, field, mention string) {
	t.Helper()
	ps := fault.ProblemsOf(err)
	if fault.CodeOf(err) != fault.Invalid || len(ps) != 1 || ps[0].Index != index || ps[0].Field != field || !strings.Contains(ps[0].Reason, mention) {
		t.Errorf("%s: %v, problems %+v; want one problem: transaction %d, field %q, a reason that says %q", name, err, ps, index, field, mention)
	}
}

// TestParseRefusesQuotedAmount: the amount is an integer (the contract); a
// string that spells one is a problem of the ledger, not 100 (json.Number
// reads "100" as 100). Publish, the path of HTTP and the queue, sends nothing.
func TestParseRefusesQuotedAmount(t *testing.T) {
	for _, amount := range []string{`"100"`, `"-5"`, `"1e3"`, `""`, `"x"`} {
		doc := inLedger(`{"orderId":"o","op":"AddTransaction","txId":"t-3","amount":` + amount + `}`)
		_, err := ledger.Parse([]byte(doc), ledger.Limits{}, ledgertest.Orders)
		wantProblem(t, "amount "+amount, err, 1, "amount", "string")
	}
	sender := &ledgertest.Sender{}
	p := ledgertest.Publisher(memstore.NewLedgers(), sender, ledger.PublisherOptions{Retry: noRetry})
	_, err := p.Publish(context.Background(), []byte(inLedger(`{"orderId":"o","op":"AddTransaction","txId":"t-3","amount":"100"}`)))
	if fault.CodeOf(err) != fault.Invalid || len(sender.Messages()) != 0 {
		t.Errorf("Publish with a quoted amount: %v, %d messages sent", err, len(sender.Messages()))
	}
}

// TestParseRefusesDuplicateKeys: a key twice in one object, at any level of
// the document, is refused (encoding/json would keep the last one silently:
// {"amount":100,"amount":-100000} would publish -100000), naming the key.
func TestParseRefusesDuplicateKeys(t *testing.T) {
	for _, tc := range []struct{ tx, field, mention string }{
		{`{"orderId":"o","op":"AddTransaction","txId":"t","amount":100,"amount":-100000}`, "amount", "twice"},
		{`{"orderId":"o","op":"AddTransaction","txId":"t","amount":100,"txId":"u"}`, "txId", "twice"},
		{`{"orderId":"o","orderId":"p","op":"DeleteOrder"}`, "orderId", "twice"},
		{`{"orderId":"o","op":"DeleteOrder","last":true,"last":false}`, "last", "twice"},
		{`{"orderId":"o","op":"DeleteOrder","amout":1,"amout":2}`, "amout", ""}, // unknown, and twice: one problem
		{`{"orderId":"o","op":"DeleteOrder","data":{"a":1},"data":{"a":2}}`, "data", "twice"},
		{`{"orderId":"o","op":"DeleteOrder","data":{"sku":"x","sku":"y"}}`, "data", `"sku"`},
		{`{"orderId":"o","op":"DeleteOrder","data":{"a":{"b":[{"c":1,"d":{},"c":2}]}}}`, "data", `"c"`},
		{`{"orderId":"o","op":"DeleteOrder","data":{"k":1,"\u006b":2}}`, "data", `"k"`}, // the same key, spelled otherwise
	} {
		_, err := ledger.Parse([]byte(inLedger(tc.tx)), ledger.Limits{}, ledgertest.Orders)
		wantProblem(t, tc.tx, err, 1, tc.field, tc.mention)
	}
	// The same key in different objects is no duplicate.
	ok := inLedger(`{"orderId":"o","op":"DeleteOrder","data":{"items":[{"sku":"x","n":1},{"sku":"y","n":2}],"sku":"z","n":{"sku":0}}}`)
	if _, err := ledger.Parse([]byte(ok), ledger.Limits{}, ledgertest.Orders); err != nil {
		t.Errorf("keys repeated across objects: %v", err)
	}
}

// TestParseRefusesInvalidUTF8: bytes that are not UTF-8 in any string of a
// transaction are refused at validation (encoding/json reads them as U+FFFD
// without a word, and data would reach Table Storage raw), naming the field.
func TestParseRefusesInvalidUTF8(t *testing.T) {
	for _, tc := range []struct{ tx, field string }{
		{"{\"orderId\":\"o\",\"op\":\"DeleteOrder\",\"data\":{\"note\":\"caf\xe9\"}}", "data"},
		{"{\"orderId\":\"o\",\"op\":\"DeleteOrder\",\"data\":{\"\xff\":1}}", "data"},
		{"{\"orderId\":\"o\",\"op\":\"DeleteOrder\",\"data\":{\"a\":[\"ok\",\"\xed\xa0\x80\"]}}", "data"}, // an encoded surrogate
		{"{\"orderId\":\"o\",\"op\":\"AddTransaction\",\"txId\":\"t\xc3\",\"amount\":1}", "txId"},
		{"{\"orderId\":\"o\xff\",\"op\":\"DeleteOrder\"}", "orderId"},
	} {
		_, err := ledger.Parse([]byte(inLedger(tc.tx)), ledger.Limits{}, ledgertest.Orders)
		wantProblem(t, fmt.Sprintf("%q", tc.tx), err, 1, tc.field, "UTF-8")
	}
	// A field name that is not UTF-8: a problem of the transaction, whatever else is said of it.
	_, err := ledger.Parse([]byte(inLedger("{\"orderId\":\"o\",\"op\":\"DeleteOrder\",\"\xff\":1}")), ledger.Limits{}, ledgertest.Orders)
	found := false
	for _, p := range fault.ProblemsOf(err) {
		found = found || p.Index == 1 && strings.Contains(p.Reason, "UTF-8")
	}
	if !found {
		t.Errorf("a field name that is not UTF-8: %v, problems %+v", err, fault.ProblemsOf(err))
	}
	// UTF-8 itself is welcome.
	ok := inLedger(`{"orderId":"o","op":"DeleteOrder","data":{"note":"café € 日本 🚚","\u00e9":"\ud83d\ude9a"}}`)
	if _, err := ledger.Parse([]byte(ok), ledger.Limits{}, ledgertest.Orders); err != nil {
		t.Errorf("valid UTF-8: %v", err)
	}
}
