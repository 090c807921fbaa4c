package heal_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/convoy-dev/convoy/handler/accounts"
	"github.com/convoy-dev/convoy/handler/heal"
	"github.com/convoy-dev/convoy/handler/operator"
	"github.com/convoy-dev/convoy/handler/orders"
)

// TestHealsTheDomainItIsGiven: a healer reads its dead letters as its
// domain's processor reads them. An account's deposit, dead-lettered by its
// delivery count, is of a transient cause to the account domain's healer,
// which replays it (no dead letter is left); to the order domain's (the
// default) the same body is unreadable, a permanent cause: never replayed,
// counted permanent.
func TestHealsTheDomainItIsGiven(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		opts      heal.Options
		replayed  string
		permanent int
	}{
		{"the account domain's healer", heal.Options{Domain: accounts.Domain}, "[acc-1:2]", 0},
		{"the order domain's healer", heal.Options{Domain: orders.Domain}, "[]", 1},
	} {
		f := newFixture()
		f.q.add("acc-1", 2, operator.ReasonMaxDelivery, `{"command":{"accountId":"acc-1","kind":"deposit","amount":120000,"reference":"dep-1"}}`)
		r := f.healer(c.opts).RunOnce(ctx)
		if got := fmt.Sprint(f.sent()); got != c.replayed || r.Summary == nil || r.Summary.DeadLetters == nil ||
			r.Summary.DeadLetters.Transient != 0 || r.Summary.DeadLetters.Permanent != c.permanent {
			t.Errorf("%s: re-sent %s, dead letters %+v; want %s re-sent, %d permanent left", c.name, got, r.Summary.DeadLetters, c.replayed, c.permanent)
		}
	}
}
