// Package localbus is the development transport from the handler to
// convoy-devhost's Service Bus queue emulation (ServiceBusConnection =
// local://127.0.0.1:<port>). It is never used in Azure: settings refuse
// local:// there, and the publisher uses azservicebus.
package localbus

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
)

// WireMessage is a message as the emulator's HTTP API carries it.
type WireMessage struct {
	MessageID             string         `json:"messageId"`
	SessionID             string         `json:"sessionId,omitempty"`
	ContentType           string         `json:"contentType,omitempty"`
	ApplicationProperties map[string]any `json:"applicationProperties,omitempty"`
	Body                  string         `json:"body"`
}

// SendResult is the emulator's answer to a send.
type SendResult struct {
	Accepted   int `json:"accepted"`
	Duplicates int `json:"duplicates"`
}

// MessagesPath is where a queue's messages are sent: POST a JSON array of WireMessage.
func MessagesPath(queue string) string {
	return "/devhost/queues/" + url.PathEscape(queue) + "/messages"
}

// MaxBatchBytes is the batch size the emulator accepts, as on the Standard tier.
const MaxBatchBytes = 256 << 10

// Sender sends to one emulated queue.
type Sender struct {
	url    string
	client *http.Client
}

var _ convoy.Sender = (*Sender)(nil)

// NewSender returns a Sender for queue at addr (host:port).
func NewSender(addr, queue string) *Sender {
	return &Sender{url: "http://" + addr + MessagesPath(queue), client: &http.Client{Timeout: 30 * time.Second}}
}

// Close implements the sender life cycle (nothing to release).
func (s *Sender) Close(context.Context) error { return nil }

// NewBatch implements convoy.Sender.
func (s *Sender) NewBatch(context.Context) (convoy.Batch, error) { return &batch{}, nil }

// SendBatch implements convoy.Sender.
func (s *Sender) SendBatch(ctx context.Context, b convoy.Batch) error {
	return s.post(ctx, b.(*batch).msgs)
}

// SendLedger sends a ledger document, with its id as MessageId and its
// stream as SessionId.
func (s *Sender) SendLedger(ctx context.Context, ledgerID, stream string, doc []byte) error {
	if len(doc) > MaxBatchBytes {
		return fault.Errorf(fault.TooLarge, "ledger %q (%d bytes) is larger than a message may be: upload it over HTTP or publish it with --direct", ledgerID, len(doc))
	}
	return s.post(ctx, []WireMessage{{MessageID: ledgerID, SessionID: stream, ContentType: convoy.ContentType, Body: string(doc)}})
}

func (s *Sender) post(ctx context.Context, msgs []WireMessage) error {
	body, err := json.Marshal(msgs)
	if err != nil {
		return fault.Wrap(fault.Internal, err, "encode messages")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return fault.Wrap(fault.Internal, err, "build request")
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return fault.Wrap(fault.Unavailable, err, "send to the local queue emulation")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		text, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fault.Errorf(fault.Unavailable, "local queue emulation answered %d: %s", resp.StatusCode, bytes.TrimSpace(text))
	}
	return nil
}

// ToWire is the order message as the emulator carries it.
func ToWire(m convoy.OrderMessage) WireMessage {
	return WireMessage{MessageID: m.MessageID, SessionID: m.SessionID, ContentType: convoy.ContentType, ApplicationProperties: m.Properties(), Body: string(m.Body)}
}

// batch counts bytes exactly as azservicebus does (convoy.OrderMessage's
// sizes), so that what fits here fits a real queue of the same limit.
type batch struct {
	msgs  []WireMessage
	bytes int
}

func (b *batch) Add(m convoy.OrderMessage) error {
	size := m.PayloadBytes()
	if len(b.msgs) == 0 {
		size += m.EnvelopeBytes()
	}
	if b.bytes+size > MaxBatchBytes {
		return convoy.ErrBatchFull
	}
	b.msgs = append(b.msgs, ToWire(m))
	b.bytes += size
	return nil
}

func (b *batch) Len() int { return len(b.msgs) }

// Describe names the transport in logs.
func Describe(addr string) string {
	return fmt.Sprintf("local queue emulation at %s (development only)", addr)
}
