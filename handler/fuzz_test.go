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

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/orders"
)

// FuzzInvocations: whatever body reaches an invocation route, the answer is
// JSON with a status the host understands (a 2xx always a JSON object), the process survives, and an
// invocation that failed changed no order.
func FuzzInvocations(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, file := range files {
		data, _ := os.ReadFile(file)
		f.Add(uint8(0), data)
		f.Add(uint8(1), data)
	}
	f.Add(uint8(3), []byte(`{"Data":{"req":{"Method":"GET","Params":{"orderId":"o-1"}}}}`))
	f.Add(uint8(6), []byte(`{"Data":{"req":{"Method":"POST","Query":{"seq":"-1"},"Params":{"orderId":"o-1"}}}}`))
	routes := []string{"/OrderProcessor", "/LedgerIngest", "/LedgerUpload", "/OrderStatus", "/BlockedOrders", "/ReplayOrder", "/SkipGap", "/ReplayDeadLetters"}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		route := routes[int(which)%len(routes)]
		fx := newFixture(t)
		req := httptest.NewRequest(http.MethodPost, route, bytes.NewReader(body))
		rec := httptest.NewRecorder()
		fx.srv.ServeHTTP(rec, req)
		if !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") || !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s answered %d %q with Content-Type %q", route, rec.Code, rec.Body.String(), rec.Header().Get("Content-Type"))
		}
		if rec.Code != 200 && rec.Code < 400 {
			t.Fatalf("%s answered %d", route, rec.Code)
		}
		// A 2xx with an empty or null body never completes: the host waits
		// out functionTimeout and restarts the handler.
		if rec.Code == 200 && !bytes.HasPrefix(bytes.TrimSpace(rec.Body.Bytes()), []byte("{")) {
			t.Fatalf("%s answered 200 with %q, not a JSON object", route, rec.Body.String())
		}
		if route == "/OrderProcessor" && rec.Code != 200 {
			// Messages of a failed invocation may have been applied only if
			// they were readable; an order with state must then be consistent.
			for _, id := range []string{"o-1", "o-2"} {
				o, err := fx.store.Load(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				if o.AppliedSeq == 0 {
					continue
				}
				v, err := convoy.ReadView(context.Background(), orders.Domain, fx.store, fx.store, id, "", 0)
				if err != nil {
					t.Fatal(err)
				}
				if ov := orders.ViewOf(v); len(ov.Rejected)+countApplied(o) == 0 {
					t.Fatalf("order %s advanced without any effect: %+v", id, ov)
				}
			}
		}
	})
}

// countApplied is how many transactions had an effect an outsider can see.
func countApplied(o *convoy.Key) int {
	s := orders.StateOf(o)
	n := int(s.TxCount)
	if s.Status != orders.StatusNew {
		n++
	}
	return n
}
