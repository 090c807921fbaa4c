package amqp

import "fmt"

// Delivery is a complete message transfer.
type Delivery struct {
	ID      uint32
	Tag     []byte
	Format  uint32
	Settled bool
	Payload []byte
}

// partly is a delivery the client has begun and not finished (its
// transfers with more set); its buffer never grows past the link's limit.
// Once a frame would take it over, the buffer is freed and only the size
// is kept (over), until the delivery ends and is refused.
type partly struct {
	d    Delivery
	buf  []byte
	over bool
	size uint64 // when over: the bytes received so far
}

// add appends p, which the caller checked fits within limit.
func (pt *partly) add(p []byte, limit uint64) {
	need := len(pt.buf) + len(p)
	if need > cap(pt.buf) {
		n := max(2*cap(pt.buf), need, 4096)
		if uint64(n) > limit {
			n = int(limit) // ≥ need
		}
		grown := make([]byte, len(pt.buf), n)
		copy(grown, pt.buf)
		pt.buf = grown
	}
	pt.buf = append(pt.buf, p...)
}

// transfer takes a transfer frame of the client's, reassembling a delivery
// sent in several, and settles it with the handler's outcome.
func (s *session) transfer(p *Performative, payload []byte) error {
	c := s.c
	c.mu.Lock()
	l, err := s.link(p, transferHandle)
	if err == nil && l == nil {
		err = &Error{Condition: ErrInvalidField, Description: "transfer without a handle"}
	}
	if err != nil {
		c.mu.Unlock()
		return err
	}
	if !l.ClientSends {
		c.mu.Unlock()
		return &Error{Condition: "amqp:session:errant-link", Description: "transfer on a link the server sends on"}
	}
	s.inNext++
	if l.gone {
		// A link the server detached (or refused) and the client has not
		// yet: what it still sends on it is dropped.
		c.mu.Unlock()
		return nil
	}
	pt := l.partial
	if pt == nil {
		// A new delivery takes a credit: none left is an error (2.6.7). The
		// credit is what the server last granted less what came since, so
		// a transfer sent before the client read a later flow is within it.
		if l.credit == 0 {
			c.mu.Unlock()
			return l.Detach(&Error{Condition: ErrTransferLimitExceeded, Description: fmt.Sprintf("a transfer with no link credit (delivery-count %d)", l.deliveries)})
		}
		pt = &partly{}
		id, _ := Uint(p.Field(transferDeliveryID))
		pt.d.ID = uint32(id)
		pt.d.Tag, _ = p.Field(transferTag).([]byte)
		f, _ := Uint(p.Field(transferFormat))
		pt.d.Format = uint32(f)
	}
	if settled, _ := p.Field(transferSettled).(bool); settled {
		pt.d.Settled = true
	}
	if aborted, _ := p.Field(transferAborted).(bool); aborted {
		l.partial = nil // its payload is ignored (2.7.5)
		c.mu.Unlock()
		return nil
	}
	// The server's own limit (the max-message-size of its attach, 2.7.3),
	// checked before the frame is buffered: the frame that would take the
	// delivery over it frees what was held, and the rest of the delivery
	// is only counted.
	switch {
	case pt.over:
		pt.size += uint64(len(payload))
	case uint64(len(pt.buf))+uint64(len(payload)) > l.limit:
		pt.over, pt.size, pt.buf = true, uint64(len(pt.buf))+uint64(len(payload)), nil
	}
	more, _ := p.Field(transferMore).(bool)
	if more {
		if !pt.over {
			pt.add(payload, l.limit)
		}
		l.partial = pt
		c.mu.Unlock()
		return nil
	}
	l.partial = nil
	switch {
	case pt.over:
	case pt.buf == nil:
		pt.buf = payload // a delivery in one frame: the frame's own bytes
	default:
		pt.add(payload, l.limit)
	}
	l.deliveries++
	if l.credit > 0 {
		l.credit--
	}
	var ferr error
	if l.credit < l.grant/2 { // top the credit up before the client runs out
		l.credit = l.grant
		ferr = l.flowLocked(false)
	}
	c.mu.Unlock()
	if ferr != nil {
		return ferr
	}
	d := pt.d
	var state *Performative
	if pt.over {
		// Refused, the link kept (service-bus-quotas.md: a message over the
		// size is "rejected, and an exception is received by the calling
		// code"; rhea fails no pending send on a detach), in Service Bus's
		// words, which give the whole size.
		state = New(CodeRejected, (&Error{Condition: ErrMessageSizeExceed, Description: fmt.Sprintf(
			"The received message (delivery-id:%d, size:%d bytes) exceeds the limit (%d bytes) currently allowed on the link.", d.ID, pt.size, l.limit)}).Performative().Described())
	} else {
		d.Payload = pt.buf
		state = l.h.Transfer(l, d)
	}
	if d.Settled || state == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writeLocked(Frame{Channel: s.ch, Body: New(CodeDisposition, true, d.ID, nil, true, state.Described())})
}

// disposition takes the client's settlement of deliveries the server sent,
// first to last, and answers those it has not settled itself.
func (s *session) disposition(p *Performative) error {
	role, _ := p.Field(dispositionRole).(bool)
	if !role {
		return nil // the client settling its own sends: nothing waits on it here
	}
	first := uint32(uint64Of(p.Field(dispositionFirst)))
	last := first
	if v, ok := Uint(p.Field(dispositionLast)); ok {
		last = uint32(v)
	}
	settled, _ := p.Field(dispositionSettled).(bool)
	state := AsPerformative(p.Field(dispositionState))
	c := s.c
	for id := first; ; id++ {
		c.mu.Lock()
		l, tag := s.unsettled[id], s.tags[id]
		if l != nil && settled {
			delete(s.unsettled, id)
			delete(s.tags, id)
		}
		c.mu.Unlock()
		if l != nil {
			out := l.h.Disposition(l, id, tag, state)
			if !settled {
				if out == nil {
					out = state
				}
				var st any
				if out != nil {
					st = out.Described()
				}
				c.mu.Lock()
				delete(s.unsettled, id)
				delete(s.tags, id)
				err := c.writeLocked(Frame{Channel: s.ch, Body: New(CodeDisposition, false, id, nil, true, st)})
				c.mu.Unlock()
				if err != nil {
					return err
				}
			}
		}
		if id == last {
			return nil
		}
	}
}
