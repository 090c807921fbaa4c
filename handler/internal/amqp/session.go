package amqp

import "fmt"

// session is a session the client began (part 2, section 2.5): the
// transfer ids and windows of both directions, and its links.
type session struct {
	c           *Conn
	ch          uint16
	nextOut     uint32           // our next outgoing transfer id (and delivery id)
	inNext      uint32           // our next incoming transfer id
	peerInWin   uint32           // what is left of the client's incoming window
	links       map[uint32]*Link // by the client's handle
	nextHandle  uint32
	unsettled   map[uint32]*Link  // our deliveries the client has not settled
	tags        map[uint32][]byte // their tags
	pendingSend []pending         // transfers waiting for the client's session window
}

// window is the session window the server offers the client: large, so
// that only link credit paces a sender.
const window = 1 << 30

// begin answers a client's begin on channel ch with the server's windows.
func (c *Conn) begin(ch uint16, p *Performative) error {
	s := &session{c: c, ch: ch, links: map[uint32]*Link{}, unsettled: map[uint32]*Link{},
		tags: map[uint32][]byte{}}
	s.peerInWin = uint32(min(uint64Of(p.Field(beginIncomingWindow)), 1<<32-1))
	s.inNext = uint32(uint64Of(p.Field(beginNextOutgoingID)))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ss[ch] != nil {
		return &Error{Condition: ErrNotAllowed, Description: fmt.Sprintf("channel %d already has a session", ch)}
	}
	c.ss[ch] = s
	return c.writeLocked(Frame{Channel: ch, Body: New(CodeBegin, ch, uint32(0), uint32(window), uint32(window), uint32(1<<32-1))})
}

// end ends the session at the client's request: its links go with it.
func (s *session) end() error {
	c := s.c
	c.mu.Lock()
	delete(c.ss, s.ch)
	var links []*Link
	for _, l := range s.links {
		if l.goneLocked() {
			links = append(links, l)
		}
	}
	err := c.writeLocked(Frame{Channel: s.ch, Body: New(CodeEnd)})
	c.mu.Unlock()
	for _, l := range links {
		l.h.Detached(l, nil)
	}
	return err
}

// handle runs a frame on the session its channel names.
func (s *session) handle(f Frame) error {
	p := f.Body
	switch p.Code {
	case CodeAttach:
		return s.attach(p)
	case CodeFlow:
		return s.flow(p)
	case CodeTransfer:
		return s.transfer(p, f.Payload)
	case CodeDisposition:
		return s.disposition(p)
	case CodeDetach:
		return s.detach(p)
	case CodeEnd:
		return s.end()
	}
	return &Error{Condition: ErrNotImplemented, Description: fmt.Sprintf("performative %#x", p.Code)}
}

// link finds the link whose client handle is in field of p: nil without
// one, an error when no link has it.
func (s *session) link(p *Performative, field int) (*Link, error) {
	h, ok := Uint(p.Field(field))
	if !ok {
		return nil, nil
	}
	l := s.links[uint32(h)]
	if l == nil {
		return nil, &Error{Condition: "amqp:session:unattached-handle", Description: fmt.Sprintf("handle %d", h)}
	}
	return l, nil
}

// pending is a message the server sends, queued first for link credit,
// then for room in the client's session window.
type pending struct {
	l       *Link
	tag     []byte
	format  uint32
	payload []byte
	settled bool
}

// flushLocked sends the transfers the client's session window allows.
func (s *session) flushLocked() error {
	for len(s.pendingSend) > 0 && s.peerInWin > 0 {
		p := s.pendingSend[0]
		if p.l.gone {
			s.pendingSend = s.pendingSend[1:]
			continue
		}
		id := s.nextOut
		// Split the message into frames of the client's max-frame-size; a
		// message once begun is sent whole (the window is checked before).
		room := int(s.c.peerMF) - 8 - 64 // the header and a generous transfer performative
		payload := p.payload
		for first := true; first || len(payload) > 0; first = false {
			n := min(room, len(payload))
			more := n < len(payload)
			var tagField, idField, formatField any
			if first {
				tagField, idField, formatField = p.tag, id, p.format
			}
			err := s.c.writeLocked(Frame{Channel: s.ch, Body: New(CodeTransfer, p.l.ours, idField, tagField, formatField, p.settled, more), Payload: payload[:n]})
			if err != nil {
				return err
			}
			payload = payload[n:]
			s.nextOut++
			if s.peerInWin > 0 {
				s.peerInWin--
			}
		}
		s.pendingSend = s.pendingSend[1:]
		if !p.settled {
			s.unsettled[id] = p.l
			s.tags[id] = p.tag
		}
	}
	return nil
}
