package handler_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
)

// parkedInvocation is an OrderProcessor invocation of one message of order
// as the host sends it: seq, message id, enqueued time and, unless "", a
// traceparent among its application properties.
func parkedInvocation(t *testing.T, order string, seq int64, messageID string, enqueued time.Time, traceParent, tx string) []byte {
	t.Helper()
	str := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	props := map[string]any{"seq": seq}
	if traceParent != "" {
		props["traceparent"] = traceParent
	}
	env := map[string]any{
		"Data": map[string]any{"message": str(`{"transaction":` + tx + `}`)},
		"Metadata": map[string]any{
			"MessageId": str(messageID), "SessionId": str(order), "DeliveryCount": "1",
			"EnqueuedTimeUtc":       enqueued.UTC().Format("2006-01-02T15:04:05"),
			"ApplicationProperties": props, "UserProperties": props,
		},
	}
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDashboardParkedWindow: GET /api/dashboard?parked=<orderId> answers
// the order's parked window as the store's Load reads it (the lowest
// convoy.ParkedLoadSize parked messages, and how many are parked in all):
// each message's seq, message id, enqueued time and the trace id of the
// traceparent it carried, none when it carried none or one that is not a
// W3C traceparent; the oracle is what the test parked. An unknown order is
// a 404, an invalid id or an unknown parameter a 400, forwarded or through
// the host's envelope; the function key (code) is accepted.
func TestDashboardParkedWindow(t *testing.T) {
	f := newFixture(t)
	base := time.Date(2026, 11, 29, 4, 18, 0, 0, time.UTC)
	send := func(seq int64, messageID, traceParent, tx string) {
		t.Helper()
		code, out := f.do(t, "POST", "/OrderProcessor", parkedInvocation(t, "o-p", seq, messageID, base.Add(time.Duration(seq)*time.Second), traceParent, tx))
		if code != 200 {
			t.Fatalf("seq %d: %d %v", seq, code, out)
		}
	}
	send(1, "L:1", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", `{"orderId":"o-p","op":"CreateOrder","currency":"EUR"}`)
	// Seq 2 is never sent: seqs 3 to 3+ParkedLoadSize park behind it, one
	// more than the window holds.
	type parked struct {
		Seq        int64  `json:"seq"`
		MessageID  string `json:"messageId"`
		EnqueuedAt string `json:"enqueuedAt,omitempty"`
		TraceID    string `json:"traceId,omitempty"`
	}
	var sent []parked
	for seq := int64(3); seq <= 3+convoy.ParkedLoadSize; seq++ {
		p := parked{Seq: seq, MessageID: fmt.Sprintf("L:%d", seq), EnqueuedAt: base.Add(time.Duration(seq) * time.Second).Format(time.RFC3339),
			TraceID: fmt.Sprintf("%032x", 0xabc000+seq)}
		tp := "00-" + p.TraceID + "-00f067aa0ba902b7-01"
		switch seq {
		case 4: // none
			p.TraceID, tp = "", ""
		case 5: // not a W3C traceparent: ignored
			p.TraceID, tp = "", "00-"+p.TraceID+"-nothex-01"
		}
		send(seq, p.MessageID, tp, fmt.Sprintf(`{"orderId":"o-p","op":"AddTransaction","txId":"t-%d","amount":%d}`, seq, seq))
		sent = append(sent, p)
	}
	type answer struct {
		OrderID    string   `json:"orderId"`
		Parked     int      `json:"parked"`
		MissingSeq int64    `json:"missingSeq"`
		WindowSize int      `json:"windowSize"`
		Messages   []parked `json:"messages"`
	}
	want := answer{OrderID: "o-p", Parked: len(sent), MissingSeq: 2, WindowSize: convoy.ParkedLoadSize, Messages: sent[:convoy.ParkedLoadSize]}
	for _, path := range []string{"/api/dashboard?parked=o-p", "/api/dashboard?code=k&parked=o-p"} {
		rec := httptest.NewRecorder()
		f.srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var got answer
		if err := json.Unmarshal(rec.Body.Bytes(), &got); rec.Code != 200 || err != nil || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("GET %s:\n got %+v\nwant %+v", path, got, want)
		}
	}
	for path, code := range map[string]int{
		"/api/dashboard?parked=o-none":            404,
		"/api/dashboard?parked=bad%20id":          400,
		"/api/dashboard?parked=":                  400,
		"/api/dashboard?parked=o-p&parked=o-q":    400,
		"/api/dashboard?parked=o-p&pageSize=20":   400,
		"/api/dashboard?parked=o-p&code=k&Code=k": 400,
	} {
		if got, out := f.do(t, "GET", path, nil); got != code || out["error"] == nil {
			t.Errorf("GET %s: %d %v, want %d with an error", path, got, out, code)
		}
	}
	for q, code := range map[string]int{`{"parked":"o-p","code":"k"}`: 200, `{"parked":"o-none"}`: 404, `{"parked":"bad id"}`: 400} {
		env := `{"Data":{"req":{"Url":"http://x/api/dashboard","Method":"GET","Query":` + q + `,"Headers":{},"Params":{}}},"Metadata":{}}`
		_, out := f.do(t, "POST", "/Dashboard", []byte(env))
		res, _ := out["Outputs"].(map[string]any)["res"].(map[string]any)
		var body answer
		if res == nil || res["statusCode"] != float64(code) || json.Unmarshal([]byte(fmt.Sprint(res["body"])), &body) != nil ||
			(code == 200 && !reflect.DeepEqual(body, want)) {
			t.Errorf("Dashboard through the envelope with %s: %v, want %d", q, out, code)
		}
	}
}

// FuzzDashboardParkedQuery: whatever the query of GET
// /api/dashboard?parked=… holds (the order id, another parameter, the id
// given twice), the answer is 200, 400 or 404 with a JSON body, never a
// 5xx; a 200 is the window of the order asked for, at most
// convoy.ParkedLoadSize messages in ascending seq, and a 400 or 404 says why.
func FuzzDashboardParkedQuery(f *testing.F) {
	f.Add("o-p", "", "", false)
	f.Add("o-404", "", "", false)
	f.Add("", "code", "x", false)
	f.Add("o-p", "parked", "o-q", true)
	f.Add("<script>", "pageSize", "1", false)
	f.Add(strings.Repeat("o", 300), "", "", false)
	fx := newFixture(&testing.T{})
	enqueued := time.Date(2026, 11, 29, 4, 18, 0, 0, time.UTC)
	for seq := int64(3); seq <= 3+convoy.ParkedLoadSize; seq++ {
		inv := parkedInvocation(&testing.T{}, "o-p", seq, fmt.Sprintf("L:%d", seq), enqueued, "",
			fmt.Sprintf(`{"orderId":"o-p","op":"AddTransaction","txId":"t-%d","amount":1}`, seq))
		if code, out := fx.do(&testing.T{}, "POST", "/OrderProcessor", inv); code != 200 {
			f.Fatalf("park seq %d: %d %v", seq, code, out)
		}
	}
	f.Fuzz(func(t *testing.T, id, key, value string, twice bool) {
		q := url.Values{"parked": {id}}
		if twice {
			q.Add("parked", id)
		}
		if key != "" {
			q.Add(key, value)
		}
		code, v := fx.do(t, "GET", "/api/dashboard?"+q.Encode(), nil)
		switch code {
		case 200:
			msgs, _ := v["messages"].([]any)
			if v["orderId"] != id || len(msgs) > convoy.ParkedLoadSize {
				t.Fatalf("%s: the window of %v, %d messages", q.Encode(), v["orderId"], len(msgs))
			}
			last := 0.0
			for _, m := range msgs {
				seq, _ := m.(map[string]any)["seq"].(float64)
				if seq <= last {
					t.Fatalf("%s: seqs not ascending: %v", q.Encode(), msgs)
				}
				last = seq
			}
		case 400, 404:
			if v["error"] == nil {
				t.Fatalf("%s: %d without an error: %v", q.Encode(), code, v)
			}
		default:
			t.Fatalf("%s: %d %v", q.Encode(), code, v)
		}
	})
}
