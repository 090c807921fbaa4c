package ledger

import "github.com/convoy-dev/convoy/handler/orders"

// Ledgers of orders were taken before ledgers carried other domains: what
// was recorded of them (their hash, which tells a ledger published again
// from other content) and what their problems said stay as they were. These
// are the only places the package knows the order domain's command,
// with share: ledgers of orders are the largest (a million entries).

// orderEntry is an order's transaction with its mark, as Entry was before
// entries were domain-neutral: the JSON a ledger of orders is hashed from.
type orderEntry struct {
	orders.Transaction
	Last bool
}

// asOrderEntry returns e as an orderEntry if its command is an order's.
func asOrderEntry(e Entry) (orderEntry, bool) {
	t, ok := e.Command.(orders.Transaction)
	return orderEntry{t, e.Last}, ok
}

// sizeField is the field a problem names of an entry whose message is too
// large: an order's data, which is what makes it large; none of any other.
func sizeField(e Entry) string {
	if o, ok := asOrderEntry(e); ok && len(o.Data) > 0 {
		return "data"
	}
	return ""
}

// share returns key and the command c of an entry with one copy of each
// string that entries repeat (ids.get): an order's id (its key) and op,
// which a large ledger of orders repeats many times. Any other command is
// kept as read.
func (ids interner) share(key string, c any) (string, any) {
	key = ids.get(key)
	if t, ok := c.(orders.Transaction); ok {
		t.OrderID, t.Op = key, orders.Op(ids.get(string(t.Op)))
		return key, t
	}
	return key, c
}
