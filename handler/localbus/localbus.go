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
	"github.com/convoy-dev/convoy/handler/ledger"
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

var _ ledger.Sender = (*Sender)(nil)

// NewSender returns a Sender for queue at addr (host:port).
func NewSender(addr, queue string) *Sender {
	return &Sender{url: "http://" + addr + MessagesPath(queue), client: &http.Client{Timeout: 30 * time.Second}}
}

// Close implements the sender life cycle (nothing to release).
func (s *Sender) Close(context.Context) error { return nil }

// NewBatch implements ledger.Sender.
func (s *Sender) NewBatch(context.Context) (ledger.Batch, error) { return &batch{}, nil }

// SendBatch implements ledger.Sender.
func (s *Sender) SendBatch(ctx context.Context, b ledger.Batch) error {
	return s.post(ctx, b.(*batch).msgs)
}

// SendLedger sends a ledger document, with its id as MessageId.
func (s *Sender) SendLedger(ctx context.Context, ledgerID string, doc []byte) error {
	if len(doc) > MaxBatchBytes {
		return fault.Errorf(fault.TooLarge, "ledger %q (%d bytes) is larger than a message may be: upload it over HTTP or publish it with --direct", ledgerID, len(doc))
	}
	return s.post(ctx, []WireMessage{{MessageID: ledgerID, ContentType: convoy.ContentType, Body: string(doc)}})
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

// ToWire is the order message format as the emulator carries it.
func ToWire(m ledger.Message) WireMessage {
	props := map[string]any{convoy.PropLedgerID: m.LedgerID, convoy.PropSeq: m.Seq}
	if m.Last {
		props[convoy.PropLast] = true
	}
	return WireMessage{MessageID: m.MessageID, SessionID: m.SessionID, ContentType: convoy.ContentType, ApplicationProperties: props, Body: string(m.Body)}
}

type batch struct {
	msgs  []WireMessage
	bytes int
}

func (b *batch) Add(m ledger.Message) error {
	size := len(m.Body) + len(m.MessageID) + len(m.SessionID) + len(m.LedgerID) + 96
	if b.bytes+size > MaxBatchBytes {
		return ledger.ErrBatchFull
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
