package devhost

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/internal/devbus"
)

// Body-property injection as the host does it (docs/host-contract.md; the host's
// Utility.ApplyBindingData): expectations written from the contract's
// examples, not from the encoder.
func TestBodyPropertyInjection(t *testing.T) {
	t.Parallel()
	f := Function{Name: "Fn", Trigger: Binding{Name: "message", IsSessionsEnabled: true}}
	metadata := func(body string) map[string]json.RawMessage {
		m := &devbus.Message{MessageID: "m-1", SessionID: "o-1", SequenceNumber: 7, DeliveryCount: 1, Body: []byte(body)}
		var inv struct{ Data, Metadata map[string]json.RawMessage }
		if err := json.Unmarshal(EncodeInvocation(f, []*devbus.Message{m}, time.Now()), &inv); err != nil {
			t.Fatal(err)
		}
		if got, want := string(inv.Data["message"]), string(netString(body)); got != want {
			t.Errorf("Data.message = %s, want %s", got, want)
		}
		return inv.Metadata
	}
	body := `{"sessionId":"o-9","Count":5,"ratio":1.5,"ok":true,"when":"2024-04-06T15:30:00Z","list":[1,2],"gone":null,` +
		`"transaction":{ "orderId" : "o-1" },"myTrigger":"x"}`
	md := metadata(body)
	want := map[string]string{
		"sessionId":      `"\"o-9\""`,                 // replaces SessionId, keeps the body's spelling
		"Count":          `"\"5\""`,                   // numbers become strings, double-encoded
		"ratio":          `"\"1.5\""`,                 //
		"ok":             `"\"True\""`,                // .NET's bool.ToString()
		"when":           `"\"04/06/2024 15:30:00\""`, // Json.NET reads it as a DateTime; invariant culture
		"transaction":    `{"orderId":"o-1"}`,         // objects stay objects
		"MessageId":      `"\"m-1\""`,                 // untouched
		"SequenceNumber": `"7"`,                       // untouched
	}
	for k, v := range want {
		if string(md[k]) != v {
			t.Errorf("Metadata[%s] = %s, want %s", k, md[k], v)
		}
	}
	for _, absent := range []string{"SessionId", "list", "gone", "myTrigger"} {
		if _, ok := md[absent]; ok {
			t.Errorf("Metadata[%s] is present: %s", absent, md[absent])
		}
	}
	plain := len(metadata(`{}`))
	for _, notObject := range []string{`[{"SessionId":"x"}]`, `not json`, `"text"`} {
		if md := metadata(notObject); len(md) != plain || string(md["SessionId"]) != `"\"o-1\""` {
			t.Errorf("a body %s that is not a JSON object was injected: %d keys, SessionId %s", notObject, len(md), md["SessionId"])
		}
	}
}

// Batch values: JSON strings holding arrays; times without zone, full
// precision, trailing zeros trimmed; the four action objects.
func TestBatchEncoding(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 1, 15, 10, 20, 30, 120_000_000, time.UTC)
	msgs := []*devbus.Message{
		{MessageID: "a", SessionID: "s", SequenceNumber: 17, DeliveryCount: 1, EnqueuedTime: at, Body: []byte(`{"x":1}`)},
		{MessageID: "b", SessionID: "s", SequenceNumber: 18, DeliveryCount: 2, EnqueuedTime: at.Add(time.Second - 120_000_000), Body: []byte(`{"x":2}`)},
	}
	f := Function{Name: "Fn", Trigger: Binding{Name: "message", IsSessionsEnabled: true, Cardinality: "many", DataType: "string"}}
	var inv struct{ Data, Metadata map[string]json.RawMessage }
	if err := json.Unmarshal(EncodeInvocation(f, msgs, at), &inv); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"EnqueuedTimeUtcArray": `"[\"2025-01-15T10:20:30.12\",\"2025-01-15T10:20:31\"]"`,
		"SequenceNumberArray":  `"[17,18]"`,
		"DeliveryCountArray":   `"[1,2]"`,
		"MessageIdArray":       `"[\"a\",\"b\"]"`,
	} {
		if got := string(inv.Metadata[key]); got != want {
			t.Errorf("%s = %s, want %s", key, got, want)
		}
	}
	for _, key := range []string{"MessageActions", "SessionActions", "MessageSession", "MessageReceiver"} {
		if v := strings.TrimSpace(string(inv.Metadata[key])); !strings.HasPrefix(v, "{") {
			t.Errorf("%s = %s, want an object", key, v)
		}
	}
	if got := string(inv.Data["message"]); got != `"[\"{\\\"x\\\":1}\",\"{\\\"x\\\":2}\"]"` {
		t.Errorf("Data.message = %s", got)
	}
}

// The invocation is written without encoding/json on its hot path; these
// hold it to what encoding/json writes for the same values.
func FuzzEncodingAsJSONMarshal(f *testing.F) {
	for _, s := range []string{"", "o-1", `{"transaction":{"op":"CreateOrder"}}`, "a\"b\\c", "<&>", "é\u2028", "\x00\x7f", "\xff"} {
		f.Add(s, "k")
	}
	f.Fuzz(func(t *testing.T, s, key string) {
		once, _ := json.Marshal(s)
		twice, _ := json.Marshal(string(once))
		if got := netString(s); !bytes.Equal(got, twice) {
			t.Fatalf("netString(%q) = %s, want %s", s, got, twice)
		}
		m := map[string]json.RawMessage{key: netString(s), "SequenceNumber": netInt(int64(len(s))), "z": emptyObject}
		var got, want map[string]any // the same members, in any order
		if err := json.Unmarshal(appendObject(nil, m), &got); err != nil {
			t.Fatalf("appendObject wrote no JSON object: %v", err)
		}
		marshalled, _ := json.Marshal(m)
		_ = json.Unmarshal(marshalled, &want)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("appendObject = %v, want %v", got, want)
		}
	})
}

func TestTimesAsJSONMarshal(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 1, 15, 10, 20, 30, 120_000_000, time.FixedZone("x", 3600))
	for got, want := range map[string]string{
		string(netUTC(at)):      `"2025-01-15T09:20:30"`,
		string(netOffset(at)):   `"2025-01-15T09:20:30+00:00"`,
		string(netInt(-17)):     `"-17"`,
		string(sessionLock(at)): `{"SessionLockedUntil":"2025-01-15T09:21:30+00:00"}`,
	} {
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
}
