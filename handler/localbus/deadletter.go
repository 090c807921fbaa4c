package localbus

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/replay"
)

// DeadLetterPath lists a queue's dead letters (GET); DELETE …/{sequenceNumber} completes one.
func DeadLetterPath(queue string) string {
	return "/devhost/queues/" + url.PathEscape(queue) + "/deadletter"
}

// WireDeadLetter is a dead letter as the emulator lists it.
type WireDeadLetter struct {
	SequenceNumber        int64          `json:"sequenceNumber"`
	MessageID             string         `json:"messageId"`
	SessionID             string         `json:"sessionId,omitempty"`
	ContentType           string         `json:"contentType,omitempty"`
	ApplicationProperties map[string]any `json:"applicationProperties,omitempty"`
	Body                  string         `json:"body"`
	DeliveryCount         int            `json:"deliveryCount"`
	DeadLetterReason      string         `json:"deadLetterReason"`
}

// DeadLetters reads the emulator's dead-letter sub-queue. The emulator does
// not lock dead letters: one DeadLetters serves one replay.
type DeadLetters struct {
	base   string
	queue  string
	client *http.Client
	done   bool
}

var _ replay.Source = (*DeadLetters)(nil)

// NewDeadLetters returns the dead letters of queue at addr (host:port).
func NewDeadLetters(addr, queue string) *DeadLetters {
	return &DeadLetters{base: "http://" + addr, queue: queue, client: &http.Client{}}
}

// Receive implements replay.Source: every dead letter at the first call.
func (d *DeadLetters) Receive(ctx context.Context, _ int) ([]replay.DeadLetter, error) {
	if d.done {
		return nil, nil
	}
	d.done = true
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.base+DeadLetterPath(d.queue), nil)
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, fault.Wrap(fault.Unavailable, err, "read dead letters from the local queue emulation")
	}
	defer resp.Body.Close()
	var wire []WireDeadLetter
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&wire) != nil {
		return nil, fault.Errorf(fault.Unavailable, "local queue emulation answered %s", resp.Status)
	}
	out := make([]replay.DeadLetter, len(wire))
	for i, w := range wire {
		out[i] = replay.DeadLetter{SequenceNumber: w.SequenceNumber, MessageID: w.MessageID, SessionID: w.SessionID,
			Properties: w.ApplicationProperties, Body: []byte(w.Body), Reason: w.DeadLetterReason}
	}
	return out, nil
}

// Complete implements replay.Source.
func (d *DeadLetters) Complete(ctx context.Context, m replay.DeadLetter) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, d.base+DeadLetterPath(d.queue)+"/"+strconv.FormatInt(m.SequenceNumber, 10), nil)
	resp, err := d.client.Do(req)
	if err != nil {
		return fault.Wrap(fault.Unavailable, err, "complete a dead letter in the local queue emulation")
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fault.Errorf(fault.Unavailable, "completing dead letter %d: %s", m.SequenceNumber, resp.Status)
	}
	return nil
}

// Abandon implements replay.Source (nothing is locked).
func (d *DeadLetters) Abandon(context.Context, replay.DeadLetter) error { return nil }

// Close implements the source life cycle.
func (d *DeadLetters) Close(context.Context) error { return nil }
