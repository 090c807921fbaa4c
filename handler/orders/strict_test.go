package orders_test

import (
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/orders"
)

// wantRefused checks that DecodeBody refuses body as invalid input; with a
// field, as a problem of the transaction (index 0) naming that field, with a
// reason that says mention.
func wantRefused(t *testing.T, body, field, mention string) {
	t.Helper()
	tx, err := orders.DecodeBody([]byte(body))
	if fault.CodeOf(err) != fault.Invalid {
		t.Errorf("DecodeBody(%q) = %+v, %v; want an invalid-input error", body, tx, err)
		return
	}
	if field == "" {
		if !strings.Contains(err.Error(), mention) {
			t.Errorf("DecodeBody(%q): %v; want it to say %q", body, err, mention)
		}
		return
	}
	ps := fault.ProblemsOf(err)
	if len(ps) != 1 || ps[0].Index != 0 || ps[0].Field != field || !strings.Contains(ps[0].Reason, mention) {
		t.Errorf("DecodeBody(%q): %v, problems %+v; want one problem: field %q, a reason that says %q", body, err, ps, field, mention)
	}
}

func wrap(tx string) string { return `{"transaction":` + tx + `}` }

// TestDecodeBodyRefusesQuotedAmount: the amount is a JSON integer; "100" is
// a message that cannot be read, not an amount of 100.
func TestDecodeBodyRefusesQuotedAmount(t *testing.T) {
	for _, amount := range []string{`"100"`, `"-5"`, `"1e3"`, `""`} {
		wantRefused(t, wrap(`{"orderId":"o","op":"AddTransaction","txId":"t-3","amount":`+amount+`}`), "amount", "string")
	}
	wantRefused(t, wrap(`{"orderId":"o","op":"DeleteOrder","amount":"7"}`), "amount", "string") // even where no amount is needed
}

// TestDecodeBodyRefusesDuplicateKeys: a key twice in one object, at any
// level, is refused (encoding/json keeps the last one silently), and so is a
// key spelled in other letter case (encoding/json matches struct fields
// without regard to case: "Amount" would overwrite "amount").
func TestDecodeBodyRefusesDuplicateKeys(t *testing.T) {
	for _, tc := range []struct{ tx, field, mention string }{
		{`{"orderId":"o","op":"AddTransaction","txId":"t","amount":100,"amount":-100000}`, "amount", "twice"},
		{`{"orderId":"o","op":"AddTransaction","txId":"t","amount":100,"Amount":-100000}`, "Amount", "not a known field"},
		{`{"orderId":"o","orderId":"p","op":"DeleteOrder"}`, "orderId", "twice"},
		{`{"orderId":"o","ORDERID":"p","op":"DeleteOrder"}`, "ORDERID", "not a known field"},
		{`{"orderId":"o","op":"DeleteOrder","data":{"sku":"x","sku":"y"}}`, "data", `"sku"`},
		{`{"orderId":"o","op":"DeleteOrder","data":{"a":[{"b":{"c":1,"c":2}}]}}`, "data", `"c"`},
	} {
		wantRefused(t, wrap(tc.tx), tc.field, tc.mention)
	}
	tx := `{"orderId":"o","op":"DeleteOrder"}`
	wantRefused(t, `{"transaction":`+tx+`,"transaction":`+tx+`}`, "", `"transaction" appears twice`)
	wantRefused(t, `{"Transaction":`+tx+`}`, "", `unknown field "Transaction"`)
}

// TestDecodeBodyRefusesInvalidUTF8: bytes that are not UTF-8 are refused
// (encoding/json reads them as U+FFFD without a word; data is stored raw).
func TestDecodeBodyRefusesInvalidUTF8(t *testing.T) {
	for _, tc := range []struct{ tx, field string }{
		{"{\"orderId\":\"o\",\"op\":\"DeleteOrder\",\"data\":{\"note\":\"caf\xe9\"}}", "data"},
		{"{\"orderId\":\"o\",\"op\":\"DeleteOrder\",\"data\":{\"\xff\":1}}", "data"},
		{"{\"orderId\":\"o\",\"op\":\"CreateOrder\",\"currency\":\"EU\xff\"}", "currency"},
	} {
		wantRefused(t, wrap(tc.tx), tc.field, "UTF-8")
	}
	if _, err := orders.DecodeBody([]byte(wrap(`{"orderId":"o","op":"DeleteOrder","data":{"note":"café € 🚚"}}`))); err != nil {
		t.Errorf("valid UTF-8: %v", err)
	}
}
