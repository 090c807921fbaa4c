package operator_test

import (
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/handler/accounts"
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/operator"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/replay"
)

// TestClassify: a dead letter the processor could read, dead-lettered by
// Service Bus's delivery count or expiry, is of a transient cause; any
// other is permanent, and says why.
func TestClassify(t *testing.T) {
	good := `{"transaction":{"orderId":"o-1","op":"DeleteOrder"}}`
	for _, c := range []struct {
		name, session, reason, body string
		seq                         any
		applied                     int64
		want                        string
	}{
		{"deliveries ran out", "o-1", operator.ReasonMaxDelivery, good, int64(3), -1, operator.Transient},
		{"expired", "o-1", operator.ReasonExpired, good, int64(3), 2, operator.Transient},
		{"no seq", "o-1", operator.ReasonMaxDelivery, good, nil, -1, operator.Permanent},
		{"seq 0", "o-1", operator.ReasonMaxDelivery, good, int64(0), -1, operator.Permanent},
		{"bad body", "o-1", operator.ReasonMaxDelivery, `{"transaction":{"orderId":"o-1","op":"AddTransaction","txId":"t","amount":"a lot"}}`, int64(3), -1, operator.Permanent},
		{"body of another order", "o-1", operator.ReasonMaxDelivery, `{"transaction":{"orderId":"o-2","op":"DeleteOrder"}}`, int64(3), -1, operator.Permanent},
		{"no session", "", operator.ReasonMaxDelivery, good, int64(3), -1, operator.Permanent},
		{"too far ahead", "o-1", operator.ReasonMaxDelivery, good, int64(convoy.MaxParkAhead + 3), 2, operator.Permanent},
		{"another tool's reason", "o-1", "OperatorMoved", good, int64(3), -1, operator.Permanent},
	} {
		props := map[string]any{}
		if c.seq != nil {
			props["seq"] = c.seq
		}
		got := operator.Classify(orders.Domain, replay.DeadLetter{SessionID: c.session, Reason: c.reason, Body: []byte(c.body), Properties: props}, c.applied)
		if got.Class != c.want || got.Why == "" {
			t.Errorf("%s: %+v, want %s", c.name, got, c.want)
		}
	}
}

// TestClassifyReadsTheBodyAsItsDomain: a dead letter's body is read as its
// domain's processor reads it. An account's command, deadlettered by its
// delivery count, is transient as an account's, and permanent as an
// order's (an order's processor could not read it); an account body of
// another account, or one an account's processor refuses (an amount as a
// string), is permanent and says so in the account's words.
func TestClassifyReadsTheBodyAsItsDomain(t *testing.T) {
	letter := func(session, body string) replay.DeadLetter {
		return replay.DeadLetter{SessionID: session, Reason: operator.ReasonMaxDelivery, Body: []byte(body), Properties: map[string]any{"seq": int64(2)}}
	}
	deposit := `{"command":{"accountId":"acc-1","kind":"deposit","amount":120000,"reference":"dep-1"}}`
	for _, c := range []struct {
		name   string
		domain keyed.Domain
		dl     replay.DeadLetter
		want   string
		says   string
	}{
		{"an account's deposit, as an account's", accounts.Domain, letter("acc-1", deposit), operator.Transient, "deliveries ran out"},
		{"an account's deposit, as an order's", orders.Domain, letter("acc-1", deposit), operator.Permanent, "unreadable: "},
		{"another account's deposit", accounts.Domain, letter("acc-2", deposit), operator.Permanent, "SessionId"},
		{"an amount as a string", accounts.Domain, letter("acc-1", strings.Replace(deposit, "120000", `"120000"`, 1)), operator.Permanent, "amount"},
		{"no session", accounts.Domain, letter("", deposit), operator.Permanent, "no SessionId (account id)"},
	} {
		got := operator.Classify(c.domain, c.dl, -1)
		if got.Class != c.want || !strings.Contains(got.Why, c.says) {
			t.Errorf("%s: %+v, want %s saying %q", c.name, got, c.want, c.says)
		}
	}
	// Too far ahead, as the account's appliedSeq tells.
	far := letter("acc-1", deposit)
	far.Properties["seq"] = int64(convoy.MaxParkAhead + 5)
	if got := operator.Classify(accounts.Domain, far, 3); got.Class != operator.Permanent || !strings.Contains(got.Why, "past the account's appliedSeq 3") {
		t.Errorf("a seq too far ahead: %+v", got)
	}
	c := operator.Classify(accounts.Domain, far, -1)
	if got := operator.WithAppliedSeq(accounts.Domain, c, operator.Addressed(far), convoy.MaxParkAhead+5, 3); got.Class != operator.Permanent ||
		!strings.Contains(got.Why, "past the account's appliedSeq 3") {
		t.Errorf("a seq too far ahead, from the cause without appliedSeq: %+v", got)
	}
}
