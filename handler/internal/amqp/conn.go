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

// DefaultMaxMessageSize is Config.MaxMessageSize when none is given.
const DefaultMaxMessageSize = 1 << 20

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

// handle runs a frame received after the open: begin and close here, the
// others on the session of their channel.
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
		return &Error{Condition: ErrFramingError, Description: fmt.Sprintf("no session on channel %d", f.Channel)}
	}
	return s.handle(f)
}

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
	c.Remote, _ = f.Body.Field(openContainerID).(string)
	// An absent max-frame-size is the largest (part 2, section 2.7.1).
	if mf, ok := Uint(f.Body.Field(openMaxFrameSize)); ok && mf >= MinMaxFrameSize {
		c.peerMF = uint32(min(mf, 1<<32-1))
	}
	var idle uint64
	if v, ok := Uint(f.Body.Field(openIdleTimeOut)); ok {
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
	hostname := f.Body.Field(openHostname)
	if err := c.write(Frame{Body: New(CodeOpen, c.cfg.ContainerID, hostname, c.cfg.MaxFrameSize, uint16(65535), idleOut, nil, nil, nil, nil, props)}); err != nil {
		return err
	}
	if idle > 0 { // keep the client's idle timer fed (part 2, section 2.4.5)
		go c.heartbeat(time.Duration(idle) * time.Millisecond / 2)
	}
	return nil
}

// heartbeat writes an empty frame every period until the connection ends.
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

// write writes one frame; writeLocked, under c.mu.
func (c *Conn) write(f Frame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writeLocked(f)
}

// trace writes a frame's line to Config.Trace.
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

// shutdown ends the connection once: the socket closed, every link's
// handler told with err.
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
