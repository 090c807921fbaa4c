package accounts_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/handler/accounts"
	"github.com/convoy-dev/convoy/handler/fault"
)

// examples are one body of each command, as EncodeBody writes it.
var examples = []struct {
	body string
	want accounts.Command
}{
	{`{"command":{"accountId":"acc-1","kind":"open","currency":"EUR","limit":50000}}`,
		accounts.Command{AccountID: "acc-1", Kind: accounts.Open, Currency: "EUR", Limit: 50000}},
	{`{"command":{"accountId":"acc-1","kind":"deposit","amount":120000,"reference":"dep-2026-001"}}`,
		accounts.Command{AccountID: "acc-1", Kind: accounts.Deposit, Amount: 120000, Reference: "dep-2026-001"}},
	{`{"command":{"accountId":"acc-1","kind":"withdraw","amount":30000,"reference":"atm.7781"}}`,
		accounts.Command{AccountID: "acc-1", Kind: accounts.Withdraw, Amount: 30000, Reference: "atm.7781"}},
	{`{"command":{"accountId":"acc-1","kind":"reverse","reference":"rev-1","reverses":"atm.7781"}}`,
		accounts.Command{AccountID: "acc-1", Kind: accounts.Reverse, Reference: "rev-1", Reverses: "atm.7781"}},
	{`{"command":{"accountId":"acc-1","kind":"close"}}`,
		accounts.Command{AccountID: "acc-1", Kind: accounts.Close}},
}

// TestReadCommandExamples: each example reads as its command, and its
// command's body is the example, byte for byte.
func TestReadCommandExamples(t *testing.T) {
	for _, ex := range examples {
		c, err := accounts.Rules{}.ReadCommand("acc-1", []byte(ex.body))
		if err != nil || c != ex.want {
			t.Errorf("ReadCommand(%s) = %+v, %v; want %+v", ex.body, c, err, ex.want)
			continue
		}
		if body, err := (accounts.Rules{}).Body(c); err != nil || string(body) != ex.body {
			t.Errorf("Body(%+v) = %s, %v; want %s", c, body, err, ex.body)
		}
	}
	// The limit may be left out (no overdraft); spacing and key order do not matter.
	c, err := accounts.Rules{}.ReadCommand("acc-1", []byte(` { "command" : { "currency" : "USD", "kind":"open", "accountId":"acc-1" } } `))
	if err != nil || c != (accounts.Command{AccountID: "acc-1", Kind: accounts.Open, Currency: "USD"}) {
		t.Errorf("an open without a limit: %+v, %v", c, err)
	}
}

// TestReadCommandRefuses: whatever encoding/json would let pass silently is
// an invalid-input error naming the field: an unknown field, a key twice or
// in other letter case, a quoted or fractional amount, bytes that are not
// UTF-8, a field the kind does not take; and every value out of its rules.
func TestReadCommandRefuses(t *testing.T) {
	wrap := func(c string) string { return `{"command":` + c + `}` }
	for _, tc := range []struct{ body, field, mention string }{
		// Unknown fields, at either level.
		{wrap(`{"accountId":"acc-1","kind":"deposit","amout":5,"amount":5,"reference":"d-1"}`), "amout", "not a known field"},
		{wrap(`{"accountId":"acc-1","kind":"close"}`)[:len(wrap(`{"accountId":"acc-1","kind":"close"}`))-1] + `,"SessionId":"acc-9"}`, "", `unknown field "SessionId"`},
		{`{"Command":{"accountId":"acc-1","kind":"close"}}`, "", `unknown field "Command"`},
		// A key twice, or in other letter case.
		{wrap(`{"accountId":"acc-1","kind":"deposit","amount":5,"amount":-100000,"reference":"d-1"}`), "amount", "appears twice"},
		{wrap(`{"accountId":"acc-1","kind":"deposit","amount":5,"Amount":100000,"reference":"d-1"}`), "Amount", "not a known field"},
		{wrap(`{"accountId":"acc-1","accountId":"acc-2","kind":"close"}`), "accountId", "appears twice"},
		{wrap(`{"accountId":"acc-1","kind":"close"}`) + "x", "", "not {\"command\""},
		{`{"command":{"accountId":"acc-1","kind":"close"},"command":{"accountId":"acc-1","kind":"close"}}`, "", `"command" appears twice`},
		// Amounts: integers of minor units, within the bounds.
		{wrap(`{"accountId":"acc-1","kind":"deposit","amount":"100","reference":"d-1"}`), "amount", `"100" is a string, not an integer`},
		{wrap(`{"accountId":"acc-1","kind":"deposit","amount":12.5,"reference":"d-1"}`), "amount", "12.5 is not an integer"},
		{wrap(`{"accountId":"acc-1","kind":"deposit","amount":1e3,"reference":"d-1"}`), "amount", "1e3 is not an integer"},
		{wrap(`{"accountId":"acc-1","kind":"deposit","amount":99999999999999999999,"reference":"d-1"}`), "amount", "not an integer"},
		{wrap(`{"accountId":"acc-1","kind":"deposit","amount":null,"reference":"d-1"}`), "amount", "must be an integer"},
		{wrap(`{"accountId":"acc-1","kind":"deposit","amount":0,"reference":"d-1"}`), "amount", "0 is not above 0"},
		{wrap(`{"accountId":"acc-1","kind":"withdraw","amount":-5,"reference":"d-1"}`), "amount", "-5 is not above 0"},
		{wrap(`{"accountId":"acc-1","kind":"withdraw","amount":1000000000000001,"reference":"d-1"}`), "amount", "beyond 1000000000000000"},
		{wrap(`{"accountId":"acc-1","kind":"open","currency":"EUR","limit":-1}`), "limit", "not between 0 and 9007199254740991"},
		{wrap(`{"accountId":"acc-1","kind":"open","currency":"EUR","limit":9007199254740992}`), "limit", "not between 0"},
		// Bytes that are not UTF-8.
		{wrap("{\"accountId\":\"acc-1\",\"kind\":\"deposit\",\"amount\":5,\"reference\":\"d-\xe9\"}"), "reference", "UTF-8"},
		{wrap("{\"accountId\":\"acc-1\",\"kind\":\"open\",\"currency\":\"EU\xff\"}"), "currency", "UTF-8"},
		// What each kind takes, and needs.
		{wrap(`{"accountId":"acc-1","kind":"close","amount":5}`), "amount", "is not a field of close (it takes nothing besides accountId and kind)"},
		{wrap(`{"accountId":"acc-1","kind":"deposit","amount":5,"reference":"d-1","currency":"EUR"}`), "currency", "is not a field of deposit (it takes amount and reference)"},
		{wrap(`{"accountId":"acc-1","kind":"open","currency":"EUR","reference":"x"}`), "reference", "is not a field of open"},
		{wrap(`{"accountId":"acc-1","kind":"deposit","amount":5}`), "reference", "is required for deposit"},
		{wrap(`{"accountId":"acc-1","kind":"withdraw","reference":"w-1"}`), "amount", "is required for withdraw"},
		{wrap(`{"accountId":"acc-1","kind":"open"}`), "currency", "is required for open"},
		{wrap(`{"accountId":"acc-1","kind":"reverse","reference":"v-1"}`), "reverses", "is required for reverse"},
		{wrap(`{"accountId":"acc-1","kind":"reverse","reference":"v-1","reverses":"v-1"}`), "reverses", "is the reversal's own reference"},
		// Values.
		{wrap(`{"accountId":"acc-1","kind":"open","currency":"eur"}`), "currency", `"eur" is not three capital letters`},
		{wrap(`{"accountId":"acc-1","kind":"deposit","amount":5,"reference":"d 1"}`), "reference", "may contain only letters"},
		{wrap(`{"accountId":"acc-1","kind":"deposit","amount":5,"reference":""}`), "reference", "is required"},
		{wrap(`{"accountId":"acc-1","kind":"deposit","amount":5,"reference":null}`), "reference", "must be a string"},
		{wrap(`{"accountId":"acc-1","kind":"deposit","amount":5,"reference":"` + strings.Repeat("r", 101) + `"}`), "reference", "longer than 100"},
		{wrap(`{"accountId":"acc-1","kind":"refund"}`), "kind", `"refund" is not one of open, deposit, withdraw, reverse, close`},
		{wrap(`{"accountId":"acc-1"}`), "kind", "is required"},
		{wrap(`{"kind":"close"}`), "accountId", "is required"},
		// Not a command.
		{`{"command":null}`, "", "has no command"},
		{`{}`, "", "has no command"},
		{wrap(`[1]`), "", "is not a JSON object"},
		{`{"accountId":"acc-1","kind":"close"}`, "", `unknown field "accountId"`},
		{`[]`, "", "not {\"command\""},
		// Another account's command.
		{wrap(`{"accountId":"acc-2","kind":"close"}`), "", `body accountId "acc-2" differs from SessionId "acc-1"`},
	} {
		c, err := accounts.Rules{}.ReadCommand("acc-1", []byte(tc.body))
		if fault.CodeOf(err) != fault.Invalid {
			t.Errorf("ReadCommand(%q) = %+v, %v; want an invalid-input error", tc.body, c, err)
			continue
		}
		if c != (accounts.Command{}) {
			t.Errorf("ReadCommand(%q) returned %+v beside its error", tc.body, c)
		}
		if !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("ReadCommand(%q): %v; want it to say %q", tc.body, err, tc.mention)
		}
		if tc.field == "" {
			continue
		}
		ps := fault.ProblemsOf(err)
		if len(ps) != 1 || ps[0].Field != tc.field || !strings.Contains(ps[0].Reason, tc.mention) {
			t.Errorf("ReadCommand(%q): problems %+v; want one, of field %q, that says %q", tc.body, ps, tc.field, tc.mention)
		}
	}
}

// TestReadEntry: a ledger's entry is a command as a body carries it: its
// key is its accountId, its problems name its index, and the fields the
// ledger reads itself are handed back.
func TestReadEntry(t *testing.T) {
	r := accounts.Rules{}
	key, c, extras, ps := r.ReadEntry(3, []byte(`{"accountId":"acc-7","kind":"deposit","amount":5,"reference":"d-1","last":true}`), "last")
	if key != "acc-7" || c != (accounts.Command{AccountID: "acc-7", Kind: accounts.Deposit, Amount: 5, Reference: "d-1"}) ||
		string(extras["last"]) != "true" || len(ps) != 0 {
		t.Fatalf("ReadEntry = %q, %+v, %s, %+v", key, c, extras, ps)
	}
	_, _, _, ps = r.ReadEntry(4, []byte(`{"accountId":"acc-7","kind":"withdraw","amount":"5","last":true}`))
	want := []fault.Problem{{Index: 4, Field: "last", Reason: "is not a known field (accountId, kind, currency, limit, amount, reference, reverses)"},
		{Index: 4, Field: "amount", Reason: `"5" is a string, not an integer number of minor units`},
		{Index: 4, Field: "reference", Reason: "is required for withdraw"}}
	if !reflect.DeepEqual(ps, want) {
		t.Fatalf("problems %+v, want %+v", ps, want)
	}
	if _, err := r.Body(accounts.Command{AccountID: "acc-7", Kind: accounts.Deposit, Reference: "d-1"}); fault.CodeOf(err) != fault.Invalid {
		t.Fatalf("the body of a deposit of nothing: %v, want an invalid-input error", err)
	}
}

// FuzzReadCommand: any bytes are a command or an invalid-input error, never
// a panic; a command read is valid, its body reads back as the same command
// and encodes as the same body, it is the ledger entry its body carries,
// and it parks and unparks unchanged.
func FuzzReadCommand(f *testing.F) {
	for _, ex := range examples {
		f.Add([]byte(ex.body))
	}
	for _, s := range []string{
		`{"command":{"accountId":"acc-1","kind":"deposit","amount":"100","reference":"d-1"}}`,
		`{"command":{"accountId":"acc-1","kind":"deposit","amount":5,"amount":5,"reference":"d-1"}}`,
		`{"command":{"accountId":"acc-1","kind":"open","currency":"EUR","limit":0}}`,
		`{"command":{"accountId":"acc-1","kind":"open","currency":"\u0045UR"}}`,
		"{\"command\":{\"accountId\":\"acc-1\",\"kind\":\"close\",\"\xff\":1}}",
		`{"command":{"accountId":"acc-1","kind":"reverse","reference":"v","reverses":"v"}}`,
		`{"command":{"accountId":"acc-1","kind":"withdraw","amount":-0,"reference":"w"}}`,
		`{"command":null}`, `{"command":{}}`, `[]`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	r := accounts.Rules{}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := r.ReadCommand("acc-1", data)
		if err != nil {
			if fault.CodeOf(err) != fault.Invalid {
				t.Fatalf("ReadCommand(%q): %v is not an invalid-input error", data, err)
			}
			return
		}
		body, err := r.Body(c)
		if err != nil {
			t.Fatalf("the command %+v read from %q has no body: %v", c, data, err)
		}
		back, err := r.ReadCommand("acc-1", body)
		if err != nil || back != c {
			t.Fatalf("%q reads as %+v; its body %s reads back as %+v, %v", data, c, body, back, err)
		}
		if again, _ := r.Body(back); !bytes.Equal(again, body) {
			t.Fatalf("%+v encodes as %s, then as %s", c, body, again)
		}
		var wrapped struct{ Command json.RawMessage }
		if err := json.Unmarshal(body, &wrapped); err != nil {
			t.Fatal(err)
		}
		if key, entry, _, ps := r.ReadEntry(0, wrapped.Command); key != "acc-1" || entry != c || len(ps) > 0 {
			t.Fatalf("the entry %s reads as %q, %+v, %+v", wrapped.Command, key, entry, ps)
		}
		if parked, err := r.DecodeCommand("acc-1", r.EncodeCommand(c)); err != nil || parked != c {
			t.Fatalf("%+v parked reads back as %+v, %v", c, parked, err)
		}
	})
}
