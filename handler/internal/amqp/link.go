package amqp

import (
	"errors"
	"fmt"
)

// Handler gives links their meaning.
type Handler interface {
	// Attach accepts a link the client attaches, or refuses it with an error.
	Attach(l *Link) (LinkHandler, *Error)
}

// LinkHandler handles one attached link.
type LinkHandler interface {
	// Transfer: a message arrived on a link the client sends on; the
	// returned outcome (accepted, rejected, …) settles it when the client
	// sent it unsettled.
	Transfer(l *Link, d Delivery) *Performative
	// Disposition: the client settled a delivery the server sent; the
	// returned outcome answers it when the client waits for one (nil: its own).
	Disposition(l *Link, id uint32, tag []byte, state *Performative) *Performative
	// Flow: the client changed the link's credit or asked to drain it.
	Flow(l *Link)
	// Detached: the link is gone (closed by the client, or the connection).
	Detached(l *Link, err *Error)
}

// Starter is a LinkHandler with work of its own (delivering messages,
// answering an attach later): Start is called once the link is attached,
// so that the work never races the engine's setup of the link.
type Starter interface {
	Start(l *Link)
}

// Link is an attached link. Role is the client's: ClientSends links carry
// messages to the server; the others carry them to the client.
type Link struct {
	s            *session
	Name         string
	ClientSends  bool
	Source       *Performative
	Target       *Performative
	Properties   Map
	SndSettle    uint8 // the client's sender-settle-mode (0 unsettled, 1 settled, 2 mixed)
	RcvSettle    uint8
	MaxMsgSize   uint64 // the client's (what it takes), 0: none
	limit        uint64 // the largest delivery the server takes on the link
	partial      *partly
	handle       uint32 // the client's
	ours         uint32 // ours
	h            LinkHandler
	deliveries   uint32 // delivery-count
	credit       uint32
	drain        bool
	grant        uint32 // credit we keep open on a link the client sends on
	waiting      []pending
	gone         bool
	creditChange chan struct{} // closed and replaced when credit changes
}

// Address returns the client's source address (of a link that carries
// messages to the client) or target address (of one the client sends on).
func (l *Link) Address() string {
	p := l.Target
	if !l.ClientSends {
		p = l.Source
	}
	a, _ := p.Field(terminusAddress).(string)
	return a
}

// attach takes a link the client attaches and asks Config.Handler for its
// meaning; the handler answers with AttachReply, or refuses it.
func (s *session) attach(p *Performative) error {
	c := s.c
	l := &Link{s: s, creditChange: make(chan struct{}), limit: c.cfg.MaxMessageSize}
	l.Name, _ = p.Field(attachName).(string)
	h, ok := Uint(p.Field(attachHandle))
	if !ok {
		return &Error{Condition: ErrInvalidField, Description: "attach without a handle"}
	}
	l.handle = uint32(h)
	role, _ := p.Field(attachRole).(bool) // true: the client receives
	l.ClientSends = !role
	if v, ok := Uint(p.Field(attachSndSettleMode)); ok {
		l.SndSettle = uint8(v)
	} else {
		l.SndSettle = 2 // mixed
	}
	if v, ok := Uint(p.Field(attachRcvSettleMode)); ok {
		l.RcvSettle = uint8(v)
	}
	l.Source = AsPerformative(p.Field(attachSource))
	l.Target = AsPerformative(p.Field(attachTarget))
	l.Properties, _ = p.Field(attachProperties).(Map)
	l.MaxMsgSize, _ = Uint(p.Field(attachMaxMsgSize))
	if l.ClientSends {
		if v, ok := Uint(p.Field(attachInitialCount)); ok {
			l.deliveries = uint32(v)
		}
	}
	c.mu.Lock()
	if s.links[l.handle] != nil {
		c.mu.Unlock()
		return &Error{Condition: "amqp:session:handle-in-use", Description: fmt.Sprintf("handle %d", l.handle)}
	}
	l.ours = s.nextHandle
	s.nextHandle++
	s.links[l.handle] = l
	c.mu.Unlock()

	lh, refuse := c.cfg.Handler.Attach(l)
	c.mu.Lock()
	l.h = lh
	c.mu.Unlock()
	if refuse == nil {
		if s, ok := lh.(Starter); ok {
			s.Start(l)
		}
	}
	if refuse != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		return l.refuseLocked(refuse)
	}
	return nil
}

// goneLocked marks the link gone, under c.mu; false when it already was.
func (l *Link) goneLocked() bool {
	if l.gone {
		return false
	}
	l.gone = true
	l.partial = nil // what the client began sending dies with the link
	close(l.creditChange)
	return true
}

// refuseLocked refuses the link, under c.mu: an attach without a terminus,
// then a detach with err (part 2, section 2.6.3). The link stays known
// until the client answers with its detach.
func (l *Link) refuseLocked(err *Error) error {
	l.goneLocked()
	c := l.s.c
	if werr := c.writeLocked(Frame{Channel: l.s.ch, Body: New(CodeAttach, l.Name, l.ours, l.ClientSends)}); werr != nil {
		return werr
	}
	return c.writeLocked(Frame{Channel: l.s.ch, Body: New(CodeDetach, l.ours, true, err.Performative().Described())})
}

// AttachReply answers the client's attach: props are the link properties
// the server adds; maxMessageSize 0 leaves it out. The handler calls it from
// Attach, after it has decided to accept.
func (l *Link) AttachReply(source, target *Performative, maxMessageSize uint64, props Map) error {
	c := l.s.c
	var src, tgt, mms, pr, initial any
	if source != nil {
		src = source.Described()
	}
	if target != nil {
		tgt = target.Described()
	}
	if maxMessageSize > 0 {
		mms = maxMessageSize
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if maxMessageSize > 0 {
		l.limit = maxMessageSize
	}
	if props != nil {
		pr = props
	}
	if !l.ClientSends {
		initial = uint32(0)
	}
	snd := l.SndSettle
	return c.writeLocked(Frame{Channel: l.s.ch, Body: New(CodeAttach, l.Name, l.ours, l.ClientSends, snd, l.RcvSettle,
		src, tgt, nil, nil, initial, mms, nil, nil, pr)})
}

// Refuse refuses a link the handler accepted without answering yet (an
// attach it answers later): an attach without a terminus, then a detach
// with err (part 2, section 2.6.3).
func (l *Link) Refuse(err *Error) error {
	c := l.s.c
	c.mu.Lock()
	if l.gone {
		c.mu.Unlock()
		return nil
	}
	werr := l.refuseLocked(err)
	c.mu.Unlock()
	l.h.Detached(l, err)
	return werr
}

// Grant keeps credit open for the client to send on the link.
func (l *Link) Grant(credit uint32) error {
	c := l.s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	l.grant, l.credit = credit, credit
	return l.flowLocked(false)
}

// flowLocked sends the link's state.
func (l *Link) flowLocked(drain bool) error {
	s := l.s
	return s.c.writeLocked(Frame{Channel: s.ch, Body: New(CodeFlow, s.inNext, uint32(window), s.nextOut, uint32(window),
		l.ours, l.deliveries, l.credit, nil, drain)})
}

// flow takes the client's flow: its session window, and on a link the
// server sends on, its credit; what waited for either goes out.
func (s *session) flow(p *Performative) error {
	c := s.c
	c.mu.Lock()
	// What the client can still take: its next-incoming-id plus its
	// incoming-window, less what the server has sent (2.5.6).
	next := uint64Of(p.Field(flowNextIncomingID))
	s.peerInWin = uint32(max(0, int64(next)+int64(uint64Of(p.Field(flowIncomingWindow)))-int64(s.nextOut)))
	l, err := s.link(p, flowHandle)
	if err != nil || l == nil || l.gone {
		flushErr := s.flushLocked()
		c.mu.Unlock()
		return errors.Join(err, flushErr)
	}
	echo, _ := p.Field(flowEcho).(bool)
	if !l.ClientSends {
		credit := uint64Of(p.Field(flowLinkCredit))
		count := l.deliveries
		if v, ok := Uint(p.Field(flowDeliveryCount)); ok {
			count = uint32(v)
		}
		// credit = the client's delivery-count + its link-credit - ours (2.6.7)
		l.credit = uint32(uint64(count) + credit - uint64(l.deliveries))
		if int64(count)+int64(credit)-int64(l.deliveries) < 0 {
			l.credit = 0
		}
		l.drain, _ = p.Field(flowDrain).(bool)
		close(l.creditChange)
		l.creditChange = make(chan struct{})
	}
	err = l.flushLocked()
	if err == nil {
		err = s.flushLocked()
	}
	if err == nil && echo {
		err = l.flowLocked(l.drain)
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if !l.ClientSends {
		l.h.Flow(l)
	}
	return nil
}

// detach takes the client's detach, answering it unless the server
// detached first.
func (s *session) detach(p *Performative) error {
	c := s.c
	c.mu.Lock()
	l, err := s.link(p, detachHandle)
	if err != nil || l == nil {
		c.mu.Unlock()
		return err
	}
	delete(s.links, l.handle)
	wasGone := !l.goneLocked()
	closed, _ := p.Field(detachClosed).(bool)
	var werr error
	if !wasGone { // answer the client's detach; a detach of ours was answered already
		werr = c.writeLocked(Frame{Channel: s.ch, Body: New(CodeDetach, l.ours, closed)})
	}
	c.mu.Unlock()
	if !wasGone {
		l.h.Detached(l, AsError(p.Field(detachError)))
	}
	return werr
}

// Detach closes the link from the server's side with err.
func (l *Link) Detach(err *Error) error {
	c := l.s.c
	c.mu.Lock()
	if !l.goneLocked() {
		c.mu.Unlock()
		return nil
	}
	var e any
	if err != nil {
		e = err.Performative().Described()
	}
	werr := c.writeLocked(Frame{Channel: l.s.ch, Body: New(CodeDetach, l.ours, true, e)})
	c.mu.Unlock()
	l.h.Detached(l, err)
	return werr
}

// Conn returns the link's connection.
func (l *Link) Conn() *Conn { return l.s.c }

// Credit returns the link's credit, whether the client asks to drain it,
// and a channel closed at the next change (or when the link goes).
func (l *Link) Credit() (credit uint32, drain bool, changed <-chan struct{}) {
	c := l.s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.gone {
		ch := make(chan struct{})
		close(ch)
		return 0, false, ch
	}
	return l.credit, l.drain, l.creditChange
}

// Drained ends a drain: the unused credit is spent (2.6.7).
func (l *Link) Drained() error {
	c := l.s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.gone || !l.drain {
		return nil
	}
	l.deliveries += l.credit
	l.credit, l.drain = 0, false
	return l.flowLocked(true)
}

// Send transfers a message to the client on a link the server sends on,
// using one credit; it is queued when the link has none. A settled send
// needs no answer; an unsettled one is answered by Disposition.
func (l *Link) Send(tag []byte, format uint32, payload []byte, settled bool) error {
	c := l.s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.gone {
		return ErrClosed
	}
	l.waiting = append(l.waiting, pending{l: l, tag: tag, format: format, payload: payload, settled: settled})
	return l.flushLocked()
}

// flushLocked sends what waits for credit.
func (l *Link) flushLocked() error {
	for len(l.waiting) > 0 && l.credit > 0 {
		p := l.waiting[0]
		l.waiting = l.waiting[1:]
		l.credit--
		l.deliveries++
		l.s.pendingSend = append(l.s.pendingSend, p)
	}
	return l.s.flushLocked()
}
