package devbus

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/convoy-dev/convoy/handler/internal/amqp"
)

// Limits the emulated namespace holds on the wire against a client that
// does not keep to the protocol, driven with raw AMQP frames (the amqp
// package's own encoders) over TCP; and the real SDKs kept connected by
// the idle timeout the bus advertises. Sources: the OASIS AMQP 1.0
// specification (part 2: 2.4.5 idle timeout, 2.6.7 flow control, 2.7.3
// max-message-size; part 5: SASL), Microsoft's
// service-bus-amqp-protocol-guide.md (SASL PLAIN with the rule's name and
// key; ANONYMOUS then CBS), and frame traces of Service Bus
// (smallrye/smallrye-reactive-messaging#987, Azure/azure-sdk-for-java#31966).

type wireClient struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

func wireDial(t *testing.T, b *Bus) *wireClient {
	t.Helper()
	nc, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return &wireClient{t: t, nc: nc, r: bufio.NewReaderSize(nc, 64<<10)}
}

func (c *wireClient) send(f amqp.Frame) error {
	b, err := amqp.AppendFrame(nil, f)
	if err != nil {
		c.t.Fatal(err)
	}
	_, err = c.nc.Write(b)
	return err
}

func (c *wireClient) mustSend(f amqp.Frame) {
	c.t.Helper()
	if err := c.send(f); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

func (c *wireClient) read(d time.Duration) (amqp.Frame, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(d))
	defer func() { _ = c.nc.SetReadDeadline(time.Time{}) }()
	return amqp.ReadFrame(c.r, 1<<20)
}

// expect reads frames until one of code arrives within d.
func (c *wireClient) expect(code uint64, d time.Duration) amqp.Frame {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		f, err := c.read(time.Until(deadline))
		if err != nil {
			c.t.Fatalf("waiting for %#x: %v", code, err)
		}
		if f.Body != nil && f.Body.Code == code {
			return f
		}
		if f.Body != nil && f.Body.Code == amqp.CodeClose && code != amqp.CodeClose {
			c.t.Fatalf("waiting for %#x: the bus closed the connection: %v", code, amqp.AsError(f.Body.Field(0)))
		}
	}
}

func (c *wireClient) header(h []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(h); err != nil {
		c.t.Fatal(err)
	}
	got := make([]byte, 8)
	_ = c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c.r, got); err != nil || !bytes.Equal(got, h) {
		c.t.Fatalf("header: % x, %v", got, err)
	}
	_ = c.nc.SetReadDeadline(time.Time{})
}

// sasl runs SASL with mechanism and initial response; it returns the
// mechanisms offered and the outcome's code.
func (c *wireClient) sasl(mechanism string, initial []byte) (offered []string, code uint8) {
	c.t.Helper()
	c.header(amqp.HeaderSASL)
	m := c.expect(amqp.CodeSASLMechanisms, 5*time.Second)
	switch v := m.Body.Field(0).(type) {
	case amqp.Array:
		for _, s := range v {
			sym, _ := s.(amqp.Symbol)
			offered = append(offered, string(sym))
		}
	case amqp.Symbol:
		offered = []string{string(v)}
	}
	var init any
	if initial != nil {
		init = initial
	}
	c.mustSend(amqp.Frame{Type: amqp.FrameSASL, Body: amqp.New(amqp.CodeSASLInit, amqp.Symbol(mechanism), init)})
	out := c.expect(amqp.CodeSASLOutcome, 5*time.Second)
	v, _ := amqp.Uint(out.Body.Field(0))
	return offered, uint8(v)
}

// connect: SASL with mechanism, then open and a session; the bus's open.
func (c *wireClient) connect(mechanism string, initial []byte) *amqp.Performative {
	c.t.Helper()
	if _, code := c.sasl(mechanism, initial); code != 0 {
		c.t.Fatalf("sasl %s: outcome %d", mechanism, code)
	}
	c.header(amqp.HeaderAMQP)
	c.mustSend(amqp.Frame{Body: amqp.New(amqp.CodeOpen, "wire-client", "localhost")})
	open := c.expect(amqp.CodeOpen, 5*time.Second)
	c.mustSend(amqp.Frame{Body: amqp.New(amqp.CodeBegin, nil, uint32(0), uint32(1<<20), uint32(1<<20))})
	c.expect(amqp.CodeBegin, 5*time.Second)
	return open.Body
}

// attach attaches a link: sender (the client sends to address) or receiver.
func (c *wireClient) attach(handle uint32, name, address string, sender bool) {
	src, tgt := amqp.New(amqp.CodeSource, name), amqp.New(amqp.CodeTarget, address)
	var initial any = uint32(0)
	if !sender {
		src, tgt, initial = amqp.New(amqp.CodeSource, address), amqp.New(amqp.CodeTarget, name), nil
	}
	c.mustSend(amqp.Frame{Body: amqp.New(amqp.CodeAttach, name, handle, !sender, uint8(0), uint8(0),
		src.Described(), tgt.Described(), nil, nil, initial)})
}

// attached waits for the bus's attach of a link and says whether it was
// accepted (a terminus) or refused (none, and a detach with an error).
func (c *wireClient) attached() (ok bool, err *amqp.Error) {
	c.t.Helper()
	a := c.expect(amqp.CodeAttach, 5*time.Second).Body
	if a.Field(5) != nil || a.Field(6) != nil {
		return true, nil
	}
	d := c.expect(amqp.CodeDetach, 5*time.Second).Body
	return false, amqp.AsError(d.Field(2))
}

func (c *wireClient) transfer(handle, id uint32, first, settled, more bool, payload []byte) error {
	var idf, tag, format any
	if first {
		idf, tag, format = id, []byte(fmt.Sprint(id)), uint32(0)
	}
	return c.send(amqp.Frame{Body: amqp.New(amqp.CodeTransfer, handle, idf, tag, format, settled, more), Payload: payload})
}

// putToken runs a CBS put-token for audience over $cbs (handles 10 and 11)
// and returns the status code.
func (c *wireClient) putToken(b *Bus, audience string) int32 {
	c.t.Helper()
	c.attach(10, "cbs-sender", "$cbs", true)
	if ok, err := c.attached(); !ok {
		c.t.Fatalf("$cbs sender refused: %v", err)
	}
	c.attach(11, "cbs-reply", "$cbs", false)
	if ok, err := c.attached(); !ok {
		c.t.Fatalf("$cbs receiver refused: %v", err)
	}
	c.mustSend(amqp.Frame{Body: amqp.New(amqp.CodeFlow, uint32(0), uint32(1<<20), uint32(0), uint32(1<<20), uint32(11), uint32(0), uint32(10))})
	req := &amqp.Message{ApplicationProperties: amqp.Map{"operation": "put-token", "type": "servicebus.windows.net:sastoken", "name": audience},
		Value: sasToken(audience, b.keyName, b.key, time.Now().Add(time.Hour)), HasValue: true}
	req.SetProp(amqp.PropMessageID, "put-1")
	req.SetProp(amqp.PropReplyTo, "cbs-reply")
	payload, err := req.Marshal()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := c.transfer(10, 1_000_000, true, true, false, payload); err != nil {
		c.t.Fatal(err)
	}
	f := c.expect(amqp.CodeTransfer, 5*time.Second)
	res, err := amqp.UnmarshalMessage(f.Payload)
	if err != nil {
		c.t.Fatal(err)
	}
	status, _ := res.ApplicationProperties["status-code"].(int32)
	return status
}

// sasToken is a SharedAccessSignature as the SDKs write it (service-bus-sas.md).
func sasToken(audience, keyName, key string, until time.Time) string {
	sr := url.QueryEscape(audience)
	se := fmt.Sprint(until.Unix())
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(sr + "\n" + se))
	sig := url.QueryEscape(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	return fmt.Sprintf("SharedAccessSignature sr=%s&sig=%s&se=%s&skn=%s", sr, sig, se, keyName)
}

func plain(user, pass string) []byte { return []byte("\x00" + user + "\x00" + pass) }

func startWireBus(t *testing.T, queues map[string]QueueProperties) (*Bus, map[string]*Queue) {
	t.Helper()
	qs := map[string]*Queue{}
	for name, p := range queues {
		qs[name] = NewQueue(name, p)
	}
	b, err := StartBus("127.0.0.1:0", qs, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b, qs
}

// heapInUse is the heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// residentKB is the process's resident set (Linux), 0 where unknown.
func residentKB() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int
			_, _ = fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), &kb)
			return kb
		}
	}
	return 0
}

// sendUnfinished sends total bytes of unfinished deliveries on handle, in
// frames of frame bytes; a new delivery starts every perDelivery bytes
// (0: one delivery). Write errors end it (the bus may have closed).
func (c *wireClient) sendUnfinished(handle uint32, total, frame, perDelivery int) error {
	chunk := bytes.Repeat([]byte("x"), frame)
	id := uint32(0)
	inDelivery := 0
	for sent := 0; sent < total; sent += frame {
		first := inDelivery == 0
		if err := c.transfer(handle, id, first, false, true, chunk); err != nil {
			return err
		}
		inDelivery += frame
		if perDelivery > 0 && inDelivery >= perDelivery {
			inDelivery = 0
			id++
		}
	}
	return nil
}

// TestWireUnfinishedDeliveriesBounded: 200 MiB of one unfinished
// multi-frame delivery on an unauthenticated $cbs link. The bus holds a
// delivery to the max-message-size it declared for the link (none on
// $cbs: the control-link limit, AMQP 1.0 part 2, 2.7.3): the frame that
// would cross it frees what was buffered, and what follows is only
// counted. The heap in use afterwards stays within a few limits, where it
// held the whole 200 MiB (and more) before; when the delivery ends it is
// refused with amqp:link:message-size-exceeded and its whole size
// (service-bus-quotas.md: "rejected, and an exception is received by the
// calling code").
//
// Not parallel: it measures the heap, which other tests would move.
func TestWireUnfinishedDeliveriesBounded(t *testing.T) {
	b, _ := startWireBus(t, map[string]QueueProperties{"orders": {}})
	before := heapInUse()
	rssBefore := residentKB()
	c := wireDial(t, b)
	c.connect("ANONYMOUS", nil)
	c.attach(0, "cbs", "$cbs", true)
	if ok, err := c.attached(); !ok {
		t.Fatalf("$cbs refused: %v", err)
	}
	const total = 200 << 20
	start := time.Now()
	if err := c.sendUnfinished(0, total, 32<<10, 0); err != nil {
		t.Fatalf("after %v: %v", time.Since(start), err)
	}
	// A round trip (a second session's begin) makes sure the bus has read
	// every frame sent before it.
	c.mustSend(amqp.Frame{Channel: 1, Body: amqp.New(amqp.CodeBegin, nil, uint32(0), uint32(100), uint32(100))})
	seen := c.until(1, amqp.CodeBegin, 30*time.Second)
	grown := int64(heapInUse()) - int64(before)
	t.Logf("one link, %d MiB of one unfinished delivery: heap in use grew by %.1f MiB (resident %d → %d MiB) in %v",
		total>>20, float64(grown)/(1<<20), rssBefore>>10, residentKB()>>10, time.Since(start).Round(time.Millisecond))
	if limit := int64(4 * controlMessageBytes); grown > limit {
		t.Errorf("heap in use grew by %d bytes after %d MiB of an unfinished delivery: over %d", grown, total>>20, limit)
	}
	for _, f := range seen {
		if f.Body.Code == amqp.CodeDetach {
			t.Fatalf("the $cbs link was detached: %v", f.Body)
		}
	}
	if err := c.transfer(0, 0, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	d := c.expect(amqp.CodeDisposition, 10*time.Second)
	st := amqp.AsPerformative(d.Body.Field(4))
	if st == nil || st.Code != amqp.CodeRejected {
		t.Fatalf("the delivery's outcome: %v, want rejected", d.Body)
	}
	want := fmt.Sprintf("size:%d bytes", total)
	if e := amqp.AsError(st.Field(0)); e == nil || e.Condition != amqp.ErrMessageSizeExceed || !strings.Contains(e.Description, want) {
		t.Fatalf("the delivery's outcome: %v, want %s with %s", e, amqp.ErrMessageSizeExceed, want)
	}
}

// until reads frames until one of code on channel ch; it returns the
// frames read before it.
func (c *wireClient) until(ch uint16, code uint64, d time.Duration) []amqp.Frame {
	c.t.Helper()
	var seen []amqp.Frame
	deadline := time.Now().Add(d)
	for {
		f, err := c.read(time.Until(deadline))
		if err != nil {
			c.t.Fatalf("waiting for %#x on channel %d: %v", code, ch, err)
		}
		if f.Body == nil {
			continue
		}
		if f.Body.Code == code && f.Channel == ch {
			return seen
		}
		seen = append(seen, f)
	}
}

// TestWireManyPartlyFilledLinksBounded: the per-connection picture. 200
// $cbs links each hold a delivery filled to half the control-link limit:
// each is kept (none crossed its limit), so the connection holds at most
// 200 half-limits; the links' detach and the connection's close give it
// all back.
//
// Not parallel: it measures the heap, which other tests would move.
func TestWireManyPartlyFilledLinksBounded(t *testing.T) {
	b, _ := startWireBus(t, map[string]QueueProperties{"orders": {}})
	before := heapInUse()
	c := wireDial(t, b)
	c.connect("ANONYMOUS", nil)
	const links = 200
	per := controlMessageBytes / 2
	for h := uint32(0); h < links; h++ {
		c.attach(h, fmt.Sprintf("cbs-%d", h), "$cbs", true)
		if ok, err := c.attached(); !ok {
			t.Fatalf("$cbs link %d refused: %v", h, err)
		}
		if err := c.sendUnfinished(h, per, 32<<10, 0); err != nil {
			t.Fatal(err)
		}
	}
	c.mustSend(amqp.Frame{Channel: 1, Body: amqp.New(amqp.CodeBegin, nil, uint32(0), uint32(100), uint32(100))})
	c.until(1, amqp.CodeBegin, 10*time.Second)
	held := int64(heapInUse()) - int64(before)
	t.Logf("%d links each with %d KiB of an unfinished delivery (%d MiB sent): heap in use grew by %.1f MiB",
		links, per>>10, links*per>>20, float64(held)/(1<<20))
	if bound := int64(links) * int64(controlMessageBytes); held > bound {
		t.Fatalf("held %d bytes: over %d links × the %d-byte limit", held, links, controlMessageBytes)
	}
	for h := uint32(0); h < links; h++ {
		c.mustSend(amqp.Frame{Body: amqp.New(amqp.CodeDetach, h, true)})
	}
	c.mustSend(amqp.Frame{Channel: 2, Body: amqp.New(amqp.CodeBegin, nil, uint32(0), uint32(100), uint32(100))})
	c.until(2, amqp.CodeBegin, 10*time.Second)
	after := int64(heapInUse()) - int64(before)
	t.Logf("after the links' detach: heap in use %.1f MiB above the start", float64(after)/(1<<20))
	if after > 8<<20 {
		t.Fatalf("after every link's detach the bus still holds %d bytes", after)
	}
}

// TestWireSASLPlainChecked: PLAIN is checked against the namespace's
// SharedAccessKeyName and SharedAccessKey, as Service Bus takes it ("the
// name of a rule is used as the user name and the key ... as the
// password", service-bus-amqp-protocol-guide.md): a wrong key or name
// fails with sasl-outcome auth (code 1, AMQP 1.0 part 5, 5.3.3.6); the
// right one opens a connection whose links need no CBS token (the rule's
// rights govern it). ANONYMOUS and MSSBCBS (no credentials: CBS follows;
// azure-uamqp-c sasl_mssbcbs.c sends an empty initial response) succeed,
// their links still needing a token; EXTERNAL (TLS client certificates)
// is not offered.
func TestWireSASLPlainChecked(t *testing.T) {
	t.Parallel()
	b, qs := startWireBus(t, map[string]QueueProperties{"orders": {}})
	for _, tc := range []struct {
		name, mech string
		initial    []byte
		want       uint8
	}{
		{"wrong key", "PLAIN", plain(BusKeyName, "not-the-key"), 1},
		{"wrong key name", "PLAIN", plain("SomeoneElse", BusKey), 1},
		{"no separators", "PLAIN", []byte(BusKeyName + BusKey), 1},
		{"no initial response", "PLAIN", nil, 1},
		{"authzid given", "PLAIN", []byte("someone\x00" + BusKeyName + "\x00" + BusKey), 0},
		{"right key", "PLAIN", plain(BusKeyName, BusKey), 0},
		{"anonymous", "ANONYMOUS", nil, 0},
		{"mssbcbs", "MSSBCBS", nil, 0},
		{"external", "EXTERNAL", nil, 1},
	} {
		c := wireDial(t, b)
		offered, code := c.sasl(tc.mech, tc.initial)
		if strings.Join(offered, ",") != "MSSBCBS,PLAIN,ANONYMOUS" {
			t.Errorf("%s: offered %v", tc.name, offered)
		}
		if code != tc.want {
			t.Errorf("%s: sasl-outcome %d, want %d", tc.name, code, tc.want)
		}
		_ = c.nc.Close()
	}

	// The right key authorizes the connection: a sender to the queue is
	// accepted without $cbs, and what it sends is enqueued.
	c := wireDial(t, b)
	c.connect("PLAIN", plain(BusKeyName, BusKey))
	c.attach(0, "sender", "orders", true)
	if ok, err := c.attached(); !ok {
		t.Fatalf("a PLAIN-authenticated connection's sender was refused: %v", err)
	}
	msg := &amqp.Message{Data: [][]byte{[]byte("hello")}}
	msg.SetProp(amqp.PropMessageID, "m-1")
	payload, _ := msg.Marshal()
	if err := c.transfer(0, 0, true, false, false, payload); err != nil {
		t.Fatal(err)
	}
	disp := c.expect(amqp.CodeDisposition, 5*time.Second)
	if st := amqp.AsPerformative(disp.Body.Field(4)); st == nil || st.Code != amqp.CodeAccepted {
		t.Fatalf("send on a PLAIN-authenticated connection: %v", disp.Body)
	}
	if st := qs["orders"].Stats(); st.Active != 1 {
		t.Fatalf("queue after the send: %+v", st)
	}

	// MSSBCBS, like ANONYMOUS, authorizes nothing by itself.
	c = wireDial(t, b)
	c.connect("MSSBCBS", nil)
	c.attach(0, "sender", "orders", true)
	if ok, err := c.attached(); ok || err == nil || err.Condition != amqp.ErrUnauthorized {
		t.Fatalf("an MSSBCBS connection's sender without a token: accepted %v, %v", ok, err)
	}
	if status := c.putToken(b, "sb://"+b.Addr()+"/orders"); status != 202 {
		t.Fatalf("put-token: %d", status)
	}
	c.attach(1, "sender-2", "orders", true)
	if ok, err := c.attached(); !ok {
		t.Fatalf("after put-token the sender was refused: %v", err)
	}
}

// TestWireTransferOnARefusedLink: a sender link the bus refused (no token)
// has no credit; what the client sends on it before its own detach is
// dropped (AMQP 1.0 part 2, 2.6.7: a transfer with no link credit is an
// error), and the bus goes on serving the connection.
func TestWireTransferOnARefusedLink(t *testing.T) {
	t.Parallel()
	b, qs := startWireBus(t, map[string]QueueProperties{"orders": {}})
	c := wireDial(t, b)
	c.connect("ANONYMOUS", nil)
	c.attach(0, "sender", "orders", true)
	if ok, _ := c.attached(); ok {
		t.Fatal("a sender without a token was accepted")
	}
	msg := &amqp.Message{Data: [][]byte{[]byte("sneaked")}}
	payload, _ := msg.Marshal()
	for i := uint32(0); i < 3; i++ {
		if err := c.transfer(0, i, true, false, false, payload); err != nil {
			t.Fatal(err)
		}
	}
	c.mustSend(amqp.Frame{Body: amqp.New(amqp.CodeDetach, uint32(0), true)})
	if status := c.putToken(b, "sb://"+b.Addr()+"/orders"); status != 202 {
		t.Fatalf("put-token after the refused link: %d", status)
	}
	if st := qs["orders"].Stats(); st.Active != 0 {
		t.Fatalf("what was sent on a refused link was enqueued: %+v", st)
	}
}

// TestWireIdleTimeout: the bus advertises 240,000 ms as idle-time-out, as
// Service Bus does (its open in the traces of
// smallrye/smallrye-reactive-messaging#987 and Azure/azure-sdk-for-python#5316),
// which by AMQP 1.0 part 2, 2.4.5 is half its threshold; a connection that
// sends half a frame and goes silent is closed with
// amqp:resource-limit-exceeded once the threshold passes (scaled down here).
func TestWireIdleTimeout(t *testing.T) {
	t.Parallel()
	b, _ := startWireBus(t, map[string]QueueProperties{"orders": {}})
	c := wireDial(t, b)
	open := c.connect("ANONYMOUS", nil)
	if v, ok := amqp.Uint(open.Field(4)); !ok || v != 240_000 {
		t.Fatalf("the bus's open advertises idle-time-out %v, want 240000", open.Field(4))
	}
	_ = c.nc.Close()

	const idle = 800 * time.Millisecond
	b.setLimits(busLimits{idle: idle})
	c = wireDial(t, b)
	open = c.connect("ANONYMOUS", nil)
	if v, _ := amqp.Uint(open.Field(4)); v != uint64(idle/time.Millisecond/2) {
		t.Fatalf("idle-time-out %v, want %d", open.Field(4), idle/time.Millisecond/2)
	}
	start := time.Now()
	if _, err := c.nc.Write([]byte{0, 0, 1, 0, 2}); err != nil { // half a frame header
		t.Fatal(err)
	}
	f := c.expect(amqp.CodeClose, idle+3*time.Second)
	if e := amqp.AsError(f.Body.Field(0)); e == nil || e.Condition != amqp.ErrResourceLimit {
		t.Fatalf("close error %v, want %s", e, amqp.ErrResourceLimit)
	}
	if el := time.Since(start); el < idle-100*time.Millisecond {
		t.Fatalf("closed after %v, before the %v threshold", el, idle)
	}
	if _, err := c.read(2 * time.Second); err == nil {
		t.Fatal("the socket stayed open after the close")
	}

	// A peer that stops inside the protocol header is dropped too.
	b.setLimits(busLimits{idle: idle, handshake: 500 * time.Millisecond})
	c = wireDial(t, b)
	if _, err := c.nc.Write([]byte("AMQP")); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if _, err := c.read(3 * time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("half a protocol header: %v after %v", err, time.Since(start))
	}
}

// TestWireSDKsStayConnectedWhenQuiet: go-amqp (azservicebus) and rhea
// (@azure/service-bus) send empty frames at half the idle-time-out the
// server advertises (go-amqp conn.go; rhea connection.js); with the
// threshold scaled down to 1 s, a client quiet for 5 s (five thresholds)
// keeps its one connection and goes on working.
func TestWireSDKsStayConnectedWhenQuiet(t *testing.T) {
	t.Parallel()
	const idle = time.Second
	b, qs := startWireBus(t, map[string]QueueProperties{"orders": {}})
	b.setLimits(busLimits{idle: idle})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client, err := azservicebus.NewClientFromConnectionString(b.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(ctx)
	sender, err := client.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sender.SendMessage(ctx, &azservicebus.Message{Body: []byte("before")}, nil); err != nil {
		t.Fatal(err)
	}
	accepted := b.accepted.Load()
	time.Sleep(5 * idle)
	if err := sender.SendMessage(ctx, &azservicebus.Message{Body: []byte("after")}, nil); err != nil {
		t.Fatal(err)
	}
	if n := b.accepted.Load(); n != accepted {
		t.Fatalf("azservicebus opened %d connection(s) more across a quiet %v", n-accepted, 5*idle)
	}
	if st := qs["orders"].Stats(); st.Active != 2 {
		t.Fatalf("queue: %+v", st)
	}

	// rhea, through @azure/service-bus.
	modules := jsModules(t)
	dir := t.TempDir()
	script := `
const { ServiceBusClient } = require("@azure/service-bus");
(async () => {
  const client = new ServiceBusClient(process.env.CS);
  const sender = client.createSender("orders");
  await sender.sendMessages({ body: "js-before" });
  console.log("sent");
  await new Promise((r) => setTimeout(r, Number(process.env.QUIET_MS)));
  await sender.sendMessages({ body: "js-after" });
  console.log("sent again");
  await client.close();
})().catch((e) => { console.error(e); process.exit(1); });
`
	if err := os.WriteFile(filepath.Join(dir, "quiet.js"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "node", "quiet.js")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CS="+b.ConnectionString(), fmt.Sprintf("QUIET_MS=%d", (5*idle).Milliseconds()))
	cmd.Stdout = &lineWriter{t: t}
	cmd.Stderr = cmd.Stdout
	var sentFirst bool
	before := b.accepted.Load()
	lw := cmd.Stdout.(*lineWriter)
	lw.onLine = func(line string) {
		if line == "sent" && !sentFirst {
			sentFirst = true
			before = b.accepted.Load()
		}
	}
	if err := cmd.Run(); err != nil {
		t.Fatalf("node: %v", err)
	}
	if !sentFirst {
		t.Fatal("the JavaScript SDK never sent")
	}
	if n := b.accepted.Load(); n != before {
		t.Fatalf("@azure/service-bus opened %d connection(s) more across a quiet %v", n-before, 5*idle)
	}
	if st := qs["orders"].Stats(); st.Active != 4 {
		t.Fatalf("queue after the JavaScript SDK: %+v", st)
	}
}

// lineWriter logs a process's output line by line.
type lineWriter struct {
	t      *testing.T
	buf    []byte
	onLine func(string)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(w.buf[:i])
		w.buf = w.buf[i+1:]
		w.t.Log(line)
		if w.onLine != nil {
			w.onLine(line)
		}
	}
}
