package amqp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// Error conditions of the specification (part 2, section 2.8.15 and after).
const (
	ErrInternal              Symbol = "amqp:internal-error"
	ErrNotFound              Symbol = "amqp:not-found"
	ErrUnauthorized          Symbol = "amqp:unauthorized-access"
	ErrDecode                Symbol = "amqp:decode-error"
	ErrNotImplemented        Symbol = "amqp:not-implemented"
	ErrNotAllowed            Symbol = "amqp:not-allowed"
	ErrInvalidField          Symbol = "amqp:invalid-field"
	ErrResourceLimit         Symbol = "amqp:resource-limit-exceeded"
	ErrFramingError          Symbol = "amqp:connection:framing-error"
	ErrMessageSizeExceed     Symbol = "amqp:link:message-size-exceeded"
	ErrTransferLimitExceeded Symbol = "amqp:link:transfer-limit-exceeded"
	ErrDetachForced          Symbol = "amqp:link:detach-forced"
	ErrConnectionForced      Symbol = "amqp:connection:forced"
)

// Fields of the performatives the engine reads and writes, by position.
const (
	attachName          = 0
	attachHandle        = 1
	attachRole          = 2
	attachSndSettleMode = 3
	attachRcvSettleMode = 4
	attachSource        = 5
	attachTarget        = 6
	attachInitialCount  = 9
	attachMaxMsgSize    = 10
	attachProperties    = 13

	flowNextIncomingID = 0
	flowIncomingWindow = 1
	flowNextOutgoingID = 2
	flowOutgoingWindow = 3
	flowHandle         = 4
	flowDeliveryCount  = 5
	flowLinkCredit     = 6
	flowDrain          = 8
	flowEcho           = 9

	transferHandle     = 0
	transferDeliveryID = 1
	transferTag        = 2
	transferFormat     = 3
	transferSettled    = 4
	transferMore       = 5
	transferAborted    = 10

	dispositionRole    = 0
	dispositionFirst   = 1
	dispositionLast    = 2
	dispositionSettled = 3
	dispositionState   = 4
)

// Config is a server connection's configuration.
type Config struct {
	ContainerID  string
	MaxFrameSize uint32 // ours; default 65536
	// Mechanisms offered in SASL, in order; the connection is refused when
	// the client picks another. Empty: ANONYMOUS.
	Mechanisms []Symbol
	// SASL checks a client's SASL init (nil accepts every offered mechanism).
	SASL func(mechanism Symbol, initial []byte) bool
	// OpenProperties go in the server's open.
	OpenProperties Map
	Handler        Handler
	// OnFrame, when set, sees every frame received after the open (tests and
	// fault injection); returning false drops the connection without a word.
	OnFrame func(*Conn, Frame) bool
	// Trace, when set, receives one line per frame in and out.
	Trace io.Writer
	// MaxMessageSize bounds a delivery the client sends on a link whose
	// handler declared no max-message-size of its own (AttachReply with 0).
	// 0: DefaultMaxMessageSize.
	MaxMessageSize uint64
	// IdleTimeout is the server's idle threshold: a connection from which
	// no frame (not even an empty one) arrives within it is closed with
	// amqp:resource-limit-exceeded. Half of it is advertised as the open's
	// idle-time-out (part 2, section 2.4.5). 0: none.
	IdleTimeout time.Duration
	// HandshakeTimeout bounds the protocol headers, SASL and the open.
	// 0: 30 seconds.
	HandshakeTimeout time.Duration
}

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

// Delivery is a complete message transfer.
type Delivery struct {
	ID      uint32
	Tag     []byte
	Format  uint32
	Settled bool
	Payload []byte
}

// ErrClosed: the connection or link is gone.
var ErrClosed = errors.New("amqp: closed")

// Conn is one client connection as the server sees it.
type Conn struct {
	cfg    Config
	nc     net.Conn
	r      *bufio.Reader
	mu     sync.Mutex // state and writes
	w      *bufio.Writer
	buf    []byte
	peerMF uint32 // the client's max-frame-size
	ss     map[uint16]*session
	closed bool
	silent bool // Silence: nothing more is written
	done   chan struct{}
	// Remote is the client's container id, from its open.
	Remote string
}

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

type pending struct {
	l       *Link
	tag     []byte
	format  uint32
	payload []byte
	settled bool
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
	a, _ := p.Field(0).(string)
	return a
}

// DefaultMaxMessageSize is Config.MaxMessageSize when none is given.
const DefaultMaxMessageSize = 1 << 20

// Serve runs the connection until the client closes it or it fails.
func Serve(nc net.Conn, cfg Config) error {
	if cfg.MaxFrameSize == 0 {
		cfg.MaxFrameSize = 65536
	}
	if cfg.MaxMessageSize == 0 {
		cfg.MaxMessageSize = DefaultMaxMessageSize
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = 30 * time.Second
	}
	if len(cfg.Mechanisms) == 0 {
		cfg.Mechanisms = []Symbol{"ANONYMOUS"}
	}
	c := &Conn{cfg: cfg, nc: nc, r: bufio.NewReaderSize(nc, 64<<10), w: bufio.NewWriterSize(nc, 64<<10),
		peerMF: 1<<32 - 1, ss: map[uint16]*session{}, done: make(chan struct{})}
	defer c.shutdown(nil)
	if err := c.handshake(); err != nil {
		return err
	}
	for {
		if cfg.IdleTimeout > 0 {
			// Each frame, empty ones included, must arrive within the
			// threshold (2.4.5); half a frame and silence is no exception.
			_ = c.nc.SetReadDeadline(time.Now().Add(cfg.IdleTimeout))
		}
		f, err := ReadFrame(c.r, cfg.MaxFrameSize)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				return nil
			}
			if errors.Is(err, os.ErrDeadlineExceeded) && cfg.IdleTimeout > 0 {
				c.Close(&Error{Condition: ErrResourceLimit, Description: fmt.Sprintf("The connection was inactive for more than the allowed %d milliseconds.", cfg.IdleTimeout.Milliseconds())})
				return fmt.Errorf("amqp: no frame within the idle timeout of %v", cfg.IdleTimeout)
			}
			c.Close(&Error{Condition: ErrFramingError, Description: err.Error()})
			return err
		}
		c.trace("<-", f)
		if cfg.OnFrame != nil && !cfg.OnFrame(c, f) {
			return nil
		}
		if f.Body == nil {
			continue // heartbeat
		}
		if err := c.handle(f); err != nil {
			var ae *Error
			if !errors.As(err, &ae) {
				ae = &Error{Condition: ErrInternal, Description: err.Error()}
			}
			c.Close(ae)
			return err
		}
		if c.isClosed() {
			return nil
		}
	}
}

func (c *Conn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Done is closed when the connection ends.
func (c *Conn) Done() <-chan struct{} { return c.done }

// handshake reads the protocol headers, runs SASL and exchanges open.
func (c *Conn) handshake() error {
	_ = c.nc.SetDeadline(time.Now().Add(c.cfg.HandshakeTimeout))
	defer func() { _ = c.nc.SetDeadline(time.Time{}) }()
	head := make([]byte, 8)
	if _, err := io.ReadFull(c.r, head); err != nil {
		return err
	}
	if bytes.Equal(head, HeaderSASL) {
		if err := c.sasl(); err != nil {
			return err
		}
		if _, err := io.ReadFull(c.r, head); err != nil {
			return err
		}
	}
	if !bytes.Equal(head, HeaderAMQP) {
		// Answer with the header we speak, then close (part 2, section 2.2).
		_, _ = c.nc.Write(HeaderSASL)
		return fmt.Errorf("amqp: protocol header %q", head)
	}
	if _, err := c.nc.Write(HeaderAMQP); err != nil {
		return err
	}
	f, err := ReadFrame(c.r, c.cfg.MaxFrameSize)
	if err != nil {
		return err
	}
	if f.Body == nil || f.Body.Code != CodeOpen {
		return fmt.Errorf("amqp: expected open, got %v", f.Body)
	}
	c.Remote, _ = f.Body.Field(0).(string)
	// An absent max-frame-size is the largest (part 2, section 2.7.1).
	if mf, ok := Uint(f.Body.Field(2)); ok && mf >= MinMaxFrameSize {
		c.peerMF = uint32(min(mf, 1<<32-1))
	}
	var idle uint64
	if v, ok := Uint(f.Body.Field(4)); ok {
		idle = v
	}
	var props any
	if c.cfg.OpenProperties != nil {
		props = c.cfg.OpenProperties
	}
	var idleOut any
	if c.cfg.IdleTimeout > 0 { // half the threshold, as the spec advises (2.4.5)
		idleOut = Millis(c.cfg.IdleTimeout / 2)
	}
	hostname := f.Body.Field(1)
	if err := c.write(Frame{Body: New(CodeOpen, c.cfg.ContainerID, hostname, c.cfg.MaxFrameSize, uint16(65535), idleOut, nil, nil, nil, nil, props)}); err != nil {
		return err
	}
	if idle > 0 { // keep the client's idle timer fed (part 2, section 2.4.5)
		go c.heartbeat(time.Duration(idle) * time.Millisecond / 2)
	}
	return nil
}

func (c *Conn) sasl() error {
	if _, err := c.nc.Write(HeaderSASL); err != nil {
		return err
	}
	mechs := make(Array, len(c.cfg.Mechanisms))
	for i, m := range c.cfg.Mechanisms {
		mechs[i] = m
	}
	if err := c.write(Frame{Type: FrameSASL, Body: New(CodeSASLMechanisms, mechs)}); err != nil {
		return err
	}
	f, err := ReadFrame(c.r, c.cfg.MaxFrameSize)
	if err != nil {
		return err
	}
	if f.Body == nil || f.Body.Code != CodeSASLInit {
		return fmt.Errorf("amqp: expected sasl-init, got %v", f.Body)
	}
	mech, _ := f.Body.Field(0).(Symbol)
	initial, _ := f.Body.Field(1).([]byte)
	ok := false
	for _, m := range c.cfg.Mechanisms {
		ok = ok || m == mech
	}
	if ok && c.cfg.SASL != nil {
		ok = c.cfg.SASL(mech, initial)
	}
	code := uint8(0)
	if !ok {
		code = 1 // auth: authentication failed
	}
	if err := c.write(Frame{Type: FrameSASL, Body: New(CodeSASLOutcome, code)}); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("amqp: sasl mechanism %q refused", mech)
	}
	return nil
}

func (c *Conn) heartbeat(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
			c.mu.Lock()
			if !c.closed {
				_ = c.writeLocked(Frame{})
			}
			c.mu.Unlock()
		}
	}
}

func (c *Conn) write(f Frame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writeLocked(f)
}

func (c *Conn) trace(dir string, f Frame) {
	if c.cfg.Trace == nil || f.Body == nil {
		return
	}
	fmt.Fprintf(c.cfg.Trace, "amqp %p %s ch%d %#x %v (+%d bytes)\n", c, dir, f.Channel, f.Body.Code, f.Body.Fields, len(f.Payload))
}

// Silence stops every write from now on, heartbeats included, as a
// black-holed network path would (fault injection).
func (c *Conn) Silence() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.silent = true
}

func (c *Conn) writeLocked(f Frame) error {
	if c.silent {
		return nil
	}
	c.trace("->", f)
	var err error
	if c.buf, err = AppendFrame(c.buf[:0], f); err != nil {
		return err
	}
	if _, err = c.w.Write(c.buf); err != nil {
		return err
	}
	return c.w.Flush()
}

// Close closes the connection with err (nil: a normal close).
func (c *Conn) Close(err *Error) {
	c.mu.Lock()
	if !c.closed {
		// A peer that reads nothing more must not hold the close for ever.
		_ = c.nc.SetWriteDeadline(time.Now().Add(closeWriteTimeout))
		var e any
		if err != nil {
			e = err.Performative().Described()
		}
		_ = c.writeLocked(Frame{Body: New(CodeClose, e)})
	}
	c.mu.Unlock()
	c.shutdown(err)
}

// closeWriteTimeout bounds the write of a close frame.
const closeWriteTimeout = 5 * time.Second

// Drop closes the socket without a close frame, as a network fault would.
func (c *Conn) Drop() { c.shutdown(&Error{Condition: ErrConnectionForced, Description: "dropped"}) }

func (c *Conn) shutdown(err *Error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	close(c.done)
	var links []*Link
	for _, s := range c.ss {
		for _, l := range s.links {
			if l.goneLocked() {
				links = append(links, l)
			}
		}
	}
	c.mu.Unlock()
	_ = c.nc.Close()
	for _, l := range links {
		l.h.Detached(l, err)
	}
}

func (c *Conn) handle(f Frame) error {
	p := f.Body
	switch p.Code {
	case CodeBegin:
		return c.begin(f.Channel, p)
	case CodeClose:
		c.mu.Lock()
		if !c.closed {
			_ = c.writeLocked(Frame{Body: New(CodeClose)})
		}
		c.mu.Unlock()
		c.shutdown(nil)
		return nil
	}
	c.mu.Lock()
	s := c.ss[f.Channel]
	c.mu.Unlock()
	if s == nil {
		return &Error{Condition: "amqp:connection:framing-error", Description: fmt.Sprintf("no session on channel %d", f.Channel)}
	}
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

// window is the session window the server offers the client: large, so
// that only link credit paces a sender.
const window = 1 << 30

func (c *Conn) begin(ch uint16, p *Performative) error {
	s := &session{c: c, ch: ch, links: map[uint32]*Link{}, unsettled: map[uint32]*Link{},
		tags: map[uint32][]byte{}}
	s.peerInWin = uint32(min(uint64Of(p.Field(2)), 1<<32-1))
	s.inNext = uint32(uint64Of(p.Field(1)))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ss[ch] != nil {
		return &Error{Condition: ErrNotAllowed, Description: fmt.Sprintf("channel %d already has a session", ch)}
	}
	c.ss[ch] = s
	return c.writeLocked(Frame{Channel: ch, Body: New(CodeBegin, ch, uint32(0), uint32(window), uint32(window), uint32(1<<32-1))})
}

func uint64Of(v any) uint64 { u, _ := Uint(v); return u }

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

func (s *session) detach(p *Performative) error {
	c := s.c
	c.mu.Lock()
	l, err := s.link(p, 0)
	if err != nil || l == nil {
		c.mu.Unlock()
		return err
	}
	delete(s.links, l.handle)
	wasGone := !l.goneLocked()
	closed, _ := p.Field(1).(bool)
	var werr error
	if !wasGone { // answer the client's detach; a detach of ours was answered already
		werr = c.writeLocked(Frame{Channel: s.ch, Body: New(CodeDetach, l.ours, closed)})
	}
	c.mu.Unlock()
	if !wasGone {
		l.h.Detached(l, AsError(p.Field(2)))
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
