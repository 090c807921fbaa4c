package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/convoy"
	goldenfile "github.com/convoy-dev/convoy/handler/internal/golden"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/replay"
)

// TestGoldenHTTPAnswers (issue 43's compatibility goldens, written on the
// code before the engine was taken apart from the order fold): the answers
// of the read and operator routes, as forwarded requests, for a fixed store
// state (memstore, a processor on a fixed clock), in
// testdata/golden/http-answers.json: status, Content-Type and Retry-After,
// and the body. The body is kept indented for reading; the test checks
// that the route wrote it compact, so that only insignificant whitespace
// is re-spelt. Covered: an order's status with a page of its history and
// its continuation, and the page that token names; the blocked orders, a
// page at a time with their continuation; a skip that drains; an
// operator's replay, complete and incomplete; the errors a client sees for
// a missing order, a foreign token and a wrong skip. The lag in an order's
// answer is the one without a ledgers table (its figures depend on the
// wall clock, which the route reads).
func TestGoldenHTTPAnswers(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	var mu sync.Mutex
	base := time.Date(2026, 11, 21, 9, 30, 0, 0, time.UTC)
	now := base
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	tick := func() { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Minute) }
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: orders.Domain, Now: clock, Index: store})
	srv := handler.New(handler.OrdersDeps(handler.Deps{MaxRequestBytes: 1 << 16}, handler.Domain{
		Processor: p, Keys: store, Blocked: store,
		Replay: replayFunc(func(_ context.Context, id string) (replay.Report, error) {
			rep := replay.Report{OrderID: id, Replayed: []replay.Replayed{{Seq: 2, MessageID: "L-1:1", NewMessageID: "L-1:1#replay-9", Reason: "MaxDeliveryCountExceeded"}}, Scanned: 3,
				Duplicates: []replay.Duplicate{{Seq: 1, MessageID: "L-1:0"}}}
			if id == "o-busy" {
				rep.Incomplete = &replay.Incomplete{NotReceived: 2, ScanLimit: 5000, Reason: "2 dead letter(s) of the order are locked by another reader"}
			}
			return rep, nil
		}),
	}))
	amount := func(n int64) *int64 { return &n }
	process := func(order string, seq int64, tx orders.Transaction) {
		t.Helper()
		tx.OrderID = order
		m := convoy.Message{Seq: seq, MessageID: fmt.Sprintf("L-1:%d", seq), Command: tx, EnqueuedAt: clock().Add(-time.Second)}
		if _, err := p.Process(ctx, order, []convoy.Message{m}); err != nil {
			t.Fatal(err)
		}
		tick()
	}
	process("o-1", 1, orders.Transaction{Op: orders.CreateOrder, Currency: "EUR", Data: json.RawMessage(`{"customer":"c-1","note":"<a & b>"}`)})
	process("o-1", 2, orders.Transaction{Op: orders.AddTransaction, TxID: "t-1", Amount: amount(1250), Data: json.RawMessage(`{"sku":"s-1"}`)})
	process("o-1", 3, orders.Transaction{Op: orders.AddTransaction, TxID: "t-2", Amount: amount(300)})
	process("o-1", 4, orders.Transaction{Op: orders.AddTransaction, TxID: "t-3", Amount: amount(-50)})
	process("o-1", 5, orders.Transaction{Op: orders.ModifyTransaction, TxID: "t-1", Amount: amount(1200)})
	process("o-1", 6, orders.Transaction{Op: orders.AddTransaction, TxID: "t-1", Amount: amount(1)})
	process("o-1", 7, orders.Transaction{Op: orders.ModifyTransaction, TxID: "t-9", Amount: amount(1)})
	process("o-1", 8, orders.Transaction{Op: orders.ModifyTransaction, TxID: "t-8", Amount: amount(1)})
	process("o-2", 2, orders.Transaction{Op: orders.DeleteOrder})                                    // parked behind 1: blocked
	process("o-3", 3, orders.Transaction{Op: orders.AddTransaction, TxID: "t-1", Amount: amount(5)}) // parked: blocked
	process("o-3", 1, orders.Transaction{Op: orders.CreateOrder, Currency: "USD"})

	type answer struct {
		Request string            `json:"request"`
		Status  int               `json:"status"`
		Headers map[string]string `json:"headers"`
		Body    json.RawMessage   `json:"body"`
	}
	var answers []answer
	do := func(method, path string) map[string]any {
		t.Helper()
		req := httptest.NewRequest(method, path, nil)
		req.Header.Set("X-Azure-Functions-InvocationId", "0f8fad5b-d9cb-469f-a165-70867728950e")
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		raw := bytes.TrimSuffix(rec.Body.Bytes(), []byte("\n"))
		var compact bytes.Buffer
		if err := json.Compact(&compact, raw); err != nil || !bytes.Equal(compact.Bytes(), raw) {
			t.Fatalf("%s %s: the body is not compact JSON (%v): %s", method, path, err, raw)
		}
		h := map[string]string{"Content-Type": rec.Header().Get("Content-Type")}
		if v := rec.Header().Get("Retry-After"); v != "" {
			h["Retry-After"] = v
		}
		answers = append(answers, answer{Request: method + " " + path, Status: rec.Code, Headers: h, Body: raw})
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		return out
	}
	first := do("GET", "/api/orders/o-1?pageSize=2")
	token, _ := first["continuation"].(string)
	if token == "" {
		t.Fatalf("no continuation: %v", first)
	}
	do("GET", "/api/orders/o-1?pageSize=2&continuation="+token)
	do("GET", "/api/orders/o-3")
	blocked := do("GET", "/api/orders?blocked=true&pageSize=1")
	token, _ = blocked["continuation"].(string)
	if token == "" {
		t.Fatalf("no continuation: %v", blocked)
	}
	do("GET", "/api/orders?blocked=true&pageSize=1&continuation="+token)
	do("POST", "/api/orders/o-2/skip?seq=1")
	do("POST", "/api/orders/o-1/replay")
	do("POST", "/api/orders/o-busy/replay")
	do("GET", "/api/orders/o-404")
	do("GET", "/api/orders/o-1?continuation=bm90LWEtdG9rZW4")
	do("POST", "/api/orders/o-1/skip?seq=3")

	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(answers); err != nil {
		t.Fatal(err)
	}
	goldenfile.Check(t, "http-answers.json", b.Bytes())
}
