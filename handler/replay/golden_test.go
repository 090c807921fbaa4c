package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/golden"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/replay"
)

// appliedUpTo is an OrderReader whose orders applied every seq up to n.
type appliedUpTo int64

func (n appliedUpTo) Load(_ context.Context, id string) (*convoy.Key, error) {
	o := convoy.NewKey(id)
	o.AppliedSeq, o.Version = int64(n), 1
	return o, nil
}

// TestGoldenReplayedMessages (issue 43's compatibility goldens, written on
// the code before the engine was taken apart from the order fold): a dead
// letter written by the release before is re-sent byte for byte. The dead
// letters here carry their application properties as azservicebus
// delivers them (seq an int64, last a bool, the trace context), bodies as
// an earlier publisher or a foreign sender spelt them (spaces, key order,
// escapes: never re-encoded), one a replay of a replay. The re-sent
// messages (session id, message id, typed properties, body) and the
// report (ReplayOrder's answer) are pinned in
// testdata/golden/replayed.json; each re-sent body must be its dead
// letter's bytes exactly.
func TestGoldenReplayedMessages(t *testing.T) {
	ctx := context.Background()
	tp := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	dls := []replay.DeadLetter{
		{SequenceNumber: 101, MessageID: "L-old:0", SessionID: "o-1", Reason: "MaxDeliveryCountExceeded",
			Properties: map[string]any{"ledgerId": "L-old", "seq": int64(1)},
			Body:       []byte(`{"transaction":{"orderId":"o-1","op":"CreateOrder","currency":"EUR"}}`)},
		{SequenceNumber: 102, MessageID: "L-old:1", SessionID: "o-1", Reason: "MaxDeliveryCountExceeded",
			Properties: map[string]any{"ledgerId": "L-old", "seq": int64(2), "traceparent": tp, "Diagnostic-Id": tp},
			Body:       []byte(`{ "transaction" : {"op":"AddTransaction", "orderId":"o-1","txId":"t-1","amount":1250, "data":{"b":1.50,"a":"<\u00e9>"}} }`)},
		{SequenceNumber: 103, MessageID: "L-old:2#replay-77", SessionID: "o-1", Reason: "handler failed: order \"o-1\": storage unavailable",
			Properties: map[string]any{"ledgerId": "L-old", "seq": int64(3), "last": true},
			Body:       []byte("{\"transaction\":{\"orderId\":\"o-1\",\"op\":\"DeleteOrder\",\"data\":{\"why\":\"\u2028\"}}}\n")},
		{SequenceNumber: 104, MessageID: "foreign-1", SessionID: "o-1", Reason: "MaxDeliveryCountExceeded",
			Properties: map[string]any{"seq": int64(4)},
			Body:       []byte(`not even JSON`)},
	}
	// The order applied seq 1: its dead letter is a duplicate, completed.
	q := newDLQ(dls...)
	sender := &ledgertest.Sender{}
	rep, err := replay.Order(ctx, q, sender, "o-1", replay.Options{Orders: appliedUpTo(1)})
	if err != nil {
		t.Fatal(err)
	}
	type message struct {
		SessionID  string            `json:"sessionId"`
		MessageID  string            `json:"messageId"`
		Properties map[string]string `json:"properties"` // "<Go type> <value>"
		Body       string            `json:"body"`
	}
	var sent []message
	for _, m := range sender.Messages() {
		var from *replay.DeadLetter
		for i := range dls {
			if want, _ := convoy.IntProperty(dls[i].Properties["seq"]); want == m.Seq {
				from = &dls[i]
			}
		}
		if from == nil || !bytes.Equal(m.Body, from.Body) {
			t.Fatalf("re-sent seq %d with body %q: not its dead letter's bytes", m.Seq, m.Body)
		}
		props := map[string]string{}
		for k, v := range m.Properties() {
			props[k] = fmt.Sprintf("%T %v", v, v)
		}
		sent = append(sent, message{SessionID: m.SessionID, MessageID: m.MessageID, Properties: props, Body: string(m.Body)})
	}
	golden.Check(t, "replayed.json", golden.Marshal(t, struct {
		Sent   []message     `json:"sent"`
		Report replay.Report `json:"report"`
	}{sent, rep}))
}

// TestGoldenReplayAllTokens (issue 43): the continuation tokens
// ReplayDeadLetters hands out (replay.All's), pinned as strings in
// testdata/golden/replay-all-tokens.json with what each decodes to; a token
// handed out today must decode the same after the change.
func TestGoldenReplayAllTokens(t *testing.T) {
	ctx := context.Background()
	var dls []replay.DeadLetter
	for i := int64(1); i <= 5; i++ {
		dls = append(dls, dead(i, fmt.Sprintf("o-%d", i), int64(1)))
	}
	q := newDLQ(dls...)
	sender := &ledgertest.Sender{}
	type call struct {
		Continuation string          `json:"continuation"`
		Decoded      replay.Token    `json:"decoded"`
		Progress     replay.Progress `json:"progress"`
	}
	var calls []call
	token := ""
	for range 3 {
		p, err := replay.All(ctx, q, sender, replay.AllOptions{Max: 2, Continuation: token, NoClosingPeek: true})
		if err != nil {
			t.Fatal(err)
		}
		decoded, err := replay.ParseContinuation(p.Continuation)
		if err != nil {
			t.Fatalf("%q: %v", p.Continuation, err)
		}
		calls = append(calls, call{Continuation: p.Continuation, Decoded: decoded, Progress: p})
		token = p.Continuation
	}
	golden.Check(t, "replay-all-tokens.json", golden.Marshal(t, calls))
	if golden.Updating() {
		return
	}
	var pinned []call
	if err := json.Unmarshal(golden.Read(t, "replay-all-tokens.json"), &pinned); err != nil {
		t.Fatal(err)
	}
	for _, c := range pinned {
		got, err := replay.ParseContinuation(c.Continuation)
		if err != nil || got != c.Decoded {
			t.Errorf("token %q decodes to %+v, %v; it was handed out for %+v", c.Continuation, got, err, c.Decoded)
		}
	}
}
