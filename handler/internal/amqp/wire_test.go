package amqp

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// A raw client for the engine's tests: frames built with the package's own
// encoders, written to a real TCP connection to Serve.

type rawClient struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

// serve listens on a loopback port and serves each connection with cfg;
// the returned channel gets Serve's result for the first connection.
func serve(t *testing.T, cfg Config) (addr string, served <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		first := true
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
			report := first
			first = false
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := Serve(nc, cfg)
				if report {
					done <- err
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, nc := range conns {
			_ = nc.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String(), done
}

func dial(t *testing.T, addr string) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return &rawClient{t: t, nc: nc, r: bufio.NewReaderSize(nc, 64<<10)}
}

func (c *rawClient) write(b []byte) error {
	_, err := c.nc.Write(b)
	return err
}

func (c *rawClient) send(f Frame) error {
	b, err := AppendFrame(nil, f)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.write(b)
}

func (c *rawClient) mustSend(f Frame) {
	c.t.Helper()
	if err := c.send(f); err != nil {
		c.t.Fatalf("send %#x: %v", f.Body.Code, err)
	}
}

// read reads one frame within d.
func (c *rawClient) read(d time.Duration) (Frame, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(d))
	defer func() { _ = c.nc.SetReadDeadline(time.Time{}) }()
	return ReadFrame(c.r, 1<<20)
}

// expect reads frames (skipping heartbeats and those of other codes) until
// one of code arrives within d.
func (c *rawClient) expect(code uint64, d time.Duration) *Performative {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		f, err := c.read(time.Until(deadline))
		if err != nil {
			c.t.Fatalf("waiting for %#x: %v", code, err)
		}
		if f.Body != nil && f.Body.Code == code {
			return f.Body
		}
	}
}

// header exchanges a protocol header.
func (c *rawClient) header(h []byte) {
	c.t.Helper()
	if err := c.write(h); err != nil {
		c.t.Fatal(err)
	}
	got := make([]byte, 8)
	_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c.r, got); err != nil || !bytes.Equal(got, h) {
		c.t.Fatalf("header: % x, %v", got, err)
	}
	_ = c.nc.SetReadDeadline(time.Time{})
}

// open runs the AMQP header and open without SASL; it returns the server's open.
func (c *rawClient) open(fields ...any) *Performative {
	c.t.Helper()
	c.header(HeaderAMQP)
	if len(fields) == 0 {
		fields = []any{"raw-client"}
	}
	c.mustSend(Frame{Body: New(CodeOpen, fields...)})
	return c.expect(CodeOpen, 5*time.Second)
}

// begin begins a session on channel 0.
func (c *rawClient) begin() {
	c.t.Helper()
	c.mustSend(Frame{Body: New(CodeBegin, nil, uint32(0), uint32(1<<20), uint32(1<<20))})
	c.expect(CodeBegin, 5*time.Second)
}

// attachSender attaches a link the client sends on, to target; maxSize is
// the client's own max-message-size (0 leaves it out).
func (c *rawClient) attachSender(handle uint32, name, target string, maxSize uint64) {
	c.t.Helper()
	var mms any
	if maxSize > 0 {
		mms = maxSize
	}
	c.mustSend(Frame{Body: New(CodeAttach, name, handle, false, uint8(2), uint8(0),
		New(CodeSource, "client").Described(), New(CodeTarget, target).Described(), nil, nil, uint32(0), mms)})
}

// transfer sends one transfer frame of an unsettled delivery on handle;
// id and tag only when first.
func (c *rawClient) transfer(handle uint32, id uint32, first, more bool, payload []byte) error {
	var idf, tag, format any
	if first {
		idf, tag, format = id, []byte{byte(id), byte(id >> 8)}, uint32(0)
	}
	return c.send(Frame{Body: New(CodeTransfer, handle, idf, tag, format, false, more), Payload: payload})
}

// detachError waits for the server's detach and returns its error.
func (c *rawClient) detachError(d time.Duration) *Error {
	c.t.Helper()
	p := c.expect(CodeDetach, d)
	return AsError(p.Field(2))
}

// rejection waits for the server's disposition of delivery id and returns
// the error of its rejected outcome (nil: another outcome).
func (c *rawClient) rejection(id uint32, d time.Duration) *Error {
	c.t.Helper()
	for {
		p := c.expect(CodeDisposition, d)
		if first, _ := Uint(p.Field(dispositionFirst)); uint32(first) != id {
			continue
		}
		st := AsPerformative(p.Field(dispositionState))
		if st == nil || st.Code != CodeRejected {
			return nil
		}
		return AsError(st.Field(0))
	}
}

// closed: the server ended the connection (EOF or reset) within d, after
// any frames it wrote; it returns the close frame's error, if one came.
func (c *rawClient) closed(d time.Duration) (closeErr *Error, gotClose bool) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		f, err := c.read(time.Until(deadline))
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				c.t.Fatalf("the connection was still open after %v", d)
			}
			return closeErr, gotClose
		}
		if f.Body != nil && f.Body.Code == CodeClose {
			closeErr, gotClose = AsError(f.Body.Field(0)), true
		}
	}
}

// testHandler accepts every link: a link the client sends on gets the
// declared max-message-size and credit (no Grant when credit is 0).
type testHandler struct {
	maxSize uint64
	credit  uint32
	got     chan Delivery
	gone    chan *Error
}

func newTestHandler(maxSize uint64, credit uint32) *testHandler {
	return &testHandler{maxSize: maxSize, credit: credit, got: make(chan Delivery, 10000), gone: make(chan *Error, 100)}
}

func (h *testHandler) Attach(l *Link) (LinkHandler, *Error) {
	if err := l.AttachReply(l.Source, l.Target, h.maxSize, nil); err != nil {
		return nil, &Error{Condition: ErrInternal, Description: err.Error()}
	}
	if l.ClientSends && h.credit > 0 {
		if err := l.Grant(h.credit); err != nil {
			return nil, &Error{Condition: ErrInternal, Description: err.Error()}
		}
	}
	return h, nil
}

func (h *testHandler) Transfer(_ *Link, d Delivery) *Performative {
	d.Payload = append([]byte(nil), d.Payload...)
	select {
	case h.got <- d:
	default: // a fuzzed client may send more than a test reads
	}
	return nil
}

func (h *testHandler) Disposition(*Link, uint32, []byte, *Performative) *Performative { return nil }
func (h *testHandler) Flow(*Link)                                                     {}
func (h *testHandler) Detached(_ *Link, err *Error) {
	select {
	case h.gone <- err:
	default:
	}
}
