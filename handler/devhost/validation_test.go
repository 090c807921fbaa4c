package devhost_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/devhost"
)

// fakeHandlerMode, when set, makes this test binary a misbehaving custom
// handler instead of running tests (see TestMain).
const fakeHandlerMode = "DEVHOST_FAKE_HANDLER"

// runFakeHandler answers GET / and every invocation the way mode says.
func runFakeHandler(mode string) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("POST /", func(w http.ResponseWriter, _ *http.Request) {
		switch mode {
		case "text": // Go's default content type when none is set
			_, _ = w.Write([]byte("ok"))
		case "badjson":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte("{not json"))
		case "status":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"Logs":["lost"]}`))
		default: // "good"
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			_, _ = w.Write([]byte(`{}`))
		}
	})
	_ = http.ListenAndServe("127.0.0.1:"+os.Getenv("FUNCTIONS_CUSTOMHANDLER_PORT"), mux)
}

// TestResponseValidation: the emulation judges answers as the host does:
// anything but a 2xx application/json JSON body fails the invocation, and the
// message comes back until it is dead-lettered.
func TestResponseValidation(t *testing.T) {
	for _, tc := range []struct {
		mode string
		ok   bool
	}{{"good", true}, {"text", false}, {"badjson", false}, {"status", false}} {
		t.Run(tc.mode, func(t *testing.T) {
			app := t.TempDir()
			self, _ := os.Executable()
			host := map[string]any{"version": "2.0", "customHandler": map[string]any{"description": map[string]any{
				"defaultExecutablePath": self, "arguments": []string{"-test.run=^$"}}}}
			fn := map[string]any{"bindings": []any{map[string]any{"type": "serviceBusTrigger", "direction": "in", "name": "message",
				"queueName": "work", "connection": "ServiceBusConnection", "dataType": "string"}}}
			writeJSON(t, filepath.Join(app, "host.json"), host)
			writeJSON(t, filepath.Join(app, "Work", "function.json"), fn)
			h, err := devhost.Start(devhost.Options{AppDir: app, Settings: map[string]string{fakeHandlerMode: tc.mode},
				Queues: map[string]devhost.QueueProperties{"work": {MaxDeliveryCount: 3}}})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Stop()
			h.Queue("work").Send([]devhost.Message{{MessageID: "m-1", Body: []byte(`{"a":1}`)}})
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := h.WaitIdle(ctx, 200*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			dead := h.Queue("work").DeadLetters()
			if tc.ok && (len(dead) != 0 || h.Failures() != 0) {
				t.Fatalf("a valid answer failed: %d dead letters, %d failures", len(dead), h.Failures())
			}
			if !tc.ok && (len(dead) != 1 || dead[0].DeliveryCount != 3 || h.Failures() != 3) {
				t.Fatalf("answer %q: dead letters %+v, %d failures; want the message dead-lettered after 3 failed deliveries", tc.mode, dead, h.Failures())
			}
		})
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	_ = os.MkdirAll(filepath.Dir(path), 0o755)
	data, _ := json.Marshal(v)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
