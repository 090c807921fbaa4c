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
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/replay"
)

// TestSummaryAndDashboard: the summary is JSON and takes no query; the
// dashboard is HTML, forwarded or through the host's envelope, and takes
// only the function key.
func TestSummaryAndDashboard(t *testing.T) {
	e := handler.New(handler.OrdersDeps(handler.Deps{}, handler.Domain{Heal: fakeHealer{}}))
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec
	}
	if rec := get("/api/summary"); rec.Code != 200 || !strings.Contains(rec.Body.String(), `"blockedOrders":2`) {
		t.Fatalf("summary: %d %s", rec.Code, rec.Body)
	}
	if rec := get("/api/summary?x=1"); rec.Code != 400 || !strings.Contains(rec.Body.String(), "no query") {
		t.Fatalf("summary with a query: %d %s", rec.Code, rec.Body)
	}
	rec := get("/api/dashboard?code=k")
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") || !strings.Contains(rec.Body.String(), "<table") {
		t.Fatalf("dashboard: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	if rec := get("/api/dashboard?admin=k"); rec.Code != 400 {
		t.Fatalf("dashboard with an unknown parameter: %d", rec.Code)
	}
	env := `{"Data":{"req":{"Url":"http://x/api/dashboard","Method":"GET","Query":{},"Headers":{},"Params":{}}},"Metadata":{}}`
	rec = httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/Dashboard", bytes.NewReader([]byte(env))))
	var out struct {
		Outputs struct {
			Res struct {
				StatusCode int
				Body       string
				Headers    map[string]string
			} `json:"res"`
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Outputs.Res.StatusCode != 200 ||
		!strings.HasPrefix(out.Outputs.Res.Headers["Content-Type"], "text/html") || !strings.Contains(out.Outputs.Res.Body, "<table") {
		t.Fatalf("dashboard through the envelope: %s", rec.Body)
	}
}

// TestDashboardDataTakesTheFunctionKey: in Azure the dashboard is opened as
// /api/dashboard?code=<key>, and the host forwards the code parameter it
// authenticated with to every function behind an authLevel: function key.
// The functions the page calls accept it, forwarded or through the
// envelope; the summary still refuses any other parameter.
func TestDashboardDataTakesTheFunctionKey(t *testing.T) {
	e := handler.New(handler.OrdersDeps(handler.Deps{}, handler.Domain{Heal: fakeHealer{}, Blocked: memstore.New(),
		Replay: replayFunc(func(_ context.Context, id string) (replay.Report, error) { return replay.Report{OrderID: id}, nil })}))
	for path, want := range map[string]int{
		"/api/summary?code=abc":                          200,
		"/api/orders?blocked=true&code=abc":              200,
		"/api/orders?code=abc&blocked=true&pageSize=500": 200,
		"/api/summary?x=1":                               400,
		"/api/summary?code=abc&x=1":                      400,
		"/api/summary?Code=abc":                          400,
	} {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != want {
			t.Errorf("GET %s: %d %s, want %d", path, rec.Code, rec.Body, want)
		}
	}
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/orders/o-1/replay?code=abc", nil))
	if rec.Code != 200 {
		t.Errorf("POST replay?code=abc: %d %s", rec.Code, rec.Body)
	}
	for fn, q := range map[string]string{"HealthSummary": `{"code":"abc"}`, "BlockedOrders": `{"blocked":"true","code":"abc"}`} {
		env := `{"Data":{"req":{"Method":"GET","Query":` + q + `,"Headers":{},"Params":{}}},"Metadata":{}}`
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/"+fn, strings.NewReader(env)))
		var out struct {
			Outputs struct {
				Res struct{ StatusCode int } `json:"res"`
			}
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Outputs.Res.StatusCode != 200 {
			t.Errorf("%s through the envelope with code: %s", fn, rec.Body)
		}
	}
}

// TestDashboardCannotBeFramed: the dashboard's response forbids framing
// (clickjacking of its replay and skip buttons), forwarded or through the
// envelope, and its policy still lets the page's own script and style run.
func TestDashboardCannotBeFramed(t *testing.T) {
	e := handler.New(handler.OrdersDeps(handler.Deps{}, handler.Domain{Heal: fakeHealer{}}))
	check := func(how string, h func(string) string) {
		t.Helper()
		if got := h("X-Frame-Options"); got != "DENY" {
			t.Errorf("%s: X-Frame-Options %q, want DENY", how, got)
		}
		csp := h("Content-Security-Policy")
		for _, want := range []string{"frame-ancestors 'none'", "default-src 'none'", "script-src 'sha256-", "style-src 'sha256-", "connect-src 'self'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: Content-Security-Policy %q lacks %q", how, csp, want)
			}
		}
	}
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/dashboard?code=k", nil))
	check("forwarded", rec.Header().Get)
	env := `{"Data":{"req":{"Url":"http://x/api/dashboard","Method":"GET","Query":{"code":"k"},"Headers":{},"Params":{}}},"Metadata":{}}`
	rec = httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/Dashboard", strings.NewReader(env)))
	var out struct {
		Outputs struct {
			Res struct{ Headers map[string]string } `json:"res"`
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("dashboard through the envelope: %s", rec.Body)
	}
	check("envelope", func(k string) string { return out.Outputs.Res.Headers[k] })
}
