package handler_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/handler"
)

// TestRoutingErrorsAreJSON: a path or method no function has answers in the
// JSON error shape of every error, naming the request (and what the path
// allows), never echo's bare "Not Found".
func TestRoutingErrorsAreJSON(t *testing.T) {
	for _, c := range []struct {
		method, path string
		status       int
		says         []string
	}{
		{"GET", "/nope", 404, []string{"no function answers GET /nope"}},
		{"DELETE", "/api/ledgers", 405, []string{"DELETE /api/ledgers", "POST"}},
		{"PUT", "/api/orders/o-1", 405, []string{"PUT /api/orders/o-1", "GET"}},
		{"GET", "/api/orders/o-1/skip", 405, []string{"GET /api/orders/o-1/skip", "POST"}},
	} {
		rec := httptest.NewRecorder()
		handler.New(handler.OrdersDeps(handler.Deps{}, handler.Domain{})).ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		var body struct{ Error string }
		err := json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != c.status || err != nil || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
			t.Errorf("%s %s: %d %q %s, want %d JSON", c.method, c.path, rec.Code, rec.Header().Get("Content-Type"), rec.Body, c.status)
			continue
		}
		for _, s := range c.says {
			if !strings.Contains(body.Error, s) {
				t.Errorf("%s %s: %q does not say %q", c.method, c.path, body.Error, s)
			}
		}
	}
}
