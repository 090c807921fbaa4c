package amqp

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// Limits the engine holds against a client that does not keep to the
// protocol, each driven with raw frames over TCP.

// A delivery the client sends is held to the max-message-size the SERVER
// declared on its attach (part 2, section 2.7.3), not to the one the
// client declared (which says what the client takes): a delivery of
// exactly the limit arrives; one byte more is refused with a rejected
// outcome carrying amqp:link:message-size-exceeded and the whole size, as
// Service Bus refuses a message over its size (service-bus-quotas.md:
// "rejected, and an exception is received by the calling code"); the
// handler never sees it and the link goes on.
func TestDeliveryHeldToTheServersMaxMessageSize(t *testing.T) {
	const limit = 100_000
	h := newTestHandler(limit, 10)
	addr, _ := serve(t, Config{Handler: h})
	c := dial(t, addr)
	c.open()
	c.begin()

	// The client declares it takes only 1,000 bytes: that bounds what the
	// server may send it, not what it sends.
	c.attachSender(0, "small-client", "q", 1000)
	c.expect(CodeAttach, 5*time.Second)
	chunk := bytes.Repeat([]byte("x"), 20_000)
	for i := uint32(0); i < 2; i++ {
		if err := c.transfer(0, i, true, true, chunk); err != nil {
			t.Fatal(err)
		}
		if err := c.transfer(0, i, false, true, chunk); err != nil {
			t.Fatal(err)
		}
		if err := c.transfer(0, i, false, false, chunk[:10_000]); err != nil {
			t.Fatal(err)
		}
		select {
		case d := <-h.got:
			if len(d.Payload) != 50_000 {
				t.Fatalf("delivery of %d bytes, want 50000", len(d.Payload))
			}
		case err := <-h.gone:
			t.Fatalf("a 50,000-byte delivery under the server's 100,000 detached the link: %v", err)
		case <-time.After(5 * time.Second):
			t.Fatal("a 50,000-byte delivery under the server's limit never arrived")
		}
	}

	// Exactly the limit, in five frames, is a message the link takes.
	c.attachSender(1, "exact", "q", 0)
	c.expect(CodeAttach, 5*time.Second)
	for i := 0; i < 5; i++ {
		if err := c.transfer(1, 9, i == 0, true, chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.transfer(1, 9, false, false, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-h.got:
		if len(d.Payload) != limit {
			t.Fatalf("delivery of %d bytes, want %d", len(d.Payload), limit)
		}
	case err := <-h.gone:
		t.Fatalf("a delivery of exactly the limit detached the link: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("a delivery of exactly the limit never arrived")
	}

	// One byte more is refused, with the whole size.
	for i := 0; i < 5; i++ {
		if err := c.transfer(1, 10, i == 0, true, chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.transfer(1, 10, false, false, []byte("y")); err != nil {
		t.Fatal(err)
	}
	if e := c.rejection(10, 5*time.Second); e == nil || e.Condition != ErrMessageSizeExceed || !strings.Contains(e.Description, "size:100001 bytes") {
		t.Fatalf("outcome error %v, want %s with size 100001", e, ErrMessageSizeExceed)
	}
	// The link goes on.
	if err := c.transfer(1, 11, true, false, []byte("small")); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-h.got:
		if string(d.Payload) != "small" {
			t.Fatalf("the handler got %d bytes, want the next delivery's 5", len(d.Payload))
		}
	case err := <-h.gone:
		t.Fatalf("the link was detached: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the delivery after a refused one never arrived")
	}
}

// A link whose handler declared no max-message-size (the $cbs and
// $management nodes) is held to Config.MaxMessageSize; a client that
// declares none itself is no exception. Once over it, a delivery is only
// counted: 3 MB of it are refused at its end with their size, nothing of
// it having reached the handler.
func TestDeliveryOnALinkWithoutALimitHeldToTheDefault(t *testing.T) {
	h := newTestHandler(0, 10)
	addr, _ := serve(t, Config{Handler: h, MaxMessageSize: 50_000})
	c := dial(t, addr)
	c.open()
	c.begin()
	c.attachSender(0, "cbs", "$cbs", 0)
	c.expect(CodeAttach, 5*time.Second)
	chunk := bytes.Repeat([]byte("z"), 30_000)
	for i := 0; i < 100; i++ {
		if err := c.transfer(0, 0, i == 0, true, chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.transfer(0, 0, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if e := c.rejection(0, 5*time.Second); e == nil || e.Condition != ErrMessageSizeExceed || !strings.Contains(e.Description, "size:3000000 bytes") {
		t.Fatalf("outcome error %v, want %s with size 3000000", e, ErrMessageSizeExceed)
	}
	if err := c.transfer(0, 1, true, false, []byte("token")); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-h.got:
		if string(d.Payload) != "token" {
			t.Fatalf("the handler got %d bytes, want the 5 of \"token\"", len(d.Payload))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the delivery after the refused one never arrived")
	}
}

// An unfinished delivery dies with its link: after the client's detach,
// a new link on the same handle does not continue it.
func TestUnfinishedDeliveryFreedOnDetach(t *testing.T) {
	h := newTestHandler(1<<20, 10)
	addr, _ := serve(t, Config{Handler: h})
	c := dial(t, addr)
	c.open()
	c.begin()
	c.attachSender(0, "a", "q", 0)
	c.expect(CodeAttach, 5*time.Second)
	if err := c.transfer(0, 0, true, true, []byte("AAAA")); err != nil {
		t.Fatal(err)
	}
	c.mustSend(Frame{Body: New(CodeDetach, uint32(0), true)})
	c.expect(CodeDetach, 5*time.Second)
	c.attachSender(0, "b", "q", 0)
	c.expect(CodeAttach, 5*time.Second)
	if err := c.transfer(0, 1, true, false, []byte("B")); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-h.got:
		if string(d.Payload) != "B" || d.ID != 1 {
			t.Fatalf("the new link's delivery is id %d %q, want id 1 \"B\"", d.ID, d.Payload)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the new link's delivery never arrived")
	}
}

// A transfer when the link's credit is zero is an error (part 2, section
// 2.6.7): the link is detached with amqp:link:transfer-limit-exceeded and
// the transfer is not delivered. With one credit granted (too few to be
// topped up), the second delivery is one too many; a link granted none
// takes none.
func TestTransferBeyondCreditDetachesTheLink(t *testing.T) {
	for _, credit := range []uint32{1, 0} {
		h := newTestHandler(1<<20, credit)
		addr, _ := serve(t, Config{Handler: h})
		c := dial(t, addr)
		c.open()
		c.begin()
		c.attachSender(0, "greedy", "q", 0)
		c.expect(CodeAttach, 5*time.Second)
		for i := uint32(0); i < 5; i++ {
			if err := c.transfer(0, i, true, false, []byte("m")); err != nil {
				t.Fatal(err)
			}
		}
		if e := c.detachError(5 * time.Second); e == nil || e.Condition != ErrTransferLimitExceeded {
			t.Fatalf("credit %d: detach error %v, want %s", credit, e, ErrTransferLimitExceeded)
		}
		time.Sleep(100 * time.Millisecond)
		if n := len(h.got); n != int(credit) {
			t.Fatalf("credit %d: %d deliveries handed on", credit, n)
		}
	}
}

// The server tops credit up before a sender runs out; a sender that keeps
// to the credit it has seen (the last flow's delivery-count plus
// link-credit, less what it sent: part 2, section 2.6.7) is never cut off,
// also when it sends everything it may before reading the next flow.
func TestSenderWithinSeenCreditIsNeverCutOff(t *testing.T) {
	h := newTestHandler(1<<20, 4)
	addr, _ := serve(t, Config{Handler: h})
	c := dial(t, addr)
	c.open()
	c.begin()
	c.attachSender(0, "polite", "q", 0)
	c.expect(CodeAttach, 5*time.Second)
	var limit, sent uint32
	readFlow := func() {
		p := c.expect(CodeFlow, 5*time.Second)
		if h, ok := Uint(p.Field(flowHandle)); !ok || h != 0 {
			return
		}
		count, _ := Uint(p.Field(flowDeliveryCount))
		credit, _ := Uint(p.Field(flowLinkCredit))
		limit = uint32(count + credit)
	}
	readFlow()
	for sent < 200 {
		for sent < limit && sent < 200 {
			if err := c.transfer(0, sent, true, false, []byte("m")); err != nil {
				t.Fatal(err)
			}
			sent++
		}
		if sent < 200 {
			readFlow()
		}
	}
	deadline := time.After(5 * time.Second)
	for n := 0; n < 200; n++ {
		select {
		case <-h.got:
		case err := <-h.gone:
			t.Fatalf("after %d deliveries the link was detached: %v", n, err)
		case <-deadline:
			t.Fatalf("only %d of 200 deliveries arrived", n)
		}
	}
}

// A transfer on a link the server refused (detached at once, still known
// until the client's detach) is dropped: it reaches no handler.
func TestTransferOnARefusedLinkIsDropped(t *testing.T) {
	h := &refusingHandler{testHandler: newTestHandler(1<<20, 10)}
	addr, served := serve(t, Config{Handler: h})
	c := dial(t, addr)
	c.open()
	c.begin()
	c.attachSender(0, "refused", "nowhere", 0)
	if e := c.detachError(5 * time.Second); e == nil || e.Condition != ErrNotFound {
		t.Fatalf("refusal %v", e)
	}
	if err := c.transfer(0, 0, true, false, []byte("m")); err != nil {
		t.Fatal(err)
	}
	c.mustSend(Frame{Body: New(CodeDetach, uint32(0), true)})
	c.attachSender(1, "ok", "q", 0)
	c.expect(CodeAttach, 5*time.Second)
	if err := c.transfer(1, 1, true, false, []byte("n")); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-h.got:
		if string(d.Payload) != "n" {
			t.Fatalf("delivery %q", d.Payload)
		}
	case err := <-served:
		t.Fatalf("the connection ended: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("no delivery on the accepted link")
	}
}

type refusingHandler struct{ *testHandler }

func (h *refusingHandler) Attach(l *Link) (LinkHandler, *Error) {
	if l.Address() == "nowhere" {
		return nil, &Error{Condition: ErrNotFound, Description: "no such node"}
	}
	return h.testHandler.Attach(l)
}

// The server advertises half its idle threshold as idle-time-out (part 2,
// section 2.4.5: "the value in idle-time-out SHOULD be half the peer's
// actual timeout threshold") and closes a connection from which no frame
// came within the threshold with amqp:resource-limit-exceeded: here one
// that sent half a frame and went silent.
func TestIdleConnectionClosed(t *testing.T) {
	const idle = 600 * time.Millisecond
	addr, _ := serve(t, Config{Handler: newTestHandler(0, 0), IdleTimeout: idle})
	c := dial(t, addr)
	open := c.open()
	if got, ok := Uint(open.Field(4)); !ok || got != uint64(idle/time.Millisecond/2) {
		t.Fatalf("the server's open advertises idle-time-out %v, want %d", open.Field(4), idle/time.Millisecond/2)
	}
	c.begin()
	start := time.Now()
	if err := c.write([]byte{0, 0, 0, 100}); err != nil { // half a frame header
		t.Fatal(err)
	}
	e, gotClose := c.closed(idle + 2*time.Second)
	if !gotClose || e == nil || e.Condition != ErrResourceLimit {
		t.Fatalf("close %v (close frame: %v), want %s", e, gotClose, ErrResourceLimit)
	}
	if el := time.Since(start); el < idle-50*time.Millisecond {
		t.Fatalf("closed after %v, before the idle threshold of %v", el, idle)
	}
}

// Empty frames keep a connection open: a client sending one every half
// advertised idle-time-out stays connected through many thresholds.
func TestHeartbeatsKeepAConnection(t *testing.T) {
	const idle = 400 * time.Millisecond
	addr, _ := serve(t, Config{Handler: newTestHandler(0, 0), IdleTimeout: idle})
	c := dial(t, addr)
	c.open()
	c.begin()
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		time.Sleep(idle / 4)
		if err := c.write([]byte{0, 0, 0, 8, 2, 0, 0, 0}); err != nil {
			t.Fatalf("heartbeat: %v", err)
		}
	}
	// Still served: a second session begins.
	c.mustSend(Frame{Channel: 1, Body: New(CodeBegin, nil, uint32(0), uint32(100), uint32(100))})
	for {
		f, err := c.read(2 * time.Second)
		if err != nil {
			t.Fatalf("after 2 s of heartbeats: %v", err)
		}
		if f.Body != nil && f.Body.Code == CodeClose {
			t.Fatalf("closed: %v", AsError(f.Body.Field(0)))
		}
		if f.Body != nil && f.Body.Code == CodeBegin && f.Channel == 1 {
			return
		}
	}
}

// A peer that never completes the protocol header, or stops inside SASL or
// before its open, is dropped after HandshakeTimeout.
func TestHandshakeBounded(t *testing.T) {
	const bound = 300 * time.Millisecond
	addr, _ := serve(t, Config{Handler: newTestHandler(0, 0), HandshakeTimeout: bound})
	for _, tc := range []struct {
		name string
		run  func(c *rawClient)
	}{
		{"half a header", func(c *rawClient) { _ = c.write([]byte("AMQ")) }},
		{"silent in SASL", func(c *rawClient) {
			c.header(HeaderSASL)
			c.expect(CodeSASLMechanisms, 2*time.Second)
		}},
		{"no open", func(c *rawClient) { c.header(HeaderAMQP) }},
	} {
		c := dial(t, addr)
		start := time.Now()
		tc.run(c)
		c.closed(bound + 2*time.Second)
		if el := time.Since(start); el < bound-50*time.Millisecond {
			t.Fatalf("%s: dropped after %v, before %v", tc.name, el, bound)
		}
	}
}
