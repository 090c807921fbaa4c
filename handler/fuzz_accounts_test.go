package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/accounts"
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/ledger"
	"github.com/convoy-dev/convoy/handler/orders"
)

// FuzzAccountInvocations: whatever body reaches an account function's
// route, on a server of orders and accounts, the answer is JSON with a
// status the host understands (a 2xx always a JSON object), the process
// survives, and every seq an account consumed shows: as an entry, a
// rejection, or its open or close.
func FuzzAccountInvocations(f *testing.F) {
	f.Add(uint8(0), accountInvocation("a-1", 1, `{"accountId":"a-1","kind":"open","currency":"EUR","limit":100}`))
	f.Add(uint8(0), accountInvocation("a-1", 2, `{"accountId":"a-1","kind":"withdraw","amount":500,"reference":"w-1"}`))
	f.Add(uint8(0), accountInvocation("a-2", 1, `{"accountId":"a-2","kind":"deposit","amount":"7","reference":"d-1"}`))
	f.Add(uint8(0), accountInvocation("a-1", 1, `{"accountId":"a-2","kind":"close"}`))
	f.Add(uint8(1), []byte(`{"Data":{"req":{"Method":"GET","Params":{"accountId":"a-1"},"Query":{"pageSize":"2"}}}}`))
	f.Add(uint8(3), []byte(`{"Data":{"req":{"Method":"POST","Params":{"accountId":"a-1"}}}}`))
	f.Add(uint8(4), []byte(`{"Data":{"req":{"Method":"POST","Query":{"seq":"2"},"Params":{"accountId":"a-1"}}}}`))
	f.Add(uint8(5), []byte(`{"Data":{"req":{"Method":"POST","Query":{"domain":"accounts","max":"3"}}}}`))
	routes := []string{"/AccountProcessor", "/AccountStatus", "/BlockedAccounts", "/ReplayAccount", "/SkipAccountGap", "/ReplayDeadLetters", "/HealthSummary"}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		route := routes[int(which)%len(routes)]
		ords, accs := memstore.New(), memstore.New()
		srv := handler.New(handler.Deps{
			Ledgers:         ledgertest.Publisher(memstore.NewLedgers(), &ledgertest.Sender{}, ledger.PublisherOptions{}),
			MaxRequestBytes: 1 << 16,
			Domains: []handler.Domain{
				{Rules: orders.Domain, Processor: convoy.NewProcessor(ords, convoy.ProcessorOptions{Domain: orders.Domain, Index: ords}), Keys: ords, Blocked: ords},
				{Rules: accounts.Domain, Processor: convoy.NewProcessor(accs, convoy.ProcessorOptions{Domain: accounts.Domain, Index: accs}), Keys: accs, Blocked: accs},
			},
		})
		// a-1 exists: opened, one deposit.
		for seq, c := range []string{`{"accountId":"a-1","kind":"open","currency":"EUR","limit":100}`, `{"accountId":"a-1","kind":"deposit","amount":50,"reference":"d-0"}`} {
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/AccountProcessor", bytes.NewReader(accountInvocation("a-1", int64(seq+1), c))))
			if rec.Code != 200 {
				t.Fatalf("setting up a-1: %d %s", rec.Code, rec.Body)
			}
		}
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, route, bytes.NewReader(body)))
		if !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") || !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s answered %d %q with Content-Type %q", route, rec.Code, rec.Body.String(), rec.Header().Get("Content-Type"))
		}
		if rec.Code != 200 && rec.Code < 400 {
			t.Fatalf("%s answered %d", route, rec.Code)
		}
		if rec.Code == 200 && !bytes.HasPrefix(bytes.TrimSpace(rec.Body.Bytes()), []byte("{")) {
			t.Fatalf("%s answered 200 with %q, not a JSON object", route, rec.Body.String())
		}
		for _, id := range []string{"a-1", "a-2"} {
			k, err := accs.Load(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if k.AppliedSeq == 0 {
				continue
			}
			v, err := convoy.ReadView(context.Background(), accounts.Domain, accs, accs, id, "", convoy.MaxHistoryPageSize)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := json.Marshal(v)
			var page accounts.View
			if err := json.Unmarshal(raw, &page); err != nil {
				t.Fatal(err)
			}
			seen := int64(len(page.Entries) + len(page.Rejected))
			if page.Status != accounts.StatusNew {
				seen++ // the open
			}
			if page.Status == accounts.StatusClosed {
				seen++ // the close
			}
			if page.AppliedSeq != seen {
				t.Fatalf("account %s consumed %d seqs with %d effects: %s", id, page.AppliedSeq, seen, raw)
			}
		}
	})
}
