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

// asOrderEntry returns an entry's command c and its mark last as an
// orderEntry if c is an order's.
func asOrderEntry(c any, last bool) (orderEntry, bool) {
	t, ok := c.(orders.Transaction)
	return orderEntry{t, last}, ok
}

// sizeField is the field a problem names of an entry whose message is too
// large: an order's data, which is what makes it large; none of any other.
func sizeField(c any) string {
	if t, ok := c.(orders.Transaction); ok && len(t.Data) > 0 {
		return "data"
	}
	return ""
}

// share returns the command c of an entry of key (the ledger's copy) with
// one copy of each string that entries repeat: an order's id (its key) and
// op, which a large ledger of orders repeats many times. Any other command
// is kept as read.
func (ids *interner) share(key string, c any) any {
	if t, ok := c.(orders.Transaction); ok {
		t.OrderID, t.Op = key, orders.Op(ids.get(string(t.Op)))
		return t
	}
	return c
}
