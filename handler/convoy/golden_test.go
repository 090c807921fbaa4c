package convoy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/golden"
	"github.com/convoy-dev/convoy/handler/orders"
)

// goldenMessage is an order message as the publisher and replay hand it to
// a transport (servicebus.ToMessage copies these fields as they are): the
// body as a string (its exact bytes), each application property with its
// Go type.
type goldenMessage struct {
	SessionID   string                 `json:"sessionId"`
	MessageID   string                 `json:"messageId"`
	ContentType string                 `json:"contentType"`
	Properties  map[string]goldenTyped `json:"properties"`
	Body        string                 `json:"body"`
	Size        int                    `json:"size"`
}

type goldenTyped struct {
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// TestGoldenMessages (issue 43's compatibility goldens, written on the code
// before the engine was taken apart from the order fold): the order
// messages orders.NewOrderMessage builds for each op, with and without
// data (data with characters json.Marshal would escape), with the last
// flag and with a trace context, as testdata/golden/messages.json: session
// id, message id, content type, application properties (name, Go type,
// value), body byte for byte, size on the queue. Each body decodes back
// (DecodeBody) to its transaction.
func TestGoldenMessages(t *testing.T) {
	amount := func(n int64) *int64 { return &n }
	cases := []struct {
		index  int
		seq    int64
		last   bool
		traced bool
		tx     orders.Transaction
	}{
		{0, 1, false, false, orders.Transaction{OrderID: "o-1", Op: orders.CreateOrder, Currency: "EUR"}},
		{1, 2, false, false, orders.Transaction{OrderID: "o-1", Op: orders.CreateOrder, Currency: "EUR", Data: json.RawMessage(`{"customer":"c-1","note":"<a & b> \u2028 é ` + "\u2028" + `"}`)}},
		{2, 3, false, false, orders.Transaction{OrderID: "o-1", Op: orders.AddTransaction, TxID: "t-1", Amount: amount(1250)}},
		{3, 4, false, true, orders.Transaction{OrderID: "o-1", Op: orders.AddTransaction, TxID: "t-2", Amount: amount(-7), Data: json.RawMessage(`{"sku":"s-1","q":"\"x\""}`)}},
		{4, 5, false, false, orders.Transaction{OrderID: "o-1", Op: orders.ModifyTransaction, TxID: "t-1", Amount: amount(0)}},
		{5, 6, false, false, orders.Transaction{OrderID: "o-1", Op: orders.ModifyTransaction, TxID: "t-1", Amount: amount(1200), Data: json.RawMessage(`{"sku":"s-2"}`)}},
		{6, 7, true, false, orders.Transaction{OrderID: "o-1", Op: orders.DeleteOrder}},
		{7, 200, true, true, orders.Transaction{OrderID: "o-1", Op: orders.DeleteOrder, Data: json.RawMessage(`{"why":"closed"}`)}},
	}
	var out []goldenMessage
	for _, c := range cases {
		m, err := orders.NewOrderMessage("L-golden-1", c.index, c.seq, c.last, c.tx)
		if err != nil {
			t.Fatal(err)
		}
		if c.traced {
			m.TraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
			m.DiagnosticID = m.TraceParent
		}
		body, err := orders.EncodeBody(c.tx)
		if err != nil || !bytes.Equal(body, m.Body) {
			t.Fatalf("EncodeBody %s, %v; the message's body %s", body, err, m.Body)
		}
		decoded, err := orders.DecodeBody(m.Body)
		if err != nil || !reflect.DeepEqual(decoded, c.tx) {
			t.Fatalf("DecodeBody(%s) = %+v, %v; want %+v", m.Body, decoded, err, c.tx)
		}
		g := goldenMessage{SessionID: m.SessionID, MessageID: m.MessageID, ContentType: convoy.ContentType,
			Properties: map[string]goldenTyped{}, Body: string(m.Body), Size: m.Size()}
		for k, v := range m.Properties() {
			g.Properties[k] = goldenTyped{Type: fmt.Sprintf("%T", v), Value: v}
		}
		out = append(out, g)
	}
	golden.Check(t, "messages.json", golden.Marshal(t, out))
}

// TestGoldenHistoryTokens (issue 43): the continuation tokens of an order's
// history (OrderStatus's ?continuation=) handed out today. Each cursor's
// token is pinned as a string, and each pinned token still decodes to the
// position it was handed out for, so that a token a client holds across an
// upgrade reads the page it names.
func TestGoldenHistoryTokens(t *testing.T) {
	type token struct {
		Tx       int64  `json:"tx"`
		Rejected int64  `json:"rejected"`
		Token    string `json:"token"`
	}
	cursors := []convoy.HistoryCursor{{Rows: 0, Rejected: 0}, {Rows: 1000, Rejected: -1}, {Rows: -1, Rejected: 17}, {Rows: 3, Rejected: 1001}, {Rows: 1<<62 + 5, Rejected: 1<<63 - 1}}
	var got []token
	for _, c := range cursors {
		got = append(got, token{Tx: c.Rows, Rejected: c.Rejected, Token: c.Token()})
	}
	golden.Check(t, "history-tokens.json", golden.Marshal(t, got))
	if golden.Updating() {
		return
	}
	// Tokens handed out by the release the goldens were made on decode to
	// their positions (read from the file, not recomputed).
	var pinned []token
	if err := json.Unmarshal(golden.Read(t, "history-tokens.json"), &pinned); err != nil {
		t.Fatal(err)
	}
	for _, p := range pinned {
		c, err := convoy.ParseHistoryCursor(p.Token)
		if err != nil || c.Rows != p.Tx || c.Rejected != p.Rejected {
			t.Errorf("token %s decodes to %+v, %v; it was handed out for tx %d, rejected %d", p.Token, c, err, p.Tx, p.Rejected)
		}
	}
}
