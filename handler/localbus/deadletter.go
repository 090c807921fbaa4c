package localbus

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/replay"
)

// DeadLetterPath is a queue's dead-letter sub-queue in the emulation: GET
// peeks (?from=S&max=N, no lock), POST …/receive?max=N locks up to N, DELETE
// …/{sequenceNumber}?lockToken=T completes one, POST …/{sequenceNumber}/abandon?lockToken=T
// releases one. It behaves as azservicebus's dead-letter receiver in
// peek-lock mode (see devhost.Queue.ReceiveDeadLetters).
func DeadLetterPath(queue string) string {
	return "/devhost/queues/" + url.PathEscape(queue) + "/deadletter"
}

// WireDeadLetter is a dead letter as the emulator lists it; LockToken and
// LockedUntil are set on received (locked) ones only.
type WireDeadLetter struct {
	SequenceNumber        int64          `json:"sequenceNumber"`
	MessageID             string         `json:"messageId"`
	SessionID             string         `json:"sessionId,omitempty"`
	ContentType           string         `json:"contentType,omitempty"`
	ApplicationProperties map[string]any `json:"applicationProperties,omitempty"`
	Body                  string         `json:"body"`
	DeliveryCount         int            `json:"deliveryCount"`
	DeadLetterReason      string         `json:"deadLetterReason"`
	LockToken             string         `json:"lockToken,omitempty"`
	LockedUntil           string         `json:"lockedUntil,omitempty"`
}

// DeadLetters reads the emulator's dead-letter sub-queue with peek-lock, like
// servicebus.DeadLetters: what it receives stays locked for the queue's lock
// duration unless completed or abandoned.
type DeadLetters struct {
	base   string
	queue  string
	client *http.Client
}

var _ replay.Source = (*DeadLetters)(nil)

// NewDeadLetters returns the dead letters of queue at addr (host:port).
func NewDeadLetters(addr, queue string) *DeadLetters {
	return &DeadLetters{base: "http://" + addr, queue: queue, client: &http.Client{Timeout: 30 * time.Second}}
}

// Receive implements replay.Source: up to max dead letters that no receiver
// holds, locked; none when there is none.
func (d *DeadLetters) Receive(ctx context.Context, max int) ([]replay.DeadLetter, error) {
	return d.list(ctx, http.MethodPost, fmt.Sprintf("%s/receive?max=%d", DeadLetterPath(d.queue), max))
}

// Peek implements replay.Source: up to max dead letters from sequence
// number from on, locked or not, without locking them.
func (d *DeadLetters) Peek(ctx context.Context, from int64, max int) ([]replay.DeadLetter, error) {
	return d.list(ctx, http.MethodGet, fmt.Sprintf("%s?from=%d&max=%d", DeadLetterPath(d.queue), from, max))
}

func (d *DeadLetters) list(ctx context.Context, method, path string) ([]replay.DeadLetter, error) {
	req, err := http.NewRequestWithContext(ctx, method, d.base+path, nil)
	if err != nil {
		return nil, fault.Wrap(fault.Internal, err, "build request")
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, fault.Wrap(fault.Unavailable, err, "read dead letters from the local queue emulation")
	}
	defer resp.Body.Close()
	var wire []WireDeadLetter
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&wire) != nil {
		return nil, fault.Errorf(fault.Unavailable, "local queue emulation answered %s to %s %s", resp.Status, method, path)
	}
	out := make([]replay.DeadLetter, len(wire))
	for i, w := range wire {
		out[i] = replay.DeadLetter{SequenceNumber: w.SequenceNumber, MessageID: w.MessageID, SessionID: w.SessionID,
			Properties: w.ApplicationProperties, Body: []byte(w.Body), Reason: w.DeadLetterReason, Handle: w.LockToken}
	}
	return out, nil
}

// Complete implements replay.Source; a lost lock is a transient fault.
func (d *DeadLetters) Complete(ctx context.Context, m replay.DeadLetter) error {
	return d.settle(ctx, http.MethodDelete, "", m)
}

// Abandon implements replay.Source.
func (d *DeadLetters) Abandon(ctx context.Context, m replay.DeadLetter) error {
	return d.settle(ctx, http.MethodPost, "/abandon", m)
}

func (d *DeadLetters) settle(ctx context.Context, method, suffix string, m replay.DeadLetter) error {
	token, _ := m.Handle.(string)
	u := d.base + DeadLetterPath(d.queue) + "/" + strconv.FormatInt(m.SequenceNumber, 10) + suffix + "?lockToken=" + url.QueryEscape(token)
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return fault.Wrap(fault.Internal, err, "build request")
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return fault.Wrap(fault.Unavailable, err, "settle a dead letter in the local queue emulation")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		text, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fault.Errorf(fault.Unavailable, "settling dead letter %d: %s %s", m.SequenceNumber, resp.Status, text)
	}
	return nil
}

// Close implements the source life cycle; locks still held expire.
func (d *DeadLetters) Close(context.Context) error { return nil }
