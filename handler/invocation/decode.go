// Package invocation decodes the payloads the Azure Functions host sends to a
// custom handler and defines the response it expects (see docs/host-contract.md).
//
// The host encodes every metadata value by its .NET type: strings are
// JSON-encoded twice, integers arrive as JSON strings, batch values as a JSON
// string holding a JSON array, null values are omitted. Every decoder here also
// accepts the "clean" form (plain strings, plain numbers, real arrays) in case
// the host is ever fixed.
package invocation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Request is the body of POST /<FunctionName>.
type Request struct {
	Data     map[string]json.RawMessage `json:"Data"`
	Metadata map[string]json.RawMessage `json:"Metadata"`

	messages map[string][]Message // ServiceBusMessages' per binding
}

// Parse decodes an invocation body. It fails when the body is not a JSON
// object or has no Data object.
func Parse(body []byte) (*Request, error) {
	if r, ok := parseServiceBus(body); ok {
		return r, nil
	}
	return parse(body)
}

// parseServiceBus decodes a Service Bus invocation in one pass; ok is false
// for anything else (an HTTP envelope, or a body parse rejects with its
// reason). Where ok, its result is parse's.
func parseServiceBus(body []byte) (r *Request, ok bool) {
	var sb struct {
		Data     map[string]json.RawMessage `json:"Data"`
		Metadata *serviceBusMetadata        `json:"Metadata"`
	}
	if json.Unmarshal(body, &sb) != nil || sb.Data == nil || sb.Metadata == nil || !sb.Metadata.isServiceBus() {
		return nil, false
	}
	return &Request{Data: sb.Data, Metadata: sb.Metadata.keys()}, true
}

// parse decodes any invocation body in two passes: the envelope, then the
// Metadata.
func parse(body []byte) (*Request, error) {
	var wire struct {
		Data     map[string]json.RawMessage `json:"Data"`
		Metadata json.RawMessage            `json:"Metadata"`
	}
	if err := json.Unmarshal(body, &wire); err != nil {
		return nil, fmt.Errorf("invocation body is not a JSON object with Data and Metadata: %w", err)
	}
	if wire.Data == nil {
		return nil, errors.New("invocation body has no Data object")
	}
	r := &Request{Data: wire.Data}
	var err error
	if r.Metadata, err = decodeMetadata(wire.Metadata); err != nil {
		return nil, fmt.Errorf("invocation Metadata: %w", err)
	}
	return r, nil
}

// serviceBusMetadata are the keys a Service Bus trigger's Metadata carries
// that the handler reads (json matches them case-insensitively, as the
// host's injection is). Decoding only these skips the twenty others, which
// was most of the cost of an invocation's decoding.
type serviceBusMetadata struct {
	SessionId, MessageId, DeliveryCount, ApplicationProperties, UserProperties                          json.RawMessage
	SessionIdArray, MessageIdArray, DeliveryCountArray, ApplicationPropertiesArray, UserPropertiesArray json.RawMessage
	EnqueuedTimeUtc, EnqueuedTimeUtcArray                                                               json.RawMessage // critical time only
}

// decodeMetadata returns the Metadata's keys: only those above for a Service
// Bus invocation (it has a MessageId or MessageIdArray), all of them otherwise
// (HTTP envelopes carry route parameters there).
func decodeMetadata(raw json.RawMessage) (map[string]json.RawMessage, error) {
	md := map[string]json.RawMessage{}
	if isNull(raw) {
		return md, nil
	}
	var sb serviceBusMetadata
	if err := json.Unmarshal(raw, &sb); err != nil {
		return nil, err
	}
	if !sb.isServiceBus() {
		return md, json.Unmarshal(raw, &md)
	}
	return sb.keys(), nil
}

func (sb *serviceBusMetadata) isServiceBus() bool {
	return !isNull(sb.MessageId) || !isNull(sb.MessageIdArray)
}

// keys returns the keys present.
func (sb *serviceBusMetadata) keys() map[string]json.RawMessage {
	md := make(map[string]json.RawMessage, 12)
	for k, v := range map[string]json.RawMessage{
		"SessionId": sb.SessionId, "MessageId": sb.MessageId, "DeliveryCount": sb.DeliveryCount,
		"ApplicationProperties": sb.ApplicationProperties, "UserProperties": sb.UserProperties,
		"SessionIdArray": sb.SessionIdArray, "MessageIdArray": sb.MessageIdArray, "DeliveryCountArray": sb.DeliveryCountArray,
		"ApplicationPropertiesArray": sb.ApplicationPropertiesArray, "UserPropertiesArray": sb.UserPropertiesArray,
		"EnqueuedTimeUtc": sb.EnqueuedTimeUtc, "EnqueuedTimeUtcArray": sb.EnqueuedTimeUtcArray,
	} {
		if v != nil {
			md[k] = v
		}
	}
	return md
}

// MetadataString returns the metadata string under key; ok is false when the
// host omitted it (null).
func (r *Request) MetadataString(key string) (s string, ok bool, err error) {
	raw, ok := lookup(r.Metadata, key)
	if !ok {
		return "", false, nil
	}
	s, err = DecodeString(raw)
	if err != nil {
		return "", true, fmt.Errorf("metadata %s: %w", key, err)
	}
	return s, true, nil
}

// lookup finds key exactly, then case-insensitively (the host's body-property
// injection is case-insensitive, and so are .NET dictionary lookups there).
func lookup(m map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	if raw, ok := m[key]; ok && !isNull(raw) {
		return raw, true
	}
	for k, raw := range m {
		if strings.EqualFold(k, key) && !isNull(raw) {
			return raw, true
		}
	}
	return nil, false
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// DecodeString decodes a host-encoded string: "\"x\"" (double-encoded) and
// "x" (clean) both give x. A JSON object, array, number or boolean is returned
// as its JSON text, so a message body sent as a real object also works.
func DecodeString(raw json.RawMessage) (string, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return "", errors.New("value is null")
	}
	if t[0] != '"' {
		if !json.Valid(t) {
			return "", errors.New("value is not valid JSON")
		}
		return string(t), nil
	}
	var once string
	if err := json.Unmarshal(t, &once); err != nil {
		return "", fmt.Errorf("value is not a JSON string: %w", err)
	}
	if inner := strings.TrimSpace(once); strings.HasPrefix(inner, `"`) {
		var twice string
		if json.Unmarshal([]byte(inner), &twice) == nil {
			return twice, nil
		}
	}
	return once, nil
}

// DecodeInt decodes a host-encoded integer: "17" (the host's form), 17 (clean)
// or "\"17\"".
func DecodeInt(raw json.RawMessage) (int64, error) {
	s, err := DecodeString(raw)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", s)
	}
	return n, nil
}

// DecodeBool decodes true/false sent as a JSON boolean or as a string.
func DecodeBool(raw json.RawMessage) (bool, error) {
	s, err := DecodeString(raw)
	if err != nil {
		return false, err
	}
	b, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return false, fmt.Errorf("%q is not a boolean", s)
	}
	return b, nil
}

// Times come as DateTime without zone (…Utc keys, UTC by definition), as
// DateTimeOffset with +00:00, or in full precision in batch arrays.
var timeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05.9999999", "2006-01-02T15:04:05"}

// DecodeTime decodes a host-encoded date; a time without zone is UTC.
func DecodeTime(raw json.RawMessage) (time.Time, error) {
	s, err := DecodeString(raw)
	if err != nil {
		return time.Time{}, err
	}
	s = strings.TrimSpace(s)
	for _, layout := range timeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a date-time", s)
}

// DecodeArray decodes a batch value: a JSON string holding a JSON array (the
// host's form) or a real JSON array (clean).
func DecodeArray(raw json.RawMessage) ([]json.RawMessage, error) {
	t := bytes.TrimSpace(raw)
	if len(t) > 0 && t[0] != '[' {
		s, err := DecodeString(t)
		if err != nil {
			return nil, err
		}
		t = []byte(strings.TrimSpace(s))
	}
	var items []json.RawMessage
	if err := json.Unmarshal(t, &items); err != nil {
		return nil, errors.New("value is not a JSON array")
	}
	return items, nil
}

// DecodeObject decodes an object sent as a real JSON object or as a string
// holding one.
func DecodeObject(raw json.RawMessage) (map[string]json.RawMessage, error) {
	t := bytes.TrimSpace(raw)
	if len(t) > 0 && t[0] == '"' {
		s, err := DecodeString(t)
		if err != nil {
			return nil, err
		}
		t = []byte(s)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(t, &m); err != nil || m == nil {
		return nil, errors.New("value is not a JSON object")
	}
	return m, nil
}
