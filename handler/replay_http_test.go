package handler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/operator"
	"github.com/convoy-dev/convoy/handler/replay"
)

// fakeReplayer answers with fixed reports.
type fakeReplayer struct {
	report   replay.Report
	progress replay.Progress
}

func (f fakeReplayer) Replay(_ context.Context, id string) (replay.Report, error) {
	r := f.report
	r.OrderID = id
	return r, nil
}

func (f fakeReplayer) ReplayAll(_ context.Context, _ int, token string) (replay.Progress, error) {
	if _, err := replay.ParseContinuation(token); err != nil {
		return replay.Progress{}, err
	}
	return f.progress, nil
}

func serveReplay(t *testing.T, r operator.Replayer, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	handler.New(handler.OrdersDeps(handler.Deps{}, handler.Domain{Replay: r})).ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

// TestReplayIncompleteStatus: a replay that could not see every dead letter
// is never a 200: 503 with Retry-After when another reader holds them, 409
// when the scan limit was reached; both in the JSON error shape with the
// report beside it, forwarded or through the host's envelope.
func TestReplayIncompleteStatus(t *testing.T) {
	locked := &replay.Incomplete{NotReceived: 2, ScanLimit: 5000, Reason: "2 locked by another reader"}
	limit := &replay.Incomplete{ScanLimitReached: true, ScanLimit: 3, NotReceived: 1, Reason: "scan limit"}
	for _, c := range []struct {
		name   string
		r      fakeReplayer
		path   string
		status int
		retry  bool
	}{
		{"order locked", fakeReplayer{report: replay.Report{Replayed: []replay.Replayed{}, Incomplete: locked}}, "/api/orders/o-1/replay", 503, true},
		{"order limit", fakeReplayer{report: replay.Report{Replayed: []replay.Replayed{}, Incomplete: limit}}, "/api/orders/o-1/replay", 409, false},
		{"order complete", fakeReplayer{report: replay.Report{Replayed: []replay.Replayed{}}}, "/api/orders/o-1/replay", 200, false},
		{"all locked", fakeReplayer{progress: replay.Progress{Incomplete: locked, Continuation: "x"}}, "/api/deadletters/replay", 503, true},
		{"all stuck", fakeReplayer{progress: replay.Progress{Incomplete: limit, Continuation: "x"}}, "/api/deadletters/replay", 409, false},
		{"all done", fakeReplayer{progress: replay.Progress{Done: true}}, "/api/deadletters/replay", 200, false},
	} {
		rec := serveReplay(t, c.r, http.MethodPost, c.path)
		var body map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != c.status || (rec.Header().Get("Retry-After") != "") != c.retry || (c.status != 200) != (body["error"] != nil) {
			t.Errorf("%s: %d %v (Retry-After %q), want %d", c.name, rec.Code, body, rec.Header().Get("Retry-After"), c.status)
		}
		if c.status != 200 && body["incomplete"] == nil {
			t.Errorf("%s: the report is missing beside the error: %v", c.name, body)
		}
	}
	// Through the host's envelope (forwarding off): the same status and header.
	env := []byte(`{"Data":{"req":{"Method":"POST","Params":{"orderId":"o-1"}}},"Metadata":{}}`)
	rec := httptest.NewRecorder()
	handler.New(handler.OrdersDeps(handler.Deps{}, handler.Domain{Replay: fakeReplayer{report: replay.Report{Incomplete: locked}}})).ServeHTTP(rec,
		httptest.NewRequest(http.MethodPost, "/"+handler.FnReplayOrder, bytes.NewReader(env)))
	var out struct {
		Outputs struct {
			Res struct {
				StatusCode int
				Headers    map[string]string
			} `json:"res"`
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Outputs.Res.StatusCode != 503 || out.Outputs.Res.Headers["Retry-After"] == "" {
		t.Fatalf("through the envelope: %s", rec.Body.String())
	}
}

// recordingReplayer records the calls of ReplayAll and validates nothing
// itself: what it refuses, the handler refused.
type recordingReplayer struct {
	fakeReplayer
	calls *[]string
}

func (r recordingReplayer) ReplayAll(_ context.Context, max int, token string) (replay.Progress, error) {
	*r.calls = append(*r.calls, fmt.Sprintf("max=%d continuation=%q", max, token))
	return r.progress, nil
}

// TestReplayAllParams: max and continuation are validated with clear 400s,
// before the replayer is called (it opens a dead-letter receiver).
func TestReplayAllParams(t *testing.T) {
	var calls []string
	r := recordingReplayer{fakeReplayer{progress: replay.Progress{Done: true}}, &calls}
	for _, q := range []string{"max=0", "max=-1", "max=abc", "max=1e3", "max=99999999999", "continuation=%25%25", "continuation=e30", "continuation=" + strings.Repeat("A", 600)} {
		rec := serveReplay(t, r, http.MethodPost, "/api/deadletters/replay?"+q)
		var body map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		if rec.Code != 400 || body["error"] == nil || len(calls) != 0 {
			t.Errorf("?%s: %d %v, replayer called %v; want 400 with an error, the replayer not called", q, rec.Code, body, calls)
		}
		calls = nil
	}
	if rec := serveReplay(t, r, http.MethodPost, "/api/deadletters/replay?max=10&code=adminkey"); rec.Code != 200 || fmt.Sprint(calls) != `[max=10 continuation=""]` {
		t.Fatalf("valid query: %d %s, replayer called %v", rec.Code, rec.Body.String(), calls)
	}
}

// FuzzReplayAllQuery: whatever max and continuation say, ReplayDeadLetters
// answers 200 or a 400 JSON error, never a 5xx.
func FuzzReplayAllQuery(f *testing.F) {
	f.Add("10", "")
	f.Add("0", "e30")
	f.Add("500", "eyJ2IjoxLCJjYWxscyI6MSwic2Nhbm5lZCI6MSwicmVwbGF5ZWQiOjEsImR1cGxpY2F0ZXMiOjAsInNraXAiOjB9")
	f.Fuzz(func(t *testing.T, max, token string) {
		q := url.Values{"max": {max}, "continuation": {token}}
		rec := serveReplay(t, fakeReplayer{progress: replay.Progress{Done: true}}, http.MethodPost, "/api/deadletters/replay?"+q.Encode())
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("not JSON: %s", rec.Body.String())
		}
		if rec.Code != 200 && (rec.Code != 400 || body["error"] == nil) {
			t.Fatalf("max %q continuation %q: %d %v", max, token, rec.Code, body)
		}
	})
}

// TestReplayFailureCarriesItsReport: a replay that fails part-way (Service
// Bus unavailable) answers the error's status in the JSON error shape with
// the report of what it did beside it; one that runs into its function's
// deadline answers 503 naming the deadline, not a 500, as soon as it passes.
func TestReplayFailureCarriesItsReport(t *testing.T) {
	done := replay.Replayed{Seq: 2, MessageID: "L:1", NewMessageID: "L:1#replay-7"}
	partly := replayFunc(func(_ context.Context, id string) (replay.Report, error) {
		return replay.Report{OrderID: id, Replayed: []replay.Replayed{done}, Scanned: 3},
			fault.Wrap(fault.Unavailable, errors.New("dial tcp: connection refused"), "re-send seq 3 of order \"o-1\": Service Bus could not be reached")
	})
	rec := serveReplay(t, partly, http.MethodPost, "/api/orders/o-1/replay")
	var body map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	replayed, _ := body["replayed"].([]any)
	if rec.Code != 503 || rec.Header().Get("Retry-After") == "" || !strings.Contains(fmt.Sprint(body["error"]), "could not be reached") ||
		len(replayed) != 1 || body["orderId"] != "o-1" || body["scanned"] != 3.0 {
		t.Fatalf("failed replay: %d %v, want 503 with the error and the report of seq 2 replayed", rec.Code, body)
	}

	stuck := replayFunc(func(ctx context.Context, id string) (replay.Report, error) {
		<-ctx.Done()
		return replay.Report{OrderID: id, Replayed: []replay.Replayed{}}, ctx.Err()
	})
	rec = httptest.NewRecorder()
	start := time.Now()
	handler.New(handler.OrdersDeps(handler.Deps{Deadlines: map[string]time.Duration{handler.FnReplayOrder: 50 * time.Millisecond}}, handler.Domain{Replay: stuck})).
		ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/orders/o-1/replay", nil))
	body = nil
	_ = json.Unmarshal(rec.Body.Bytes(), &body)
	if took := time.Since(start); rec.Code != 503 || !strings.Contains(fmt.Sprint(body["error"]), "deadline of 50ms") || body["orderId"] != "o-1" || took > 5*time.Second {
		t.Fatalf("replay past its deadline: %d %v after %s, want 503 naming the deadline at once", rec.Code, body, took)
	}
}
