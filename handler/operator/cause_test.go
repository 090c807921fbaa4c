package operator_test

import (
	"testing"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/operator"
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
		got := operator.Classify(replay.DeadLetter{SessionID: c.session, Reason: c.reason, Body: []byte(c.body), Properties: props}, c.applied)
		if got.Class != c.want || got.Why == "" {
			t.Errorf("%s: %+v, want %s", c.name, got, c.want)
		}
	}
}
