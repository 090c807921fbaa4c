package ledger_test

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/convoy-dev/convoy/handler/accounts"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/internal/convoytest"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/orders"
)

const contractExample = `{
  "ledgerId": "L-2026-11-21-0001",
  "transactions": [
    {"orderId": "o-1", "op": "CreateOrder", "currency": "EUR"},
    {"orderId": "o-2", "op": "CreateOrder", "currency": "USD"},
    {"orderId": "o-1", "op": "AddTransaction", "txId": "t-1", "amount": 1250},
    {"orderId": "o-1", "op": "ModifyTransaction", "txId": "t-1", "amount": 1200},
    {"orderId": "o-2", "op": "DeleteOrder", "last": true}
  ]
}`

func TestParseContractExample(t *testing.T) {
	l, err := ledger.Parse([]byte(contractExample), ledger.Limits{}, ledgertest.Orders)
	if err != nil {
		t.Fatal(err)
	}
	if l.ID != "L-2026-11-21-0001" || l.Len() != 5 || !l.Entry(4).Last || *l.Entry(3).Command.(orders.Transaction).Amount != 1200 ||
		l.Entry(3).Domain != "orders" || l.Entry(3).Key != "o-1" || l.Default != "orders" {
		t.Fatalf("parsed %+v", l)
	}
	if got := l.Keys("orders"); len(got) != 2 || got[0] != "o-1" || got[1] != "o-2" {
		t.Fatalf("orders %v", got)
	}
	same, err := ledger.Parse([]byte(strings.NewReplacer("\n", "", "  ", "").Replace(contractExample)), ledger.Limits{}, ledgertest.Orders)
	if err != nil || same.Hash != l.Hash {
		t.Fatalf("reformatted ledger hashes differently: %v", err)
	}
	other, _ := ledger.Parse([]byte(strings.Replace(contractExample, "1200", "1201", 1)), ledger.Limits{}, ledgertest.Orders)
	if other.Hash == l.Hash {
		t.Fatal("a changed amount did not change the hash")
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	doc := `{"ledgerId": "L 1", "extra": 1, "transactions": [
		{"orderId": "o-1", "op": "CreateOrder", "currency": "EUR"},
		{"orderId": "o-1", "op": "AddTransaction", "txId": "t-1", "amount": 12.5},
		{"orderId": "o-1", "op": "AddTransaction", "amount": 5, "amout": 5},
		{"orderId": "o-1", "op": "Refund"},
		{"orderId": "o/1", "op": "CreateOrder", "currency": "eur", "last": "yes"},
		"not an object",
		{"orderId": "o-1", "op": "DeleteOrder", "data": [1]},
		{"orderId": "o-1", "op": "AddTransaction", "txId": "t-2", "amount": 1000000000000001},
		{"orderId": "o-1", "op": "ModifyTransaction", "txId": "t-2", "amount": -9223372036854775808},
		{"orderId": "o-1", "op": "AddTransaction", "txId": "t-3", "amount": 1000000000000000}
	]}`
	_, err := ledger.Parse([]byte(doc), ledger.Limits{}, ledgertest.Orders)
	if fault.CodeOf(err) != fault.Invalid {
		t.Fatalf("got %v, want an invalid-input error", err)
	}
	for _, want := range []string{"ledgerId", `unknown field "extra"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not mention %s", err, want)
		}
	}
	want := map[[2]any]bool{
		{1, "amount"}: true, {2, "txId"}: true, {2, "amout"}: true, {3, "op"}: true,
		{4, "orderId"}: true, {4, "currency"}: true, {4, "last"}: true, {5, ""}: true, {6, "data"}: true,
		{7, "amount"}: true, {8, "amount"}: true, // beyond ±10^15 (index 9 is exactly 10^15: valid)
	}
	got := map[[2]any]bool{}
	for _, p := range fault.ProblemsOf(err) {
		got[[2]any{p.Index, p.Field}] = true
		if p.Reason == "" {
			t.Errorf("problem %+v has no reason", p)
		}
	}
	for k := range want {
		if !got[k] {
			t.Errorf("no problem reported for transaction %v field %q; got %v", k[0], k[1], fault.ProblemsOf(err))
		}
	}
	if len(got) != len(want) {
		t.Errorf("problems %v, want exactly %v", fault.ProblemsOf(err), want)
	}
}

func TestParseLimits(t *testing.T) {
	one := `{"orderId":"o","op":"DeleteOrder"}`
	for _, doc := range []string{`[]`, `{"ledgerId":"L"}`, `{"ledgerId":"L","transactions":[]}`, `{"transactions":[` + one + `]}`,
		`{"ledgerId":"L","transactions":{"a":[1]}}`, `{"ledgerId":"L","transactions":null}`,
		`{"ledgerId":"L","transactions":[` + one + `]} {}`, `{"ledgerId":"L","transactions":[` + one + `]`,
		`{"ledgerId":"L","ledgerId":"M","transactions":[` + one + `]}`} {
		if _, err := ledger.Parse([]byte(doc), ledger.Limits{}, ledgertest.Orders); fault.CodeOf(err) != fault.Invalid {
			t.Errorf("Parse(%s) = %v, want invalid", doc, err)
		}
	}
	many := `{"ledgerId":"L","transactions":[` + strings.Repeat(`{"orderId":"o","op":"DeleteOrder"},`, 10) + `{"orderId":"o","op":"DeleteOrder"}]}`
	if _, err := ledger.Parse([]byte(many), ledger.Limits{MaxTransactions: 10}, ledgertest.Orders); fault.CodeOf(err) != fault.TooLarge {
		t.Errorf("11 transactions over a limit of 10: %v, want too large", err)
	}
	big := `{"ledgerId":"L","transactions":[{"orderId":"o","op":"DeleteOrder","data":{"blob":"` + strings.Repeat("x", 3000) + `"}}]}`
	_, err := ledger.Parse([]byte(big), ledger.Limits{}, []ledger.Domain{{Rules: orders.Domain, MaxMessageBytes: 3000}}) // exact sizes: servicebus' TestLedgerMeasuredAsSent
	if ps := fault.ProblemsOf(err); len(ps) != 1 || ps[0].Index != 0 || ps[0].Field != "data" {
		t.Errorf("a transaction larger than a message: %v", err)
	}
}

// FuzzParse: any document either parses into transactions that each pass
// validation, or fails as invalid/too large with problems indexed within it.
// What it accepts reads the same with any JSON reader: valid UTF-8, no key
// twice in one object at any depth, each amount an integer (not a string),
// the very one parsed.
func FuzzParse(f *testing.F) {
	f.Add([]byte(contractExample))
	f.Add([]byte(`{"ledgerId":"L","transactions":[{"orderId":"o","op":"AddTransaction","txId":"t","amount":-1,"data":{"k":null}}]}`))
	f.Add([]byte(`{"ledgerId":"","transactions":[1,{},[],null,{"op":7}]}`))
	f.Add([]byte(`{"ledgerId":"L","stream":"erp-eu","transactions":[{"orderId":"o","op":"DeleteOrder","data":{"b":1.50,"a":[1e2]}}]}`))
	f.Add([]byte(`{"ledgerId":"L","stream":"erp/eu","transactions":[{"orderId":"o","op":"DeleteOrder"}]}`))
	f.Add([]byte(`{"stream":"a b","ledgerId":"L","transactions":[{"orderId":"o","op":"DeleteOrder"}],"stream":7}`))
	f.Add([]byte(`{"ledgerId":"L","transactions":[{"orderId":"o","op":"AddTransaction","txId":"t-3","amount":"100"}]}`))
	f.Add([]byte(`{"ledgerId":"L","transactions":[{"orderId":"o","op":"AddTransaction","txId":"t","amount":100,"amount":-100000}]}`))
	f.Add([]byte(`{"ledgerId":"L","transactions":[{"orderId":"o","op":"DeleteOrder","data":{"a":[{"b":1,"b":2}]}}]}`))
	f.Add([]byte("{\"ledgerId\":\"L\",\"transactions\":[{\"orderId\":\"o\",\"op\":\"DeleteOrder\",\"data\":{\"note\":\"caf\xe9\"}}]}"))
	f.Add(ledgertest.MixedDoc("L-mixed", 6, []string{"k-1", "k-2"}, 8))
	f.Add([]byte(`{"ledgerId":"L","transactions":[{"domain":"accounts","accountId":"a","kind":"open","currency":"EUR","limit":5},` +
		`{"accountId":"a","domain":"accounts","kind":"withdraw","amount":3,"reference":"w-1","last":true},{"orderId":"a","op":"DeleteOrder","domain":"orders"}]}`))
	f.Add([]byte(`{"ledgerId":"L","transactions":[{"domain":"acounts","accountId":"a","kind":"open"},{"domain":7,"orderId":"o","op":"DeleteOrder"},` +
		`{"domain":"accounts","domain":"orders","accountId":"a","kind":"close"},{"orderId":"o","op":"DeleteOrder","data":{"domain":"accounts"}}]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		l, err := ledger.Parse(doc, ledger.Limits{MaxTransactions: 1000}, ledgertest.OrdersAndAccounts)
		if err == nil && !json.Valid(doc) {
			t.Fatalf("accepted a document that is not valid JSON: %q", doc)
		}
		if err != nil {
			if c := fault.CodeOf(err); c != fault.Invalid && c != fault.TooLarge {
				t.Fatalf("error of class %s: %v", c, err)
			}
			for _, p := range fault.ProblemsOf(err) {
				if p.Index < 0 || p.Index >= 1000 || p.Reason == "" {
					t.Fatalf("problem %+v", p)
				}
			}
			return
		}
		if l.Len() == 0 || l.Hash == "" {
			t.Fatalf("parsed an empty ledger: %+v", l)
		}
		// The stream becomes a SessionId: 1-100 characters of [A-Za-z0-9._-].
		if n := len(l.Stream); n == 0 || n > 100 || strings.Trim(l.Stream, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" {
			t.Fatalf("accepted stream %q", l.Stream)
		}
		if !l.SameContent(l.Hash) {
			t.Fatal("a ledger is not the same content as itself")
		}
		if !utf8.Valid(doc) {
			t.Fatalf("accepted a document that is not UTF-8: %q", doc)
		}
		if key, err := convoytest.DuplicateKey(doc); err != nil {
			t.Fatal(err)
		} else if key != "" {
			t.Fatalf("accepted a document with the key %q twice in one object: %q", key, doc)
		}
		var generic struct {
			Transactions []map[string]any
		}
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber()
		if err := dec.Decode(&generic); err != nil || len(generic.Transactions) != l.Len() {
			t.Fatalf("accepted a document encoding/json reads otherwise (%v): %q", err, doc)
		}
		for i, e := range l.Entries() {
			switch c := e.Command.(type) {
			case orders.Transaction:
				amount, written := generic.Transactions[i]["amount"]
				if n, isNumber := amount.(json.Number); written != (c.Amount != nil) || written && (!isNumber || n.String() != strconv.FormatInt(*c.Amount, 10)) {
					t.Fatalf("entry %d: amount written %v (%#v), parsed %v", i, written, amount, c.Amount)
				}
				if c.Amount != nil && (*c.Amount > 1e15 || *c.Amount < -1e15) {
					t.Fatalf("entry %d: amount %d beyond 10^15", i, *c.Amount)
				}
				if ps := c.Validate(i); len(ps) > 0 || e.Domain != "orders" || e.Key != c.OrderID {
					t.Fatalf("entry %d (%s %q) invalid after parsing: %+v", i, e.Domain, e.Key, ps)
				}
			case accounts.Command:
				// The account domain's own fuzz test holds its reading; here, that
				// the entry is its domain's, under its key, and its body reads back.
				body, err := accounts.EncodeBody(c)
				if err != nil || e.Domain != "accounts" || e.Key != c.AccountID {
					t.Fatalf("entry %d (%s %q): %+v, body %v", i, e.Domain, e.Key, c, err)
				}
				if back, err := (accounts.Rules{}).ReadCommand(e.Key, body); err != nil || back != c {
					t.Fatalf("entry %d: %+v reads back as %+v, %v", i, c, back, err)
				}
			default:
				t.Fatalf("entry %d: a command %T", i, e.Command)
			}
			if d, named := generic.Transactions[i]["domain"]; named && d != e.Domain || !named && e.Domain != l.Default {
				t.Fatalf("entry %d names domain %v, read as one of %s", i, d, e.Domain)
			}
		}
	})
}

// TestProblemsQuoteInputCutShort: what a problem quotes of the input is cut
// short, so that a rejection stays small enough to record and to read.
func TestProblemsQuoteInputCutShort(t *testing.T) {
	long := strings.Repeat("x", 40_000)
	doc := `{"ledgerId":"L","` + long + `":1,"transactions":[{"orderId":"o","op":"` + long + `","currency":"` + long +
		`","` + long + `":1},{"orderId":"o","op":"AddTransaction","txId":"t","amount":` + strings.Repeat("9", 40_000) + `}]}`
	_, err := ledger.Parse([]byte(doc), ledger.Limits{}, ledgertest.Orders)
	ps := fault.ProblemsOf(err)
	if len(ps) < 3 {
		t.Fatalf("problems %d: %v", len(ps), err)
	}
	for _, p := range ps {
		if len(p.Field)+len(p.Reason) > 300 {
			t.Errorf("problem of %d bytes: field %.80q… reason %.80q…", len(p.Field)+len(p.Reason), p.Field, p.Reason)
		}
	}
	if len(fault.MessageOf(err)) > 300 {
		t.Errorf("message of %d bytes", len(fault.MessageOf(err)))
	}
}

// TestSyntaxErrorsSayWhere: a ledger that is not valid JSON is answered with
// what encoding/json found and where (line, column and byte offset counted
// by hand here), a valid document that is no object keeps the short answer.
func TestSyntaxErrorsSayWhere(t *testing.T) {
	cases := []struct{ doc, want string }{
		{"{\n  \"ledgerId\": \"L-1\",\n  \"transactions\": [ {\"orderId\": \"o-1\",} ]\n}",
			`the ledger is not valid JSON: invalid character '}' looking for beginning of object key string at line 3, column 39 (byte offset 61)`},
		{`{"ledgerId" "L-1"}`, `the ledger is not valid JSON: invalid character '"' after object key at line 1, column 13 (byte offset 12)`},
		{`{"ledgerId": "L-1"`, `the ledger is not valid JSON: unexpected end of JSON input at line 1, column 19 (byte offset 18)`},
		{"{\"ledgerId\": \"L-1\", \"transactions\": []}\nx", `the ledger is not valid JSON: invalid character 'x' after top-level value at line 2, column 1 (byte offset 40)`},
		{" \n ", `the ledger is empty`},
		{`[{"ledgerId": "L-1"}]`, `the ledger is not a JSON object`},
	}
	for _, c := range cases {
		_, err := ledger.Parse([]byte(c.doc), ledger.Limits{}, ledgertest.Orders)
		if fault.CodeOf(err) != fault.Invalid || err.Error() != c.want {
			t.Errorf("Parse(%q):\n got %v\nwant %s", c.doc, err, c.want)
		}
		if strings.HasSuffix(c.doc, "x") {
			continue // WithStream leaves what follows the object to the Parse of its result
		}
		if _, err := ledger.WithStream([]byte(c.doc), "s"); err == nil || err.Error() != c.want {
			t.Errorf("WithStream(%q):\n got %v\nwant %s", c.doc, err, c.want)
		}
	}
}
