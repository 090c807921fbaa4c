package devhost

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/convoy-dev/convoy/handler/internal/devbus"
)

// The host's encoding of .NET values (docs/host-contract.md), written here
// independently of the handler's decoder.

// netString: a string is JSON-encoded again, as a JSON string.
func netString(s string) json.RawMessage { return appendNetString(nil, s) }

// netInt: an integer arrives as a JSON string holding the number.
func netInt(n int64) json.RawMessage {
	b := append(make([]byte, 0, 24), '"')
	return append(strconv.AppendInt(b, n, 10), '"')
}

// netUTC: a DateTime (…Utc keys): no zone, no fraction.
func netUTC(t time.Time) json.RawMessage {
	b := append(make([]byte, 0, 24), '"')
	return append(t.UTC().AppendFormat(b, "2006-01-02T15:04:05"), '"')
}

// netOffset: a DateTimeOffset: +00:00, no fraction.
func netOffset(t time.Time) json.RawMessage {
	b := append(make([]byte, 0, 32), '"')
	return append(t.UTC().AppendFormat(b, "2006-01-02T15:04:05"), "+00:00\""...)
}

// appendString appends s as a JSON string exactly as json.Marshal writes
// it: printable ASCII is written here (every invocation's metadata, so it
// stays cheap), anything else goes through json.Marshal.
func appendString[T string | []byte](dst []byte, s T) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(string(s))
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			dst = append(dst, '\\')
		}
		dst = append(dst, s[i])
	}
	return append(dst, '"')
}

// appendObject appends an object of JSON values (compact, as every value
// here is), in the map's order: the host's order is its own, and a handler
// must not depend on it.
func appendObject(dst []byte, m map[string]json.RawMessage) []byte {
	dst = append(dst, '{')
	first := true
	for k, v := range m {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(appendString(dst, k), ':')
		dst = append(dst, v...)
	}
	return append(dst, '}')
}

// netArray: every batch value is a JSON string holding a JSON array.
func netArray(values any) json.RawMessage {
	inner, _ := json.Marshal(values)
	b, _ := json.Marshal(string(inner))
	return b
}

func raw(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// EncodeInvocation returns the body the host POSTs to /<f.Name> to deliver
// msgs to a Service Bus trigger (msgs[0] alone unless f takes batches), at now.
func EncodeInvocation(f Function, msgs []*devbus.Message, now time.Time) []byte {
	if !f.batch() {
		return serviceBusSingle(f.Name, f.Trigger.Name, msgs[0], f.Trigger.IsSessionsEnabled, now)
	}
	inv := serviceBusBatch(f.Name, f.Trigger.Name, msgs, now)
	body := append(make([]byte, 0, 4096), `{"Data":`...)
	body = appendObject(body, inv.Data)
	body = append(body, `,"Metadata":`...)
	body = appendObject(body, inv.Metadata)
	return append(body, '}')
}

// invocation is the body of POST /<FunctionName>.
type invocation struct {
	Data     map[string]json.RawMessage `json:"Data"`
	Metadata map[string]json.RawMessage `json:"Metadata"`
}

func sysMetadata(fn string, now time.Time) json.RawMessage {
	return appendObject(nil, map[string]json.RawMessage{"MethodName": appendString(nil, fn),
		"UtcNow": appendString(nil, now.UTC().Format("2006-01-02T15:04:05.0000000Z")), "RandGuid": appendString(nil, uuid.NewString())})
}

// sessionLock is the session actions object: the lock's expiry as a DateTimeOffset.
func sessionLock(now time.Time) json.RawMessage {
	return append(append([]byte(`{"SessionLockedUntil":`), netOffset(now.Add(time.Minute))...), '}')
}

// The metadata objects that carry nothing a handler can use.
var (
	emptyObject  = json.RawMessage(`{}`)
	singleClient = raw(map[string]any{"FullyQualifiedNamespace": "localhost", "IsClosed": false, "Identifier": "devhost"})
	batchClient  = raw(map[string]any{"FullyQualifiedNamespace": "localhost", "IsClosed": false})
)

// serviceBusSingle encodes one message for a "cardinality": "one" trigger,
// writing the body straight out (it is built for every delivery).
func serviceBusSingle(fn, binding string, m *devbus.Message, sessions bool, now time.Time) []byte {
	w := metadataWriter{b: make([]byte, 0, 1536+3*len(m.Body)), injected: bodyProperties(m.Body)}
	w.b = append(w.b, `{"Data":{`...)
	w.b = append(appendString(w.b, binding), ':')
	w.b = appendNetString(w.b, m.Body)
	w.b = append(w.b, `},"Metadata":{`...)
	for _, k := range []string{"MessageReceiver", "MessageActions", "ReceiveActions"} {
		w.raw(k, emptyObject)
	}
	w.raw("Client", singleClient)
	w.raw("EnqueuedTimeUtc", netUTC(m.EnqueuedTime))
	w.raw("EnqueuedTime", netOffset(m.EnqueuedTime))
	w.raw("ExpiresAtUtc", netUTC(m.EnqueuedTime.Add(time.Hour)))
	w.raw("ExpiresAt", netOffset(m.EnqueuedTime.Add(time.Hour)))
	w.raw("SequenceNumber", netInt(m.SequenceNumber))
	w.raw("DeliveryCount", netInt(int64(m.DeliveryCount)))
	w.raw("LockToken", netString(uuid.NewString()))
	w.raw("sys", sysMetadata(fn, now))
	p := m.PropertiesJSON()
	w.raw("ApplicationProperties", p)
	w.raw("UserProperties", p)
	for _, kv := range [][2]string{{"MessageId", m.MessageID}, {"ContentType", m.ContentType}, {"SessionId", m.SessionID}} {
		if kv[1] != "" { // null values are omitted
			w.raw(kv[0], netString(kv[1]))
		}
	}
	if sessions {
		lock := sessionLock(now)
		w.raw("SessionActions", lock)
		w.raw("MessageSession", lock)
	}
	for k, v := range w.injected {
		w.member(k)
		w.b = append(w.b, v...)
	}
	return append(w.b, "}}"...)
}

// metadataWriter writes Metadata's members; a member whose key a body
// property replaces (case-insensitively) is left out.
type metadataWriter struct {
	b        []byte
	members  int
	injected map[string]json.RawMessage
}

func (w *metadataWriter) raw(key string, v json.RawMessage) {
	for k := range w.injected {
		if strings.EqualFold(k, key) {
			return
		}
	}
	w.member(key)
	w.b = append(w.b, v...)
}

func (w *metadataWriter) member(key string) {
	if w.members > 0 {
		w.b = append(w.b, ',')
	}
	w.members++
	w.b = append(appendString(w.b, key), ':')
}

// appendNetString appends s JSON-encoded twice (netString).
func appendNetString[T string | []byte](dst []byte, s T) []byte {
	return appendString(dst, appendString(make([]byte, 0, len(s)+8), s))
}

// bodyProperties are the top-level properties of a JSON object body that
// the host copies into Metadata (Utility.ApplyBindingData,
// docs/host-contract.md), as it passes them on: only for a body that is a
// JSON object; arrays skipped, nulls ignored, objects kept as objects,
// anything else turned into its invariant .NET string (numbers as written,
// booleans True/False, ISO dates as MM/dd/yyyy HH:mm:ss) and then
// double-encoded like every string; the key keeps the body's spelling and
// case-insensitively replaces real metadata (and, of two body keys equal
// but for case, one is kept).
func bodyProperties(body []byte) map[string]json.RawMessage {
	var obj map[string]json.RawMessage
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &obj) != nil {
		return nil
	}
	out := make(map[string]json.RawMessage, len(obj))
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		v := bytes.TrimSpace(obj[k])
		// The host also leaves out of Metadata every key ending in "trigger".
		if len(v) == 0 || v[0] == '[' || string(v) == "null" || strings.HasSuffix(strings.ToLower(k), "trigger") {
			continue
		}
		for existing := range out {
			if strings.EqualFold(existing, k) {
				delete(out, existing)
			}
		}
		out[k] = netValue(v)
	}
	return out
}

// netValue is a JSON token as the host passes a body property on.
func netValue(v json.RawMessage) json.RawMessage {
	switch {
	case v[0] == '{':
		var compact bytes.Buffer
		_ = json.Compact(&compact, v) // a value of a body that decoded: valid
		return compact.Bytes()
	case v[0] == '"':
		var s string
		_ = json.Unmarshal(v, &s)
		if t, ok := jsonNetDate(s); ok {
			s = t.Format("01/02/2006 15:04:05")
		}
		return netString(s)
	case string(v) == "true":
		return netString("True")
	case string(v) == "false":
		return netString("False")
	}
	return netString(string(v)) // a number, as written
}

// jsonNetDate: Json.NET reads ISO 8601 date strings as DateTime (its default
// DateParseHandling); the host's machine runs in UTC.
func jsonNetDate(s string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.9999999", "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// netBatchTime: batch times are DateTime in full precision, without zone,
// trailing zeros of the fraction trimmed.
func netBatchTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.9999999")
}

// serviceBusBatch encodes messages of one session for "cardinality": "many".
func serviceBusBatch(fn, binding string, msgs []*devbus.Message, now time.Time) invocation {
	bodies := make([]string, len(msgs))
	var sessionIDs, messageIDs, contentTypes, enqueued []string
	var seqs, deliveries []int64
	var props []map[string]any
	for i, m := range msgs {
		bodies[i] = string(m.Body)
		sessionIDs = append(sessionIDs, m.SessionID)
		messageIDs = append(messageIDs, m.MessageID)
		contentTypes = append(contentTypes, m.ContentType)
		enqueued = append(enqueued, netBatchTime(m.EnqueuedTime))
		seqs = append(seqs, m.SequenceNumber)
		deliveries = append(deliveries, int64(m.DeliveryCount))
		p := m.Properties
		if p == nil {
			p = map[string]any{}
		}
		props = append(props, p)
	}
	md := map[string]json.RawMessage{
		"SessionIdArray":             netArray(sessionIDs),
		"MessageIdArray":             netArray(messageIDs),
		"ContentTypeArray":           netArray(contentTypes),
		"SequenceNumberArray":        netArray(seqs),
		"DeliveryCountArray":         netArray(deliveries),
		"EnqueuedTimeUtcArray":       netArray(enqueued),
		"ApplicationPropertiesArray": netArray(props),
		"UserPropertiesArray":        netArray(props),
		"MessageReceiver":            emptyObject,
		"ReceiveActions":             emptyObject,
		"MessageActions":             emptyObject,
		"SessionActions":             sessionLock(now),
		"MessageSession":             sessionLock(now),
		"Client":                     batchClient,
		"sys":                        sysMetadata(fn, now),
	}
	return invocation{Data: map[string]json.RawMessage{binding: netArray(bodies)}, Metadata: md}
}
