package devhost_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
)

// TestFrontAnswersJSONAndSaysKeysAreNotChecked: a route or method no
// function has answers 404 with the JSON error body (as every error of the
// contract), and the dashboard's page says that the emulation checks no keys
// while every function answers without one.
func TestFrontAnswersJSONAndSaysKeysAreNotChecked(t *testing.T) {
	t.Parallel()
	e := start(t, stage(t, nil), azurite.Options{})
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/nope"}, {"PUT", "/api/orders/o-1"}, {"DELETE", "/api/ledgers"}, {"GET", "/"}, {"GET", "/api/orders/o-1/replay"},
	} {
		req, _ := http.NewRequest(c.method, e.host.URL()+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		msg, _ := body["error"].(string)
		if resp.StatusCode != 404 || err != nil || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") ||
			!strings.Contains(msg, c.method+" "+c.path) {
			t.Errorf("%s %s: %d %q %v (%v), want 404 with a JSON error naming it", c.method, c.path, resp.StatusCode, resp.Header.Get("Content-Type"), body, err)
		}
	}
	// A function's own 404 is the handler's, unchanged.
	var order map[string]any
	if code := e.get(t, "/api/orders/nobody", &order); code != 404 || order["error"] == nil {
		t.Errorf("GET an unknown order: %d %v", code, order)
	}
	// No key needed, and the page says so.
	resp, err := http.Get(e.host.URL() + "/api/dashboard")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), devhost.KeysNotice) || strings.Count(string(page), devhost.KeysNotice) != 1 {
		t.Errorf("dashboard: %d, the keys notice %d times", resp.StatusCode, strings.Count(string(page), devhost.KeysNotice))
	}
	if n := resp.Header.Get("Content-Length"); n != "" && n != itoa(len(page)) {
		t.Errorf("dashboard: Content-Length %s, body %d bytes", n, len(page))
	}
	if code := e.post(t, "/api/orders/nobody/skip?seq=1", &order); code != 404 {
		t.Errorf("an admin function without a key: %d %v, want the function's own answer (404: no such order)", code, order)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
