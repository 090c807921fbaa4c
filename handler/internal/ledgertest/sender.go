package ledgertest

import (
	"context"
	"sync"

	"github.com/convoy-dev/convoy/handler/convoy"
)

// Size is a message's size as sent alone (convoy.OrderMessage.Size, which
// the servicebus tests check against the SDK).
func Size(m convoy.Envelope) int { return m.Size() }

// Sender is an in-memory convoy.Sender that keeps every batch it was sent.
type Sender struct {
	MaxBatchBytes int // default 256 KiB, the Standard tier's limit
	// Fail, if set, is called before each operation ("batch", "send").
	Fail func(op string) error

	mu      sync.Mutex
	batches [][]convoy.Envelope
}

var _ convoy.Sender = (*Sender)(nil)

// NewBatch implements convoy.Sender.
func (s *Sender) NewBatch(context.Context) (convoy.Batch, error) {
	if s.Fail != nil {
		if err := s.Fail("batch"); err != nil {
			return nil, err
		}
	}
	limit := s.MaxBatchBytes
	if limit == 0 {
		limit = 256 << 10
	}
	return &Batch{limit: limit}, nil
}

// SendBatch implements convoy.Sender.
func (s *Sender) SendBatch(_ context.Context, b convoy.Batch) error {
	if s.Fail != nil {
		if err := s.Fail("send"); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches = append(s.batches, b.(*Batch).Messages)
	return nil
}

// Batches returns what was sent, batch by batch.
func (s *Sender) Batches() [][]convoy.Envelope {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]convoy.Envelope(nil), s.batches...)
}

// Messages returns every message sent, in order.
func (s *Sender) Messages() []convoy.Envelope {
	var all []convoy.Envelope
	for _, b := range s.Batches() {
		all = append(all, b...)
	}
	return all
}

// Batch is a Sender's batch.
type Batch struct {
	Messages []convoy.Envelope
	Bytes    int
	limit    int
}

// Add implements convoy.Batch, counting as azservicebus does: the first
// message's envelope once, then each message's payload.
func (b *Batch) Add(m convoy.Envelope) error {
	size := m.PayloadBytes()
	if len(b.Messages) == 0 {
		size += m.EnvelopeBytes()
	}
	if b.Bytes+size > b.limit {
		return convoy.ErrBatchFull
	}
	b.Messages = append(b.Messages, m)
	b.Bytes += size
	return nil
}

// Len implements convoy.Batch.
func (b *Batch) Len() int { return len(b.Messages) }
