package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/orders"
)

// Table Storage's limits, as its documentation states them ("Understanding
// the Table service data model", "Performing entity group transactions"),
// held against every store: what Azure refuses, a store refuses whole, as
// tablestore surfaces a 400 (fault.Internal: a bug of the writer's, never
// retried as transient), and writes nothing. These are the limits Azurite
// enforces too; the others (an entity's 1 MiB, 252 properties) no Store
// method can reach, and are tested with memstore alone (its limits_test.go).

// bigData is a data object whose JSON holds units UTF-16 code units: a
// string property of 2×units bytes as Table Storage counts it. wide uses
// U+1F600 (two units, four UTF-8 bytes) so that a store counting characters
// or UTF-8 bytes instead of UTF-16 judges it otherwise; narrow uses é (one
// unit, two UTF-8 bytes).
func bigData(units int, wide bool) json.RawMessage {
	const frame = len(`{"a":""}`)
	if !wide {
		return json.RawMessage(`{"a":"` + strings.Repeat("é", units-frame) + `"}`)
	}
	n := units - frame
	return json.RawMessage(`{"a":"` + strings.Repeat("😀", n/2) + strings.Repeat("x", n%2) + `"}`)
}

// maxUnits is a string property's limit: 64 KiB of UTF-16.
const maxUnits = 32 * 1024

// refusedWhole fails unless err is a fault.Internal and the order, its
// history and its transaction t-1 are as before.
func refusedWhole(t *testing.T, s convoy.Store, what string, err error, before *convoy.Key) {
	t.Helper()
	if fault.CodeOf(err) != fault.Internal {
		t.Fatalf("%s: got %v, want a refusal (fault.Internal)", what, err)
	}
	same(t, load(t, s, before.ID), before)
	sameHistory(t, s, before.ID, nil, nil)
	if _, found, err := s.Row(context.Background(), before.ID, xRef("t-1")); err != nil || found {
		t.Fatalf("%s: the refused commit left transaction t-1: %v, %v", what, found, err)
	}
}

// testPropertyLimit: each string property a caller fills (the order's
// data, a transaction's, a parked message's, a rejection's reason) holds
// 64 KiB as UTF-16: a commit with one of 32,768 units is kept, one with a
// unit more refused whole. The engine holds a decision's writes and a
// parked command to its domain's budget, far below these sizes: the data
// is set in the change the engine made (as the rejection's reason is), so
// that the store alone judges it.
func testPropertyLimit(t *testing.T, s convoy.Store, id string) {
	cases := []struct {
		name string
		fill func(o *convoy.Key, c *convoy.Change, d json.RawMessage)
		read func(t *testing.T, id string) string // the data as stored
	}{
		{"order data", func(o *convoy.Key, c *convoy.Change, d json.RawMessage) {
			receive(t, o, msg(2, orders.AddTransaction, "t-1", 5), epoch, c)
			st := orders.StateOf(o)
			st.Data = d
			o.State, o.StateProps = st, orders.Rules{}.EncodeState(st)
		}, func(t *testing.T, id string) string { return string(orders.StateOf(load(t, s, id)).Data) }},
		{"transaction data", func(o *convoy.Key, c *convoy.Change, d json.RawMessage) {
			receive(t, o, msg(2, orders.AddTransaction, "t-1", 5), epoch, c)
			for i, w := range c.Writes {
				if w.Ref.Collection == "t" {
					c.Writes[i].Props = w.Props.Set("Data", string(d))
				}
			}
		}, func(t *testing.T, id string) string {
			txs, _ := history(t, s, id, 10)
			return string(txs[0].Data)
		}},
		{"parked message data", func(o *convoy.Key, c *convoy.Change, d json.RawMessage) {
			receive(t, o, msg(3, orders.AddTransaction, "t-1", 5), epoch, c)
			withData(c, d)
		}, func(t *testing.T, id string) string {
			return string(orders.CommandOf(id, load(t, s, id).Parked[3]).Data)
		}},
		{"rejection reason", func(o *convoy.Key, c *convoy.Change, d json.RawMessage) {
			receive(t, o, msg(2, orders.ModifyTransaction, "t-404", 5), epoch, c)
			c.Rejections[0].Reason = string(d)
		}, func(t *testing.T, id string) string {
			_, rs := history(t, s, id, 10)
			return rs[0].Reason
		}},
	}
	for i, tc := range cases {
		for _, size := range []struct {
			units int
			wide  bool
		}{{maxUnits, false}, {maxUnits, true}, {maxUnits + 1, false}, {maxUnits + 1, true}} {
			oid := fmt.Sprintf("%s-%d-%d-%v", id, i, size.units, size.wide)
			what := fmt.Sprintf("%s of %d UTF-16 units (wide %v)", tc.name, size.units, size.wide)
			o := newOrder(t, oid)
			step(t, s, o, msg(1, orders.CreateOrder, "", 0))
			before := load(t, s, oid)
			next := before.Clone()
			var c convoy.Change
			d := bigData(size.units, size.wide)
			tc.fill(next, &c, d)
			err := s.Commit(context.Background(), next, next.Version, &c)
			if size.units > maxUnits {
				refusedWhole(t, s, what, err, before)
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v, want it kept", what, err)
			}
			if got := tc.read(t, oid); got != string(d) {
				t.Fatalf("%s: read back %d bytes, want the %d written", what, len(got), len(d))
			}
		}
	}
}

// testKeyLimits: an order id is a PartitionKey, and a txId part of a RowKey
// ("x:<txId>"): at most 1 KiB as UTF-16 (512 units), without '/', '\', '#',
// '?' or control characters (U+0000-U+001F, U+007F-U+009F). An order's keys
// are not escaped but refused: a commit that breaks a rule writes nothing.
func testKeyLimits(t *testing.T, s convoy.Store, id string) {
	ctx := context.Background()
	create := func(oid string) error {
		o := newOrder(t, oid)
		var c convoy.Change
		receive(t, o, of(oid, msg(1, orders.CreateOrder, "", 0)), epoch, &c)
		return s.Commit(ctx, o, 0, &c)
	}
	pad := func(prefix string, n int) string { return prefix + strings.Repeat("k", n-len(prefix)) }
	if err := create(pad(id+"-a", 512)); err != nil {
		t.Fatalf("an order id of 512 characters: %v, want it kept", err)
	}
	if got := load(t, s, pad(id+"-a", 512)); got.Version != 1 {
		t.Fatalf("an order id of 512 characters: loaded at version %d, want 1", got.Version)
	}
	if err := create(pad(id+"-b", 513)); fault.CodeOf(err) != fault.Internal {
		t.Fatalf("an order id of 513 characters: %v, want a refusal (fault.Internal)", err)
	}
	for i, c := range []string{"/", `\`, "#", "?", "\x00", "\x01", "\x1f", "\x7f", "\u0080", "\u009f"} {
		oid := fmt.Sprintf("%s-c%d%sx", id, i, c)
		if err := create(oid); fault.CodeOf(err) != fault.Internal {
			t.Fatalf("order id %q: %v, want a refusal (fault.Internal)", oid, err)
		}
	}
	// Allowed: whatever is not named (a space, '~', '|', a quote, U+00A0).
	for i, c := range []string{" ", "~", "|", "'", "\u00a0"} {
		oid := fmt.Sprintf("%s-ok%d%sx", id, i, c)
		if err := create(oid); err != nil {
			t.Fatalf("order id %q: %v, want it kept", oid, err)
		}
	}
	// A txId in the RowKey of its x row: 2 + 510 characters fit, 2 + 511 not.
	// The engine rejects a decision that writes a row id it knows no store
	// holds ("t/1"): the change is the one the engine makes of a txId that
	// fits, with tc.txID in its place, so that the store alone judges it.
	for _, tc := range []struct {
		txID string
		ok   bool
	}{{strings.Repeat("t", 510), true}, {strings.Repeat("t", 511), false}, {"t/1", false}} {
		oid := fmt.Sprintf("%s-tx%d-%v", id, len(tc.txID), tc.ok)
		o := newOrder(t, oid)
		step(t, s, o, msg(1, orders.CreateOrder, "", 0))
		before := load(t, s, oid)
		next := before.Clone()
		var c convoy.Change
		if out := receive(t, next, msg(2, orders.AddTransaction, "t-stand-in", 5), epoch, &c); out.Disposition != convoy.Applied {
			t.Fatalf("adding t-stand-in: %v", out)
		}
		for i, w := range c.Writes {
			if w.Ref.Collection == "x" {
				c.Writes[i].Ref.ID = tc.txID
			}
			if w.Props.Has("TxId") {
				c.Writes[i].Props = w.Props.Set("TxId", tc.txID)
			}
		}
		err := s.Commit(ctx, next, next.Version, &c)
		switch {
		case !tc.ok:
			if fault.CodeOf(err) != fault.Internal {
				t.Fatalf("txId %.20q… (%d characters): %v, want a refusal", tc.txID, len(tc.txID), err)
			}
			same(t, load(t, s, oid), before)
		case err != nil:
			t.Fatalf("txId of %d characters: %v, want it kept", len(tc.txID), err)
		}
	}
}

// testGroupLimits: a commit is one entity-group transaction: at most 100
// operations (the marker, the head and convoy.MaxChangeRecords records) and
// 4 MiB sent. 40 parked messages whose data is 32,000 × € (64,000 bytes as
// UTF-16, 96,000 in UTF-8) send about 3.85 MB: kept; 45 of them about 4.33
// MB, more than 4 MiB (4,194,304 bytes): refused whole. (The engine parks a
// command over its domain's budget without its properties: the data is set
// in the change it made, so that the store alone judges it.)
func testGroupLimits(t *testing.T, s convoy.Store, id string) {
	park := func(oid string, n int, data json.RawMessage) (*convoy.Key, *convoy.Key, convoy.Change) {
		o := newOrder(t, oid)
		step(t, s, o, msg(1, orders.CreateOrder, "", 0))
		before := load(t, s, oid)
		next := before.Clone()
		var c convoy.Change
		for seq := int64(3); seq < int64(3+n); seq++ {
			receive(t, next, msg(seq, orders.AddTransaction, fmt.Sprintf("t-%d", seq), 1), epoch, &c)
		}
		if data != nil {
			withData(&c, data)
		}
		return before, next, c
	}
	euros := json.RawMessage(`{"a":"` + strings.Repeat("€", 32_000) + `"}`)
	for _, tc := range []struct {
		n    int
		data json.RawMessage
		ok   bool
	}{{convoy.MaxChangeRecords, nil, true}, {convoy.MaxChangeRecords + 1, nil, false}, {40, euros, true}, {45, euros, false}} {
		oid := fmt.Sprintf("%s-%d-%d", id, tc.n, len(tc.data))
		before, next, c := park(oid, tc.n, tc.data)
		err := s.Commit(context.Background(), next, next.Version, &c)
		if !tc.ok {
			refusedWhole(t, s, fmt.Sprintf("%d parked messages of %d bytes of data", tc.n, len(tc.data)), err, before)
			continue
		}
		if err != nil {
			t.Fatalf("%d parked messages of %d bytes of data: %v, want them kept", tc.n, len(tc.data), err)
		}
		if got := load(t, s, oid); got.ParkedCount != tc.n {
			t.Fatalf("%d parked messages committed, %d loaded", tc.n, got.ParkedCount)
		}
	}
}

// testBlockedLimits: an entry of the blocked index is keyed by its order id
// (the RowKey is convoy.BlockedKey) and its note is a string property.
func testBlockedLimits(t *testing.T, s convoy.Store, id string) {
	idx, ok := s.(convoy.BlockedIndex)
	if !ok {
		t.Fatalf("%T does not implement convoy.BlockedIndex", s)
	}
	ctx := context.Background()
	since := epoch.Add(-time.Duration(time.Now().UnixNano()%1e6)*time.Hour - time.Minute) // its own range of keys
	// '#', not '/': in a key in a URL (MarkBlocked's upsert), Azurite
	// answers '/' with a 500, which tablestore takes for transient.
	if err := idx.MarkBlocked(ctx, id+"#x", since, 1); fault.CodeOf(err) != fault.Internal {
		t.Fatalf("an order id with '#': %v, want a refusal (fault.Internal)", err)
	}
	if err := idx.MarkBlocked(ctx, id, since, 1); err != nil {
		t.Fatal(err)
	}
	entries, _, err := idx.ScanBlocked(ctx, convoy.BlockedKey(id[:len(id)-1], since), 10)
	if err != nil || len(entries) == 0 || entries[0].OrderID != id {
		t.Fatalf("scanned %+v, %v; want %s's entry alone", entries, err, id)
	}
	e := entries[0]
	fits, over := strings.Repeat("n", maxUnits), strings.Repeat("n", maxUnits+1)
	if _, err := idx.UpdateBlocked(ctx, id, since, convoy.BlockedUpdate{Note: &over}, e.ETag); fault.CodeOf(err) != fault.Internal {
		t.Fatalf("a note of %d characters: %v, want a refusal (fault.Internal)", len(over), err)
	}
	if err := idx.SetNotes(ctx, []convoy.BlockedNote{{Entry: e, Note: over}}); fault.CodeOf(err) != fault.Internal {
		t.Fatalf("SetNotes, a note of %d characters: %v, want a refusal (fault.Internal)", len(over), err)
	}
	if _, err := idx.UpdateBlocked(ctx, id, since, convoy.BlockedUpdate{Note: &fits}, e.ETag); err != nil {
		t.Fatalf("a note of %d characters: %v, want it kept", len(fits), err)
	}
	entries, _, err = idx.ScanBlocked(ctx, convoy.BlockedKey(id[:len(id)-1], since), 10)
	if err != nil || len(entries) == 0 || entries[0].Note != fits {
		t.Fatalf("after the notes: %d entries, %v; want the note of %d characters", len(entries), err, len(fits))
	}
	if err := idx.ClearBlocked(ctx, id, since, "*", 0); err != nil {
		t.Fatal(err)
	}
}

// withData sets the data of every message c parks, as its parked row keeps
// it (the property Data of orders.Rules.EncodeCommand), and of its command
// if it holds one besides.
func withData(c *convoy.Change, d json.RawMessage) {
	for seq, m := range c.Park {
		if _, ok := m.Command.(orders.Transaction); ok {
			m = command(m, func(tx *orders.Transaction) { tx.Data = d })
		}
		m.Stored, m.Oversize = m.Stored.Set("Data", string(d)), ""
		c.Park[seq] = m
	}
}
