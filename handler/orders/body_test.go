package orders_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/internal/convoytest"
	"github.com/convoy-dev/convoy/handler/orders"
)

func amt(n int64) *int64 { return &n }

func TestBodyRoundTrip(t *testing.T) {
	tx := orders.Transaction{OrderID: "o-1", Op: orders.AddTransaction, TxID: "t-1", Amount: amt(-5), Data: json.RawMessage(`{"note":"x"}`)}
	body, err := orders.EncodeBody(tx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(body, []byte(`{"transaction":{`)) {
		t.Fatalf("body %s is not wrapped", body)
	}
	got, err := orders.DecodeBody(body)
	if err != nil {
		t.Fatal(err)
	}
	if got.OrderID != "o-1" || got.Op != tx.Op || *got.Amount != -5 || string(got.Data) != `{"note":"x"}` {
		t.Fatalf("round trip gave %+v", got)
	}
}

// TestBodyNotHTMLEscaped: data travels as written; json.Marshal would make
// each of these characters six bytes and the message larger than measured.
func TestBodyNotHTMLEscaped(t *testing.T) {
	data := "{\"html\":\"<b>&</b>\u2028\u2029\"}"
	body, err := orders.EncodeBody(orders.Transaction{OrderID: "o-1", Op: orders.DeleteOrder, Data: json.RawMessage(data)})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"transaction":{"orderId":"o-1","op":"DeleteOrder","data":` + data + `}}`; string(body) != want {
		t.Fatalf("body %s, want %s", body, want)
	}
}

func TestDecodeBodyRejects(t *testing.T) {
	for _, tc := range []struct{ body, field string }{
		{`{"transaction":{"orderId":"o-1","op":"AddTransaction","txId":"t-1","amount":12.5}}`, "amount"},
		{`{"transaction":{"orderId":"o-1","op":"AddTransaction","txId":"t-1"}}`, "amount"},
		{`{"transaction":{"orderId":"o 1","op":"DeleteOrder"}}`, "orderId"},
		{`{"transaction":{"orderId":"o-1","op":"Refund"}}`, "op"},
		{`{"transaction":{"orderId":"o-1","op":"CreateOrder","currency":"eur"}}`, "currency"},
		{`{"transaction":{"orderId":"o-1","op":"DeleteOrder","data":[1]}}`, "data"},
		{`{"transaction":{"orderId":"o-1","op":"DeleteOrder","amout":1}}`, ""},         // typo: unknown field
		{`{"transaction":{"orderId":"o-1","op":"DeleteOrder"},"SessionId":"o-9"}`, ""}, // would shadow metadata
		{`{"transaction":{"orderId":"o-1","op":"DeleteOrder"}} {}`, ""},                // trailing data
		{`{"orderId":"o-1","op":"DeleteOrder"}`, ""},                                   // not wrapped
		{`{"transaction":null}`, ""},
	} {
		_, err := orders.DecodeBody([]byte(tc.body))
		if fault.CodeOf(err) != fault.Invalid {
			t.Errorf("DecodeBody(%s) = %v, want an invalid-input error", tc.body, err)
			continue
		}
		if tc.field != "" {
			ps := fault.ProblemsOf(err)
			if len(ps) == 0 || ps[0].Field != tc.field {
				t.Errorf("DecodeBody(%s): problems %+v, want field %s", tc.body, ps, tc.field)
			}
		}
	}
}

func TestValidateBoundsAmounts(t *testing.T) {
	for _, tc := range []struct {
		amount int64
		ok     bool
	}{{1e15, true}, {-1e15, true}, {0, true}, {1e15 + 1, false}, {-1e15 - 1, false},
		{9223372036854775807, false}, {-9223372036854775808, false}} {
		tx := orders.Transaction{OrderID: "o-1", Op: orders.AddTransaction, TxID: "t-1", Amount: amt(tc.amount)}
		ps := tx.Validate(0)
		if ok := len(ps) == 0; ok != tc.ok || (!ok && ps[0].Field != "amount") {
			t.Errorf("amount %d: problems %+v, want valid=%v", tc.amount, ps, tc.ok)
		}
		body := fmt.Sprintf(`{"transaction":{"orderId":"o-1","op":"ModifyTransaction","txId":"t","amount":%d}}`, tc.amount)
		if _, err := orders.DecodeBody([]byte(body)); (err == nil) != tc.ok {
			t.Errorf("DecodeBody with amount %d: %v, want valid=%v", tc.amount, err, tc.ok)
		}
	}
}

func TestValidateBoundsData(t *testing.T) {
	data := func(n int) json.RawMessage { return json.RawMessage(`{"x":"` + strings.Repeat("a", n-8) + `"}`) }
	if ps := (orders.Transaction{OrderID: "o-1", Op: orders.DeleteOrder, Data: data(4096)}).Validate(0); len(ps) != 0 {
		t.Fatalf("4096 bytes of data: %+v", ps)
	}
	if ps := (orders.Transaction{OrderID: "o-1", Op: orders.DeleteOrder, Data: data(4097)}).Validate(0); len(ps) != 1 || ps[0].Field != "data" {
		t.Fatalf("4097 bytes of data: %+v", ps)
	}
}

func TestValidateNamesEveryProblem(t *testing.T) {
	ps := orders.Transaction{OrderID: strings.Repeat("x", 101), Op: orders.ModifyTransaction}.Validate(7)
	fields := map[string]bool{}
	for _, p := range ps {
		if p.Index != 7 {
			t.Errorf("problem %+v has index %d, want 7", p, p.Index)
		}
		fields[p.Field] = true
	}
	for _, f := range []string{"orderId", "txId", "amount"} {
		if !fields[f] {
			t.Errorf("no problem reported for %s: %+v", f, ps)
		}
	}
}

// FuzzDecodeBody: any body either decodes to a valid transaction that
// re-encodes to the same transaction, or is an invalid-input error. What it
// accepts reads the same with any JSON reader: valid JSON and UTF-8, no key
// twice in one object at any depth, each key spelled exactly, the amount an
// integer (not a string), the very one decoded.
func FuzzDecodeBody(f *testing.F) {
	f.Add([]byte(`{"transaction":{"orderId":"o-1","op":"AddTransaction","txId":"t-1","amount":1250}}`))
	f.Add([]byte(`{"transaction":{"orderId":"o-1","op":"CreateOrder","currency":"EUR","data":{"a":[1,2]}}}`))
	f.Add([]byte(`{"transaction":{"orderId":"o-1","op":"DeleteOrder"}}`))
	f.Add([]byte(`{"transaction":{"orderId":"o-1","op":"ModifyTransaction","txId":"t","amount":-9223372036854775808}}`))
	f.Add([]byte(`{"transaction":{"orderId":"o","op":"AddTransaction","txId":"t-3","amount":"100"}}`))
	f.Add([]byte(`{"transaction":{"orderId":"o","op":"AddTransaction","txId":"t","amount":100,"amount":-100000}}`))
	f.Add([]byte(`{"transaction":{"orderId":"o","op":"AddTransaction","txId":"t","amount":100,"Amount":-100000}}`))
	f.Add([]byte(`{"transaction":{"orderId":"o","op":"DeleteOrder","data":{"a":[{"b":1,"b":2}]}}}`))
	f.Add([]byte("{\"transaction\":{\"orderId\":\"o\",\"op\":\"DeleteOrder\",\"data\":{\"note\":\"caf\xe9\"}}}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		tx, err := orders.DecodeBody(body)
		if err != nil {
			if fault.CodeOf(err) != fault.Invalid {
				t.Fatalf("error of class %s: %v", fault.CodeOf(err), err)
			}
			return
		}
		if ps := tx.Validate(0); len(ps) > 0 {
			t.Fatalf("decoded an invalid transaction: %+v", ps)
		}
		if !json.Valid(body) || !utf8.Valid(body) {
			t.Fatalf("accepted a body that is not valid JSON in UTF-8: %q", body)
		}
		if key, err := convoytest.DuplicateKey(body); err != nil {
			t.Fatal(err)
		} else if key != "" {
			t.Fatalf("accepted a body with the key %q twice in one object: %q", key, body)
		}
		var generic map[string]map[string]any
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(&generic); err != nil {
			t.Fatalf("accepted a body encoding/json reads otherwise (%v): %q", err, body)
		}
		for key := range generic["transaction"] {
			if !slices.Contains([]string{"orderId", "op", "txId", "amount", "currency", "data"}, key) {
				t.Fatalf("accepted the key %q: %q", key, body)
			}
		}
		amount, written := generic["transaction"]["amount"]
		if n, isNumber := amount.(json.Number); written != (tx.Amount != nil) || written && (!isNumber || n.String() != strconv.FormatInt(*tx.Amount, 10)) {
			t.Fatalf("amount written %v (%#v), decoded %v: %q", written, amount, tx.Amount, body)
		}
		if tx.Amount != nil && (*tx.Amount > 1e15 || *tx.Amount < -1e15) {
			t.Fatalf("decoded amount %d, beyond 10^15", *tx.Amount)
		}
		again, err := orders.EncodeBody(tx)
		if err != nil {
			t.Fatal(err)
		}
		tx2, err := orders.DecodeBody(again)
		if err != nil || tx2.OrderID != tx.OrderID || tx2.Op != tx.Op || tx2.TxID != tx.TxID || (tx.Amount == nil) != (tx2.Amount == nil) {
			t.Fatalf("re-encoded body %s decodes to %+v, %v", again, tx2, err)
		}
	})
}
