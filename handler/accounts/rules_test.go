package accounts_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/accounts"
	"github.com/convoy-dev/convoy/handler/keyed"
)

// memRows is an account's rows as a store holds them: what its decisions wrote.
type memRows map[keyed.RowRef]keyed.Props

// decide decides c on s with the rows its Needs names (no other: a row
// outside them fails the test), as the engine would.
func (r memRows) decide(t *testing.T, s accounts.State, c accounts.Command) (accounts.State, keyed.Writes, error) {
	t.Helper()
	needs := accounts.Rules{}.Needs(s, c)
	named := &needed{rows: r, named: map[keyed.RowRef]bool{}}
	for _, ref := range append(append([]keyed.RowRef(nil), needs.Read...), needs.Absent...) {
		named.named[ref] = true
	}
	next, w, err := accounts.Rules{}.Decide(s, c, named)
	if named.outside != nil {
		t.Fatalf("deciding %+v read %v, which its Needs (%+v) did not name", c, *named.outside, needs)
	}
	return next, w, err
}

func (r memRows) apply(w keyed.Writes) {
	for _, x := range w {
		r[x.Ref] = r[x.Ref].Merge(x.Props)
	}
}

type needed struct {
	rows    memRows
	named   map[keyed.RowRef]bool
	outside *keyed.RowRef
}

func (n *needed) Get(ref keyed.RowRef) (keyed.Props, bool) {
	if !n.named[ref] {
		n.outside = &ref
		return nil, false
	}
	p, ok := n.rows[ref]
	return p, ok
}

// run decides cmds in order, from a new account; every command but the
// last must be applied. It returns the state before the last, and the last
// one's decision.
func run(t *testing.T, cmds ...accounts.Command) (before, after accounts.State, w keyed.Writes, err error) {
	t.Helper()
	s, _ := accounts.Rules{}.DecodeState(1, nil)
	rows := memRows{}
	for i, c := range cmds {
		next, writes, err := rows.decide(t, s, c)
		if i == len(cmds)-1 {
			return s, next, writes, err
		}
		if err != nil {
			t.Fatalf("command %d %+v: %v", i, c, err)
		}
		if back, err := (accounts.Rules{}).DecodeState(1, accounts.Rules{}.EncodeState(next)); err != nil || back != next {
			t.Fatalf("command %d %+v: the state %+v reads back as %+v, %v", i, c, next, back, err)
		}
		rows.apply(writes)
		s = next
	}
	return s, s, nil, nil
}

const id = "acc-1"

func open(currency string, limit int64) accounts.Command {
	return accounts.Command{AccountID: id, Kind: accounts.Open, Currency: currency, Limit: limit}
}

func deposit(ref string, amount int64) accounts.Command {
	return accounts.Command{AccountID: id, Kind: accounts.Deposit, Amount: amount, Reference: ref}
}

func withdraw(ref string, amount int64) accounts.Command {
	return accounts.Command{AccountID: id, Kind: accounts.Withdraw, Amount: amount, Reference: ref}
}

func reverse(ref, of string) accounts.Command {
	return accounts.Command{AccountID: id, Kind: accounts.Reverse, Reference: ref, Reverses: of}
}

func closing() accounts.Command { return accounts.Command{AccountID: id, Kind: accounts.Close} }

// TestEachRuleRejects: one example of each rule, with its exact reason; a
// rejection leaves the state as it was and writes nothing.
func TestEachRuleRejects(t *testing.T) {
	const max = accounts.MaxAmount
	rich := []accounts.Command{open("EUR", 0)}
	for i := range 9 {
		rich = append(rich, deposit("d-"+string(rune('a'+i)), max))
	}
	for _, tc := range []struct {
		name string
		cmds []accounts.Command
		want string
	}{
		{"open twice", []accounts.Command{open("EUR", 0), open("USD", 0)},
			"the account was opened already (status open)"},
		{"open after close", []accounts.Command{open("EUR", 0), closing(), open("EUR", 0)},
			"the account was opened already (status closed)"},
		{"open: currency", []accounts.Command{open("eur", 0)}, `currency "eur" is not three capital letters`},
		{"open: limit", []accounts.Command{open("EUR", -1)},
			"limit -1 is not between 0 and 9007199254740991 minor units (2^53 − 1)"},
		{"deposit before open", []accounts.Command{deposit("d-1", 100)}, "the account is not open (status new)"},
		{"deposit: reference used", []accounts.Command{open("EUR", 0), deposit("d-1", 100), deposit("d-1", 5)},
			`reference "d-1" was used already`},
		{"withdraw: reference used by a deposit", []accounts.Command{open("EUR", 0), deposit("d-1", 100), withdraw("d-1", 5)},
			`reference "d-1" was used already`},
		{"withdraw: beyond the overdraft limit", []accounts.Command{open("EUR", 500), deposit("d-1", 1000), withdraw("w-1", 1501)},
			"insufficient funds: the balance is 1000 and the overdraft limit 500; a withdrawal of 1501 would leave -501"},
		{"deposit: amount 0", []accounts.Command{open("EUR", 0), deposit("d-1", 0)}, "amount 0 is not above 0 minor units"},
		{"withdraw: amount negative", []accounts.Command{open("EUR", 0), withdraw("w-1", -5)}, "amount -5 is not above 0 minor units"},
		{"deposit: amount beyond 10^15", []accounts.Command{open("EUR", 0), deposit("d-1", max+1)},
			"amount 1000000000000001 is beyond 1000000000000000 minor units (10^15)"},
		{"deposit: balance beyond 2^53 − 1", append(rich, deposit("d-z", max)),
			"the balance would be 10000000000000000, beyond ±9007199254740991 (2^53 − 1)"},
		{"deposit: reference not an id", []accounts.Command{open("EUR", 0), deposit("d/1", 5)},
			"reference may contain only letters, digits, '.', '_' and '-'"},
		{"reverse: unknown reference", []accounts.Command{open("EUR", 0), deposit("d-1", 100), reverse("v-1", "d-2")},
			`there is no deposit or withdrawal "d-2" to reverse`},
		{"reverse twice", []accounts.Command{open("EUR", 0), deposit("d-1", 100), reverse("v-1", "d-1"), reverse("v-2", "d-1")},
			`"d-1" was reversed already (by "v-1")`},
		{"reverse a reversal", []accounts.Command{open("EUR", 0), deposit("d-1", 100), reverse("v-1", "d-1"), reverse("v-2", "v-1")},
			`"v-1" is a reverse, not a deposit or withdrawal: it cannot be reversed`},
		{"reverse: its own reference used", []accounts.Command{open("EUR", 0), deposit("d-1", 100), deposit("d-2", 5), reverse("d-2", "d-1")},
			`reference "d-2" was used already`},
		{"reverse a deposit beyond the overdraft limit", []accounts.Command{open("EUR", 100), deposit("d-1", 1000), withdraw("w-1", 600), reverse("v-1", "d-1")},
			`insufficient funds: the balance is 400 and the overdraft limit 100; reversing deposit "d-1" of 1000 would leave -600`},
		{"close with money", []accounts.Command{open("EUR", 0), deposit("d-1", 1000), closing()},
			"the balance is 1000, not 0: only an empty account closes"},
		{"close overdrawn", []accounts.Command{open("EUR", 50), withdraw("w-1", 20), closing()},
			"the balance is -20, not 0: only an empty account closes"},
		{"deposit after close", []accounts.Command{open("EUR", 0), closing(), deposit("d-1", 5)}, "the account is not open (status closed)"},
		{"reverse after close", []accounts.Command{open("EUR", 0), deposit("d-1", 5), reverse("v-1", "d-1"), closing(), reverse("v-2", "d-1")},
			"the account is not open (status closed)"},
		{"close after close", []accounts.Command{open("EUR", 0), closing(), closing()}, "the account is not open (status closed)"},
		{"unknown kind", []accounts.Command{open("EUR", 0), {AccountID: id, Kind: "refund", Amount: 5, Reference: "x"}},
			`kind "refund" is not one of open, deposit, withdraw, reverse, close`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, after, w, err := run(t, tc.cmds...)
			reason, rejected := keyed.RejectionReason(err)
			if !rejected || reason != tc.want {
				t.Fatalf("got %v (a rejection: %v), want the rejection %q", err, rejected, tc.want)
			}
			if after != before || w != nil {
				t.Fatalf("a rejection changed the state to %+v (from %+v) or wrote %v", after, before, w)
			}
		})
	}
}

// TestEntriesAndReversals: what each applied command leaves and writes,
// exactly: a deposit adds, a withdrawal takes away (into the overdraft, to
// its limit), a reversal applies its entry's opposite and marks it, a close
// of an empty account closes it.
func TestEntriesAndReversals(t *testing.T) {
	open := open("EUR", 500)
	for _, tc := range []struct {
		name   string
		cmds   []accounts.Command
		state  accounts.State
		writes keyed.Writes
	}{
		{"open", []accounts.Command{open}, accounts.State{Status: accounts.StatusOpen, Currency: "EUR", Limit: 500}, nil},
		{"deposit", []accounts.Command{open, deposit("d-1", 1000)},
			accounts.State{Status: accounts.StatusOpen, Currency: "EUR", Limit: 500, Balance: 1000, Entries: 1},
			keyed.Writes{}.
				Append("e", 0, keyed.Props{{Name: "Reference", Value: "d-1"}, {Name: "Kind", Value: "deposit"}, {Name: "Amount", Value: int64(1000)}, {Name: "Balance", Value: int64(1000)}}).
				Insert("a", "d-1", keyed.Props{{Name: "Kind", Value: "deposit"}, {Name: "Amount", Value: int64(1000)}, {Name: "Position", Value: int64(0)}})},
		{"withdraw to the limit", []accounts.Command{open, deposit("d-1", 1000), withdraw("w-1", 1500)},
			accounts.State{Status: accounts.StatusOpen, Currency: "EUR", Limit: 500, Balance: -500, Entries: 2},
			keyed.Writes{}.
				Append("e", 1, keyed.Props{{Name: "Reference", Value: "w-1"}, {Name: "Kind", Value: "withdraw"}, {Name: "Amount", Value: int64(-1500)}, {Name: "Balance", Value: int64(-500)}}).
				Insert("a", "w-1", keyed.Props{{Name: "Kind", Value: "withdraw"}, {Name: "Amount", Value: int64(1500)}, {Name: "Position", Value: int64(1)}})},
		{"reverse a withdrawal", []accounts.Command{open, deposit("d-1", 1000), withdraw("w-1", 300), reverse("v-1", "w-1")},
			accounts.State{Status: accounts.StatusOpen, Currency: "EUR", Limit: 500, Balance: 1000, Entries: 3},
			keyed.Writes{}.
				Append("e", 2, keyed.Props{{Name: "Reference", Value: "v-1"}, {Name: "Kind", Value: "reverse"}, {Name: "Amount", Value: int64(300)}, {Name: "Balance", Value: int64(1000)}, {Name: "Reverses", Value: "w-1"}}).
				Insert("a", "v-1", keyed.Props{{Name: "Kind", Value: "reverse"}, {Name: "Amount", Value: int64(300)}, {Name: "Position", Value: int64(2)}, {Name: "Reverses", Value: "w-1"}}).
				Merge("a", "w-1", keyed.Props{{Name: "ReversedBy", Value: "v-1"}})},
		{"reverse a deposit into the overdraft", []accounts.Command{open, deposit("d-1", 1000), withdraw("w-1", 300), reverse("v-1", "d-1")},
			accounts.State{Status: accounts.StatusOpen, Currency: "EUR", Limit: 500, Balance: -300, Entries: 3},
			keyed.Writes{}.
				Append("e", 2, keyed.Props{{Name: "Reference", Value: "v-1"}, {Name: "Kind", Value: "reverse"}, {Name: "Amount", Value: int64(-1000)}, {Name: "Balance", Value: int64(-300)}, {Name: "Reverses", Value: "d-1"}}).
				Insert("a", "v-1", keyed.Props{{Name: "Kind", Value: "reverse"}, {Name: "Amount", Value: int64(1000)}, {Name: "Position", Value: int64(2)}, {Name: "Reverses", Value: "d-1"}}).
				Merge("a", "d-1", keyed.Props{{Name: "ReversedBy", Value: "v-1"}})},
		{"close empty", []accounts.Command{open, deposit("d-1", 1000), withdraw("w-1", 1000), closing()},
			accounts.State{Status: accounts.StatusClosed, Currency: "EUR", Limit: 500, Balance: 0, Entries: 2}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, got, w, err := run(t, tc.cmds...)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.state {
				t.Errorf("state %+v, want %+v", got, tc.state)
			}
			if !reflect.DeepEqual(w, tc.writes) {
				t.Errorf("writes %+v, want %+v", w, tc.writes)
			}
		})
	}
}

// TestNeeds: a deposit and a withdrawal guess their reference absent; a
// reversal reads the entry it reverses and guesses its own absent; nothing
// else, and nothing on an account that is not open, needs a row.
func TestNeeds(t *testing.T) {
	r := accounts.Rules{}
	openAcc := accounts.State{Status: accounts.StatusOpen, Currency: "EUR"}
	a := func(id string) []keyed.RowRef { return []keyed.RowRef{{Collection: "a", ID: id}} }
	for _, tc := range []struct {
		s    accounts.State
		c    accounts.Command
		want keyed.Needs
	}{
		{openAcc, deposit("d-1", 5), keyed.Needs{Absent: a("d-1")}},
		{openAcc, withdraw("w-1", 5), keyed.Needs{Absent: a("w-1")}},
		{openAcc, reverse("v-1", "d-1"), keyed.Needs{Read: a("d-1"), Absent: a("v-1")}},
		{openAcc, closing(), keyed.Needs{}},
		{openAcc, open("EUR", 0), keyed.Needs{}},
		{accounts.State{Status: accounts.StatusNew}, deposit("d-1", 5), keyed.Needs{}},
		{accounts.State{Status: accounts.StatusClosed}, reverse("v-1", "d-1"), keyed.Needs{}},
	} {
		if got := r.Needs(tc.s, tc.c); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Needs(%+v, %+v) = %+v, want %+v", tc.s, tc.c, got, tc.want)
		}
	}
}

// TestStateDecodes: no properties are a new account; a version or a state
// this release does not know is an error (the message fails), never a
// balance out of the bounds.
func TestStateDecodes(t *testing.T) {
	r := accounts.Rules{}
	if s, err := r.DecodeState(1, nil); err != nil || s != (accounts.State{Status: accounts.StatusNew}) {
		t.Fatalf("no properties: %+v, %v", s, err)
	}
	for _, p := range []keyed.Props{
		{{Name: "Status", Value: "frozen"}},
		{{Name: "Status", Value: "open"}, {Name: "Balance", Value: int64(accounts.MaxBalance + 1)}},
		{{Name: "Status", Value: "open"}, {Name: "Limit", Value: int64(-1)}},
	} {
		if s, err := r.DecodeState(1, p); err == nil {
			t.Errorf("DecodeState(%v) = %+v, want an error", p, s)
		}
	}
	if _, err := r.DecodeState(2, nil); err == nil || !strings.Contains(err.Error(), "version 2") {
		t.Errorf("version 2: %v", err)
	}
}

// TestBudgetIsWhatADecisionWrites: the largest decision (a reversal with
// references of the longest) fits the budget, the largest parked command
// fits its share, and neither budget is more than twice what they take.
func TestBudgetIsWhatADecisionWrites(t *testing.T) {
	b := accounts.Rules{}.Budget()
	long := func(c byte) string { return strings.Repeat(string(c), keyed.MaxIDLength) }
	_, _, w, err := run(t, open("EUR", accounts.MaxBalance), deposit(long('d'), accounts.MaxAmount), reverse(long('v'), long('d')))
	if err != nil {
		t.Fatal(err)
	}
	size := 0
	for _, x := range w {
		size += x.Props.WireSize()
	}
	if len(w) != b.Writes || size > b.Bytes || 2*size < b.Bytes {
		t.Errorf("the largest decision writes %d rows of %d bytes; the budget is %d rows of %d bytes", len(w), size, b.Writes, b.Bytes)
	}
	parked := 0
	for _, c := range []accounts.Command{open("EUR", accounts.MaxBalance), deposit(long('d'), accounts.MaxAmount),
		withdraw(long('w'), accounts.MaxAmount), reverse(long('v'), long('d')), closing()} {
		parked = max(parked, accounts.Rules{}.EncodeCommand(c).WireSize())
	}
	if parked > b.ParkedBytes || 2*parked < b.ParkedBytes {
		t.Errorf("the largest parked command takes %d bytes; the budget is %d", parked, b.ParkedBytes)
	}
}

// TestViewJSON: the account as the read routes answer it.
func TestViewJSON(t *testing.T) {
	at := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	s := accounts.State{Status: accounts.StatusOpen, Currency: "EUR", Limit: 500, Balance: 700, Entries: 2}
	head := keyed.Head{ID: id, Complete: true, AppliedSeq: 4, Parked: 1, MissingSeq: 5, BlockedSince: at, UpdatedAt: at,
		Failing: &keyed.Failure{Seq: 5, Why: "the rules panicked: boom", At: at}}
	page := keyed.Page{
		Rows: []keyed.Row{
			{ID: keyed.Position(0), Props: keyed.Props{{Name: "Reference", Value: "d-1"}, {Name: "Kind", Value: "deposit"}, {Name: "Amount", Value: int64(1000)}, {Name: "Balance", Value: int64(1000)}}},
			{ID: keyed.Position(1), Props: keyed.Props{{Name: "Reference", Value: "v-1"}, {Name: "Kind", Value: "reverse"}, {Name: "Amount", Value: int64(-300)}, {Name: "Balance", Value: int64(700)}, {Name: "Reverses", Value: "w-1"}}},
		},
		Rejected: []keyed.Rejected{
			{Seq: 3, Reason: `reference "d-1" was used already`, Tag: accounts.Rules{}.Tag(deposit("d-1", 5))},
			{Seq: 4, Reason: "skipped by an operator", Tag: accounts.Rules{}.Tag(accounts.Command{})},
		},
		Continuation: "next",
	}
	got, err := json.Marshal(accounts.Rules{}.View(head, s, page))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"accountId":"acc-1","status":"open","currency":"EUR","limit":500,"balance":700,"complete":true,"appliedSeq":4,"parked":1,` +
		`"missingSeq":5,"blockedSince":"2026-11-29T08:00:00Z",` +
		`"entries":[{"reference":"d-1","kind":"deposit","amount":1000,"balance":1000},` +
		`{"reference":"v-1","kind":"reverse","amount":-300,"balance":700,"reverses":"w-1"}],` +
		`"rejected":[{"seq":3,"kind":"deposit","reference":"d-1","reason":"reference \"d-1\" was used already"},` +
		`{"seq":4,"reason":"skipped by an operator"}],"updatedAt":"2026-11-29T08:00:00Z",` +
		`"failing":{"seq":5,"error":"the rules panicked: boom","at":"2026-11-29T08:00:00Z"},"continuation":"next"}`
	if string(got) != want {
		t.Errorf("view\n%s\nwant\n%s", got, want)
	}
	empty, _ := json.Marshal(accounts.Rules{}.View(keyed.Head{ID: "acc-2", UpdatedAt: at}, accounts.State{Status: accounts.StatusNew}, keyed.Page{}))
	if want := `{"accountId":"acc-2","status":"new","limit":0,"balance":0,"complete":false,"appliedSeq":0,"parked":0,"entries":[],"rejected":[],"updatedAt":"2026-11-29T08:00:00Z"}`; string(empty) != want {
		t.Errorf("a new account's view %s, want %s", empty, want)
	}
	if c, n := (accounts.Rules{}).History(s); c != "e" || n != 2 {
		t.Errorf("History = %q, %d", c, n)
	}
}
