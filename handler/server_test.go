package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/internal/convoytest"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/orders"
	"github.com/convoy-dev/convoy/handler/replay"
)

func golden(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

type fixture struct {
	srv      http.Handler
	store    *memstore.Store
	ledgers  *memstore.Ledgers
	sender   *ledgertest.Sender
	replayed []string
}

// replayFunc adapts a function to operator.Replayer.
type replayFunc func(ctx context.Context, orderID string) (replay.Report, error)

func (f replayFunc) Replay(ctx context.Context, orderID string) (replay.Report, error) {
	return f(ctx, orderID)
}

func (f replayFunc) ReplayAll(context.Context, int, string) (replay.Progress, error) {
	return replay.Progress{Done: true}, nil
}

// viewOf is o's head as OrderStatus shows it, without its history.
func viewOf(o *convoy.Key) orders.View {
	if _, err := o.Bind(orders.Domain); err != nil {
		panic(err)
	}
	return orders.ViewOf(convoy.View{Order: o})
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{store: memstore.New(), ledgers: memstore.NewLedgers(), sender: &ledgertest.Sender{}}
	f.srv = handler.New(handler.OrdersDeps(handler.Deps{
		Ledgers:         ledgertest.Publisher(f.ledgers, f.sender, ledger.PublisherOptions{Retry: fault.RetryPolicy{MaxAttempts: 1}}),
		MaxRequestBytes: 1 << 16,
	}, handler.Domain{
		Processor: convoy.NewProcessor(f.store, convoy.ProcessorOptions{Domain: orders.Domain, Index: f.store}),
		Blocked:   f.store,
		Replay: replayFunc(func(_ context.Context, id string) (replay.Report, error) {
			f.replayed = append(f.replayed, id)
			return replay.Report{OrderID: id, Replayed: []replay.Replayed{{Seq: 2, MessageID: "L:1", NewMessageID: "L:1#replay-9"}}}, nil
		}),
		Keys: f.store,
	}))
	return f
}

// do sends a request and checks what the host requires of every response:
// Content-Type application/json and a JSON body.
func (f *fixture) do(t *testing.T, method, path string, body []byte) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("X-Azure-Functions-InvocationId", "0f8fad5b-d9cb-469f-a165-70867728950e")
	rec := httptest.NewRecorder()
	f.srv.ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("%s %s: Content-Type %q, want application/json", method, path, ct)
	}
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s %s: body %q is not a JSON object: %v", method, path, rec.Body.String(), err)
	}
	return rec.Code, out
}

func TestReadiness(t *testing.T) {
	if code, _ := newFixture(t).do(t, "GET", "/", nil); code != 200 {
		t.Fatalf("GET / = %d", code)
	}
}

func TestOrderProcessorSingleAndBatch(t *testing.T) {
	f := newFixture(t)
	// seq 2 first: parked behind the missing seq 1.
	code, out := f.do(t, "POST", "/OrderProcessor", golden(t, "servicebus-single.json"))
	if code != 200 || out["Outputs"] == nil {
		t.Fatalf("single: %d %v", code, out)
	}
	if logs := out["Logs"].([]any); len(logs) != 2 || !strings.Contains(logs[0].(string), "outcome=parked") || !strings.Contains(logs[1].(string), "order blocked") {
		t.Fatalf("Logs = %v", logs)
	}
	// The batch holds seq 1..3: 1 applies, 2 is the parked duplicate, 3 applies.
	code, out = f.do(t, "POST", "/OrderProcessor", golden(t, "servicebus-batch.json"))
	if code != 200 {
		t.Fatalf("batch: %d %v", code, out)
	}
	o, _ := f.store.Load(context.Background(), "o-1")
	if st := orders.StateOf(o); o.AppliedSeq != 3 || st.Status != orders.StatusDeleted || !o.Complete || st.Total != 1250 || len(o.Parked) != 0 {
		t.Fatalf("order after batch: %+v", viewOf(o))
	}
	code, view := f.do(t, "GET", "/api/orders/o-1", nil)
	if code != 200 || view["status"] != "deleted" || view["appliedSeq"] != 3.0 || view["total"] != 1250.0 {
		t.Fatalf("OrderStatus: %d %v", code, view)
	}
}

func TestOrderProcessorFailsUnreadable(t *testing.T) {
	f := newFixture(t)
	for _, name := range []string{"unreadable-no-seq.json", "unreadable-injected-sessionid.json", "malformed-not-json.json", "malformed-batch-lengths.json"} {
		code, out := f.do(t, "POST", "/OrderProcessor", golden(t, name))
		if code < 300 || out["Error"] == nil {
			t.Errorf("%s: %d %v; want a failed invocation", name, code, out)
		}
	}
	if o, _ := f.store.Load(context.Background(), "o-1"); o.Version != 0 {
		t.Fatalf("an unreadable message changed the order: %+v", viewOf(o))
	}
}

func TestOrderStatusEnvelopeAndErrors(t *testing.T) {
	f := newFixture(t)
	code, out := f.do(t, "POST", "/OrderStatus", golden(t, "http-envelope.json"))
	if code != 200 {
		t.Fatalf("envelope: %d %v", code, out)
	}
	res := out["Outputs"].(map[string]any)["res"].(map[string]any)
	var body map[string]any
	_ = json.Unmarshal([]byte(res["body"].(string)), &body)
	if res["statusCode"] != 404.0 || body["error"] == nil {
		t.Fatalf("unknown order via envelope: %v", res)
	}
	for path, want := range map[string]int{"/api/orders/o-404": 404, "/api/orders/bad%20id": 400, "/nowhere": 404} {
		if code, out := f.do(t, "GET", path, nil); code != want || out["error"] == nil {
			t.Errorf("GET %s = %d %v, want %d with an error", path, code, out, want)
		}
	}
}

func TestLimitsAndPanics(t *testing.T) {
	f := newFixture(t)
	big := bytes.Repeat([]byte("x"), 1<<17)
	if code, out := f.do(t, "POST", "/api/ledgers", big); code != 413 || out["error"] == nil {
		t.Fatalf("oversized upload: %d %v", code, out)
	}
	if code, _ := f.do(t, "POST", "/OrderProcessor", big); code < 300 {
		t.Fatalf("oversized invocation: %d", code)
	}
	srv := handler.New(handler.OrdersDeps(handler.Deps{}, handler.Domain{Processor: panicker{}, Keys: memstore.New()}))
	pf := &fixture{srv: srv}
	if code, _ := pf.do(t, "POST", "/OrderProcessor", golden(t, "servicebus-single.json")); code != 500 {
		t.Fatalf("panicking invocation: %d, want 500", code)
	}
	if code, _ := pf.do(t, "GET", "/", nil); code != 200 {
		t.Fatal("the server did not survive a panic")
	}
}

type panicker struct{}

func (panicker) Process(context.Context, string, []convoy.Message) (convoy.Result, error) {
	panic("boom")
}

func (panicker) Skip(context.Context, string, int64) (convoy.Result, convoy.View, error) {
	panic("boom")
}

func (panicker) Resume(context.Context, string) (convoy.Result, error) {
	panic("boom")
}

func TestLedgerIngest(t *testing.T) {
	f := newFixture(t)
	code, out := f.do(t, "POST", "/LedgerIngest", golden(t, "servicebus-ledger.json"))
	if code != 200 || len(f.sender.Messages()) != 5 {
		t.Fatalf("valid ledger: %d %v, %d messages sent", code, out, len(f.sender.Messages()))
	}
	if logs := out["Logs"].([]any); len(logs) != 1 || !strings.Contains(logs[0].(string), "ledger published") {
		t.Fatalf("Logs %v", logs)
	}
	// Redelivered: a no-op.
	if code, _ := f.do(t, "POST", "/LedgerIngest", golden(t, "servicebus-ledger.json")); code != 200 || len(f.sender.Messages()) != 5 {
		t.Fatalf("redelivered ledger: %d, %d messages", code, len(f.sender.Messages()))
	}
	// An invalid ledger is recorded and the message completed (200), never retried.
	code, out = f.do(t, "POST", "/LedgerIngest", golden(t, "servicebus-ledger-invalid.json"))
	if code != 200 || !strings.Contains(out["Logs"].([]any)[0].(string), "ledger rejected") {
		t.Fatalf("invalid ledger: %d %v", code, out)
	}
	if rec, _ := f.ledgers.GetLedger(context.Background(), "L-bad"); rec == nil || rec.Status != ledger.StatusRejected || len(rec.Problems) != 2 {
		t.Fatalf("rejection record %+v", rec)
	}
	// A ledger queued in another session than its stream is refused
	// (recorded, completed): it would not be ordered with its stream.
	other := strings.Replace(strings.Replace(string(golden(t, "servicebus-ledger.json")), `"SessionId": "\"default\""`, `"SessionId": "\"erp-eu\""`, 1),
		"L-2026-11-21-0001", "L-elsewhere", -1)
	code, out = f.do(t, "POST", "/LedgerIngest", []byte(other))
	if code != 200 || !strings.Contains(out["Logs"].([]any)[0].(string), "ledger rejected") || len(f.sender.Messages()) != 5 {
		t.Fatalf("ledger of stream default in session erp-eu: %d %v, %d messages", code, out, len(f.sender.Messages()))
	}
	if rec, _ := f.ledgers.GetLedger(context.Background(), "L-elsewhere"); rec == nil || rec.Status != ledger.StatusRejected ||
		!strings.Contains(rec.Error, `SessionId "erp-eu"`) {
		t.Fatalf("rejection record %+v", rec)
	}
	// Storage down: the invocation fails so that Service Bus redelivers.
	f.ledgers.Fail = func(string) error { return fault.Errorf(fault.Unavailable, "storage down") }
	if code, _ := f.do(t, "POST", "/LedgerIngest", golden(t, "servicebus-ledger-invalid.json")); code < 300 {
		t.Fatalf("with storage down: %d, want a failed invocation", code)
	}
}

func TestLedgerUpload(t *testing.T) {
	f := newFixture(t)
	doc := golden(t, "ledger-contract-example.json")
	code, out := f.do(t, "POST", "/api/ledgers", doc)
	if code != 202 || out["outcome"] != "published" || out["messages"] != 5.0 || out["orders"] != 2.0 {
		t.Fatalf("upload: %d %v", code, out)
	}
	if code, out := f.do(t, "POST", "/api/ledgers", doc); code != 200 || out["outcome"] != "already published" {
		t.Fatalf("second upload: %d %v", code, out)
	}
	other := bytes.Replace(doc, []byte("1250"), []byte("1251"), 1)
	if code, out := f.do(t, "POST", "/api/ledgers", other); code != 409 || out["error"] == nil {
		t.Fatalf("id reuse: %d %v", code, out)
	}
	bad := []byte(`{"ledgerId":"L-x","transactions":[{"orderId":"o-1","op":"AddTransaction","txId":"t"}]}`)
	code, out = f.do(t, "POST", "/api/ledgers", bad)
	problems, _ := out["problems"].([]any)
	if code != 400 || len(problems) != 1 || problems[0].(map[string]any)["index"] != 0.0 || problems[0].(map[string]any)["field"] != "amount" {
		t.Fatalf("invalid upload: %d %v", code, out)
	}
	f.ledgers.Fail = func(string) error { return fault.Errorf(fault.Unavailable, "storage down") }
	if code, out := f.do(t, "POST", "/api/ledgers", []byte(`{"ledgerId":"L-y","transactions":[{"orderId":"o","op":"DeleteOrder"}]}`)); code != 503 || out["error"] == nil {
		t.Fatalf("storage down: %d %v", code, out)
	}
}

func TestOperations(t *testing.T) {
	f := newFixture(t)
	// seq 2 of o-1 is parked (blocked behind seq 1, which never comes).
	if code, _ := f.do(t, "POST", "/OrderProcessor", golden(t, "servicebus-single.json")); code != 200 {
		t.Fatal(code)
	}
	code, out := f.do(t, "GET", "/api/orders?blocked=true", nil)
	orders, _ := out["orders"].([]any)
	if code != 200 || len(orders) != 1 {
		t.Fatalf("blocked orders: %d %v", code, out)
	}
	row := orders[0].(map[string]any)
	if row["orderId"] != "o-1" || row["missingSeq"] != 1.0 || row["parked"] != 1.0 || row["appliedSeq"] != 0.0 || row["blockedSince"] == "" {
		t.Fatalf("blocked order row %v", row)
	}
	for path, want := range map[string]int{"/api/orders": 400, "/api/orders?blocked=true&pageSize=0": 400, "/api/orders?blocked=true&continuation=%25%25": 400} {
		if code, out := f.do(t, "GET", path, nil); code != want || out["error"] == nil {
			t.Errorf("GET %s = %d %v, want %d", path, code, out, want)
		}
	}
	// Skipping anything but the missing seq changes nothing.
	for _, q := range []string{"seq=2", "seq=x", ""} {
		if code, out := f.do(t, "POST", "/api/orders/o-1/skip?"+q, nil); code < 400 || code > 499 || out["error"] == nil {
			t.Errorf("skip %q: %d %v, want a 4xx error", q, code, out)
		}
	}
	if code, _ := f.do(t, "POST", "/api/orders/nope/skip?seq=1", nil); code != 404 {
		t.Errorf("skip on an unknown order: %d, want 404", code)
	}
	if o, _ := f.store.Load(context.Background(), "o-1"); o.AppliedSeq != 0 || len(o.Parked) != 1 {
		t.Fatalf("a refused skip changed the order: %+v", viewOf(o))
	}
	code, out = f.do(t, "POST", "/api/orders/o-1/skip?seq=1", nil)
	if code != 200 || out["skipped"] != 1.0 || len(out["drained"].([]any)) != 1 {
		t.Fatalf("skip: %d %v", code, out)
	}
	state := out["order"].(map[string]any)
	if state["appliedSeq"] != 2.0 || state["parked"] != 0.0 || state["rejected"].([]any)[0].(map[string]any)["reason"] != "skipped by operator" {
		t.Fatalf("after the skip: %v", state)
	}
	if _, hasOp := state["rejected"].([]any)[0].(map[string]any)["op"]; hasOp {
		t.Fatalf("the skipped seq's entry has an op (its message was never read): %v", state["rejected"])
	}
	if code, out := f.do(t, "GET", "/api/orders?blocked=true", nil); code != 200 || len(out["orders"].([]any)) != 0 {
		t.Fatalf("still listed as blocked: %v", out)
	}
	code, out = f.do(t, "POST", "/api/orders/o-1/replay", nil)
	if code != 200 || out["orderId"] != "o-1" || len(f.replayed) != 1 {
		t.Fatalf("replay: %d %v", code, out)
	}
	// The envelope forms reach the same functions: seq 2 was received (and
	// rejected by a rule), so it cannot be skipped; seq 1 again answers as
	// its skip did (a retry after a lost answer).
	env := []byte(`{"Data":{"req":{"Method":"POST","Query":{"seq":"2"},"Params":{"orderId":"o-1"}}},"Metadata":{}}`)
	code, out = f.do(t, "POST", "/SkipGap", env)
	res, _ := out["Outputs"].(map[string]any)["res"].(map[string]any)
	if code != 200 || res["statusCode"] != 409.0 {
		t.Fatalf("skip through the envelope of a received seq: %d %v, want res 409", code, out)
	}
	if code, out := f.do(t, "POST", "/api/orders/o-1/skip?seq=1", nil); code != 200 || out["skippedEarlier"] != true {
		t.Fatalf("the skip retried: %d %v, want 200, skipped earlier", code, out)
	}
}

// TestEveryErrorCodeHasAStatus: every fault code answers its contract status
// (docs/contract.md, "Errors over HTTP"); a code missing from the table answers
// 500, never status 0 (net/http panics on it and drops the connection).
func TestEveryErrorCodeHasAStatus(t *testing.T) {
	want := map[fault.Code]int{fault.Invalid: 400, fault.NotFound: 404, fault.Conflict: 409, fault.TooLarge: 413,
		fault.Unavailable: 503, fault.Internal: 500, fault.Code("not-in-the-table"): 500}
	codes := append(append([]fault.Code{}, fault.Codes...), "not-in-the-table")
	for _, code := range codes {
		status, ok := want[code]
		if !ok {
			t.Errorf("code %s has no status in the contract table of this test", code)
			continue
		}
		srv := handler.New(handler.OrdersDeps(handler.Deps{}, handler.Domain{Replay: replayFunc(func(context.Context, string) (replay.Report, error) {
			return replay.Report{}, fault.Errorf(code, "failed as %s", code)
		})}))
		f := &fixture{srv: srv}
		if got, out := f.do(t, "POST", "/api/orders/o-1/replay", nil); got != status || out["error"] == nil {
			t.Errorf("code %s: %d %v, want %d with an error", code, got, out, status)
		}
	}
}

// TestOrderProcessorRefusesAnAbsurdSeq: a message whose seq is more than
// convoy.MaxParkAhead (1,000,000) past the order's progress fails as
// unreadable (redelivered, then dead-lettered) and does not block the order;
// exactly at the window it is parked.
func TestOrderProcessorRefusesAnAbsurdSeq(t *testing.T) {
	for _, tc := range []struct {
		seq    string
		parked bool
	}{{"1000000", true}, {"1000001", false}, {"9223372036854775807", false}} {
		f := newFixture(t)
		payload := bytes.ReplaceAll(golden(t, "servicebus-single.json"), []byte(`"seq": 2`), []byte(`"seq": `+tc.seq))
		code, out := f.do(t, "POST", "/OrderProcessor", payload)
		o, _ := f.store.Load(context.Background(), "o-1")
		if tc.parked {
			if code != 200 || len(o.Parked) != 1 || o.MissingSeq() != 1 {
				t.Errorf("seq %s: %d %v, parked %d; want it parked", tc.seq, code, out, len(o.Parked))
			}
			continue
		}
		if code < 300 || out["Error"] == nil {
			t.Errorf("seq %s: %d %v; want a failed invocation", tc.seq, code, out)
		}
		if o.Version != 0 || len(o.Parked) != 0 {
			t.Errorf("seq %s changed the order: %+v", tc.seq, viewOf(o))
		}
		if page, _ := convoy.ListBlocked(context.Background(), f.store, "", 10); len(page.Orders) != 0 {
			t.Errorf("seq %s: blocked orders %+v", tc.seq, page.Orders)
		}
	}
}

// TestOrderStatusResumesACutDrain (issue 33, item 1): an order whose drain
// was cut short with every later message parked (no delivery will come)
// is drained by the next read of OrderStatus, which shows it drained.
func TestOrderStatusResumesACutDrain(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	p := convoy.NewProcessor(f.store, convoy.ProcessorOptions{Domain: orders.Domain, Index: f.store, Retry: fault.RetryPolicy{MaxAttempts: 1}})
	if err := convoytest.CutDrain(ctx, f.store, p, "o-1", 69); err != nil {
		t.Fatal(err)
	}
	code, out := f.do(t, "GET", "/api/orders/o-1", nil)
	if code != 200 || out["appliedSeq"] != 69.0 || out["parked"] != 0.0 {
		t.Fatalf("OrderStatus of an order whose drain was cut: %d appliedSeq %v parked %v, want 69 and 0", code, out["appliedSeq"], out["parked"])
	}
}
