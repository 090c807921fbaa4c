package invocation_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/convoy-dev/convoy/handler/invocation"
)

func golden(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func parse(t *testing.T, name string) *invocation.Request {
	t.Helper()
	r, err := invocation.Parse(golden(t, name))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

// sameJSON compares two JSON texts by value (a clean body arrives re-indented).
func sameJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("body %q is not JSON: %v", got, err)
	}
	_ = json.Unmarshal([]byte(want), &w)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("body = %s, want %s", got, want)
	}
}

const body2 = `{"transaction":{"orderId":"o-1","op":"AddTransaction","txId":"t-1","amount":1250}}`

func TestSingleMessage(t *testing.T) {
	for _, name := range []string{"servicebus-single.json", "servicebus-single-clean.json"} {
		t.Run(name, func(t *testing.T) {
			msgs, err := parse(t, name).ServiceBusMessages("message")
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != 1 {
				t.Fatalf("%d messages, want 1", len(msgs))
			}
			m := msgs[0]
			sameJSON(t, m.Body, body2)
			want := invocation.Message{SessionID: "o-1", MessageID: "L-1:2", DeliveryCount: 1,
				EnqueuedTimeUtc: time.Date(2025, 1, 15, 10, 20, 30, 0, time.UTC)}
			got := m
			got.Body, got.ApplicationProperties = nil, nil
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded %+v\nwant    %+v", got, want)
			}
			seq, err := invocation.DecodeInt(m.ApplicationProperties["seq"])
			if err != nil || seq != 2 {
				t.Fatalf("seq = %d, %v; want 2", seq, err)
			}
		})
	}
}

func TestBatch(t *testing.T) {
	for _, name := range []string{"servicebus-batch.json", "servicebus-batch-clean.json"} {
		t.Run(name, func(t *testing.T) {
			msgs, err := parse(t, name).ServiceBusMessages("message")
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != 3 {
				t.Fatalf("%d messages, want 3", len(msgs))
			}
			ids := []string{"L-1:0", "L-1:2", "L-1:4"}
			for i, m := range msgs {
				if m.SessionID != "o-1" || m.MessageID != ids[i] {
					t.Errorf("message %d: %+v", i, m)
				}
				seq, err := invocation.DecodeInt(m.ApplicationProperties["seq"])
				if err != nil || seq != int64(i+1) {
					t.Errorf("message %d: seq %d, %v", i, seq, err)
				}
			}
			sameJSON(t, msgs[1].Body, body2)
			for i, m := range msgs { // the fixture's EnqueuedTimeUtcArray: .1234567, .2234567, .3234567
				want := time.Date(2025, 1, 15, 10, 20, 30, 123456700+i*100_000_000, time.UTC)
				if !m.EnqueuedTimeUtc.Equal(want) {
					t.Errorf("EnqueuedTimeUtc of message %d = %v, want %v", i, m.EnqueuedTimeUtc, want)
				}
			}
			if msgs[2].DeliveryCount != 2 {
				t.Errorf("DeliveryCount of the third = %d, want 2", msgs[2].DeliveryCount)
			}
			last, err := invocation.DecodeBool(msgs[2].ApplicationProperties["last"])
			if err != nil || !last {
				t.Errorf("last of the third = %v, %v", last, err)
			}
		})
	}
}

// TestUnusedMetadataNeverFails: metadata the handler does not use may come
// in any form (the host's encoding of dates and numbers has changed before)
// without failing the invocation; what it uses still fails when bad.
func TestUnusedMetadataNeverFails(t *testing.T) {
	odd := map[string]string{
		"SequenceNumber": `"seventeen"`, "EnqueuedTimeUtc": `"15/01/2025 10:20:30"`, "EnqueuedTime": `{"x":1}`,
		"ExpiresAtUtc": `[1]`, "ContentType": `17`, "LockToken": `"\"not-a-guid\""`,
	}
	oddBatch := map[string]string{
		"SequenceNumberArray": `"[\"a\",\"b\",\"c\"]"`, "EnqueuedTimeUtcArray": `"not an array"`, "ContentTypeArray": `"[1]"`,
	}
	for fixture, keys := range map[string]map[string]string{"servicebus-single.json": odd, "servicebus-batch.json": oddBatch} {
		r := parse(t, fixture)
		for k, v := range keys {
			r.Metadata[k] = json.RawMessage(v)
		}
		msgs, err := r.ServiceBusMessages("message")
		if err != nil {
			t.Errorf("%s with odd unused metadata: %v", fixture, err)
		}
		for i, m := range msgs {
			if !m.EnqueuedTimeUtc.IsZero() {
				t.Errorf("%s: message %d's unreadable EnqueuedTimeUtc decoded to %v, want none", fixture, i, m.EnqueuedTimeUtc)
			}
		}
	}
	// (A bad SessionId fails later, as an unreadable order message: server_test.)
	for key, bad := range map[string]string{"DeliveryCount": `"one"`, "ApplicationProperties": `"nope"`} {
		r := parse(t, "servicebus-single.json")
		r.Metadata[key] = json.RawMessage(bad)
		delete(r.Metadata, "UserProperties")
		if _, err := r.ServiceBusMessages("message"); err == nil {
			t.Errorf("a bad %s was accepted", key)
		}
	}
}

// TestBinaryEnvelopeBody: without forwarding the host sends octet-stream
// and multipart bodies base64-encoded.
func TestBinaryEnvelopeBody(t *testing.T) {
	r := parse(t, "http-envelope-post.json")
	r.Data["req"] = json.RawMessage(`{"Method":"POST","Headers":{"Content-Type":["application/octet-stream"]},"Body":"eyJsZWRnZXJJZCI6IkwtMSJ9"}`)
	req, err := r.HTTPRequest("req")
	if err != nil || string(req.Body) != `{"ledgerId":"L-1"}` {
		t.Fatalf("octet-stream body = %q, %v; want it base64-decoded", req.Body, err)
	}
	r.Data["req"] = json.RawMessage(`{"Method":"POST","Headers":{"Content-Type":["application/octet-stream"]},"Body":"not base64!"}`)
	if _, err := r.HTTPRequest("req"); err == nil {
		t.Fatal("an octet-stream body that is not base64 was accepted")
	}
}

func TestHTTPEnvelope(t *testing.T) {
	r := parse(t, "http-envelope.json")
	req, err := r.HTTPRequest("req")
	if err != nil {
		t.Fatal(err)
	}
	if req.Method != "GET" || r.Param(req, "orderId") != "o-1" || req.Query["code"] != "abc" || req.Headers.Get("Accept") != "application/json" {
		t.Fatalf("decoded %+v", req)
	}
	delete(r.Data, "req")
	r.Data["req"] = json.RawMessage(`{"Method":"GET"}`)
	req, _ = r.HTTPRequest("req")
	if got := r.Param(req, "orderId"); got != "o-1" {
		t.Fatalf("route parameter from Metadata = %q, want o-1", got)
	}

	post, err := parse(t, "http-envelope-post.json").HTTPRequest("req")
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, post.Body, `{"ledgerId":"L-1","transactions":[]}`)
}

func TestMalformed(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "malformed-*.json"))
	if len(files) < 5 {
		t.Fatalf("only %d malformed payloads found", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, _ := os.ReadFile(f)
			r, err := invocation.Parse(data)
			if err == nil {
				_, err = r.ServiceBusMessages("message")
			}
			if err == nil {
				t.Fatal("decoded without error")
			}
		})
	}
}

func TestDecodeString(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{`"\"m-1\""`, "m-1"},               // the host's double encoding
		{`"m-1"`, "m-1"},                   // clean
		{`"\"\""`, ""},                     // an empty string, double-encoded
		{`"say \"hi\""`, `say "hi"`},       // clean, with quotes inside
		{`{"a":1}`, `{"a":1}`},             // an object body
		{`17`, "17"},                       // a clean number
		{`"\"{\\\"a\\\":1}\""`, `{"a":1}`}, // a JSON body, double-encoded
	} {
		got, err := invocation.DecodeString(json.RawMessage(tc.raw))
		if err != nil || got != tc.want {
			t.Errorf("DecodeString(%s) = %q, %v; want %q", tc.raw, got, err, tc.want)
		}
	}
	for _, raw := range []string{`null`, ``, `"unterminated`, `{bad`} {
		if _, err := invocation.DecodeString(json.RawMessage(raw)); err == nil {
			t.Errorf("DecodeString(%s) succeeded", raw)
		}
	}
}

func TestDecodeTime(t *testing.T) {
	want := time.Date(2025, 1, 15, 10, 20, 30, 0, time.UTC)
	for _, raw := range []string{`"2025-01-15T10:20:30"`, `"2025-01-15T10:20:30+00:00"`, `"2025-01-15T11:20:30+01:00"`, `"\"2025-01-15T10:20:30Z\""`} {
		got, err := invocation.DecodeTime(json.RawMessage(raw))
		if err != nil || !got.Equal(want) {
			t.Errorf("DecodeTime(%s) = %v, %v", raw, got, err)
		}
	}
	if _, err := invocation.DecodeTime(json.RawMessage(`"yesterday"`)); err == nil {
		t.Error("DecodeTime(yesterday) succeeded")
	}
}

// FuzzDecode: no payload crashes the decoder, and the host's encoding of any
// string decodes back to that string.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "*.json"))
	for _, file := range files {
		data, _ := os.ReadFile(file)
		f.Add(data, "seed")
	}
	f.Add([]byte(`{"Data":{"message":"[1,2]"},"Metadata":{"MessageIdArray":"[\"a\"]"}}`), `"quoted"`)
	f.Fuzz(func(t *testing.T, payload []byte, s string) {
		if r, err := invocation.Parse(payload); err == nil {
			if msgs, err := r.ServiceBusMessages("message"); err == nil && len(msgs) == 0 && !strings.Contains(string(payload), "Array") {
				t.Fatalf("a single-message payload decoded to no message")
			}
			_, _ = r.HTTPRequest("req")
		}
		if !utf8.ValidString(s) {
			return // JSON cannot carry it: the host never sends it
		}
		once, _ := json.Marshal(s)
		twice, _ := json.Marshal(string(once))
		if strings.HasPrefix(strings.TrimSpace(s), `"`) {
			return // a string that is itself a JSON string literal is ambiguous by design
		}
		got, err := invocation.DecodeString(twice)
		if err != nil || got != s {
			t.Fatalf("DecodeString(host encoding of %q) = %q, %v", s, got, err)
		}
	})
}
