package devbus

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/convoy-dev/convoy/handler/internal/amqp"
)

// Bus is the emulated namespace's AMQP 1.0 face: any Service Bus SDK
// connects to it with the connection string it prints, over plain TCP, as
// to the Service Bus emulator (UseDevelopmentEmulator=true). Behind it are
// the same queues the emulated trigger reads. What it does, and where each
// behaviour comes from, is in docs/host-contract.md ("Service Bus on the
// wire"); bus_links.go attaches the links (bus_receive.go and bus_settle.go
// the receivers, bus_messages.go the messages on the wire), bus_management.go
// serves the $cbs and $management nodes.
type Bus struct {
	queues  map[string]*Queue // by lower-case name: entity names are case-insensitive
	keyName string
	key     string
	log     *log.Logger
	trace   io.Writer // DEVHOST_AMQP_TRACE=1: every frame, to stderr

	mu     sync.Mutex
	ln     net.Listener
	addr   string
	conns  map[*busConn]struct{}
	fault  Fault
	faultC chan struct{} // closed and replaced when the fault changes
	closed bool
	wg     sync.WaitGroup
	limits busLimits
	// accepted counts the connections accepted (tests: a client that
	// stays connected opens no other).
	accepted atomic.Int64
}

// busLimits are the connection limits the bus serves with.
type busLimits struct {
	idle      time.Duration // the idle threshold (half of it advertised)
	handshake time.Duration // protocol headers, SASL and open
}

const (
	// idleThreshold: Service Bus's open advertises idle-time-out 240,000
	// ms (frame traces: smallrye/smallrye-reactive-messaging#987,
	// Azure/azure-sdk-for-python#5316), which AMQP 1.0 (part 2, 2.4.5)
	// makes half the threshold; the SDKs send an empty frame every half
	// advertised value (go-amqp conn.go, rhea connection.js).
	idleThreshold = 2 * 240 * time.Second
	// handshakeTimeout bounds the protocol headers, SASL and the open: no
	// source gives Service Bus's bound; 30 s, the engine's own.
	handshakeTimeout = 30 * time.Second
	// controlMessageBytes bounds a delivery on a link whose node declares
	// no max-message-size ($cbs, $management: Service Bus declares
	// 2^64-1 on $cbs, trace in Azure/azure-sdk-for-python#37916, and
	// bounds it where no source says): room for a request carrying one
	// message of the entity's size (schedule-message) and its envelope.
	controlMessageBytes = 2 * MaxMessageBytes
)

// setLimits changes the limits new connections are served with (tests).
func (b *Bus) setLimits(l busLimits) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.limits = l
}

// The emulator's well-known credentials (docs/host-contract.md, "Connections").
const (
	BusKeyName = "RootManageSharedAccessKey"
	BusKey     = "SAS_KEY_VALUE"
)

// MaxMessageBytes is the largest message (or batch) a queue takes: 256 KB,
// Service Bus Standard's limit (service-bus-quotas.md).
const MaxMessageBytes = 256 * 1024

// Fault is what the bus does instead of serving, switchable at run time.
type Fault struct {
	// Refuse closes the listener and drops the open connections:
	// connections are refused, as when nothing listens.
	Refuse bool
	// Stall accepts connections and reads, but answers nothing, on new and
	// existing connections alike (a black-holed network path).
	Stall bool
	// Condition, when set, answers every attach, transfer and management
	// request with this error (e.g. com.microsoft:server-busy,
	// com.microsoft:timeout) instead of serving it; $cbs still answers.
	Condition amqp.Symbol
}

// StartBus listens on addr ("127.0.0.1:0" picks a port) for the queues.
func StartBus(addr string, queues map[string]*Queue, logger *log.Logger) (*Bus, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	b := &Bus{queues: map[string]*Queue{}, keyName: BusKeyName, key: BusKey, log: logger, ln: ln,
		addr: ln.Addr().String(), conns: map[*busConn]struct{}{}, faultC: make(chan struct{}),
		limits: busLimits{idle: idleThreshold, handshake: handshakeTimeout}}
	if os.Getenv("DEVHOST_AMQP_TRACE") == "1" {
		b.trace = os.Stderr
	}
	for name, q := range queues {
		b.queues[strings.ToLower(name)] = q
	}
	b.wg.Add(1)
	go b.accept(ln)
	return b, nil
}

// Addr is the host:port the bus listens on.
func (b *Bus) Addr() string { return b.addr }

// ConnectionString is what a client connects with.
func (b *Bus) ConnectionString() string {
	return fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=%s;SharedAccessKey=%s;UseDevelopmentEmulator=true;", b.addr, b.keyName, b.key)
}

// SetFault switches the bus's fault (Fault{} serves normally again). Refuse
// also drops the open connections: an outage ends them, and clients must
// reconnect to a listener that is gone.
func (b *Bus) SetFault(f Fault) error {
	if err := b.setFault(f); err != nil {
		return err
	}
	if f.Refuse {
		b.DropConnections()
	}
	return nil
}

func (b *Bus) setFault(f Fault) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	if f.Refuse && b.ln != nil {
		_ = b.ln.Close()
		b.ln = nil
	}
	if !f.Refuse && b.ln == nil {
		ln, err := net.Listen("tcp", b.addr)
		if err != nil {
			return fmt.Errorf("listen again on %s: %w", b.addr, err)
		}
		b.ln = ln
		b.wg.Add(1)
		go b.accept(ln)
	}
	b.fault = f
	close(b.faultC)
	b.faultC = make(chan struct{})
	return nil
}

func (b *Bus) currentFault() (Fault, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fault, b.faultC
}

// DropConnections closes every open connection without a close frame, as
// a network fault would; clients reconnect.
func (b *Bus) DropConnections() int {
	b.mu.Lock()
	conns := make([]*busConn, 0, len(b.conns))
	for c := range b.conns {
		conns = append(conns, c)
	}
	b.mu.Unlock()
	for _, c := range conns {
		c.drop()
	}
	return len(conns)
}

// Close stops listening and closes every connection.
func (b *Bus) Close() {
	b.mu.Lock()
	b.closed = true
	if b.ln != nil {
		_ = b.ln.Close()
		b.ln = nil
	}
	close(b.faultC)
	b.faultC = make(chan struct{})
	b.mu.Unlock()
	b.DropConnections()
	b.wg.Wait()
}

func (b *Bus) accept(ln net.Listener) {
	defer b.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.serve(nc)
		}()
	}
}

func (b *Bus) serve(nc net.Conn) {
	c := &busConn{bus: b, nc: nc, claims: map[string]time.Time{}, replies: map[string]*amqp.Link{}}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		_ = nc.Close()
		return
	}
	b.conns[c] = struct{}{}
	limits := b.limits
	b.mu.Unlock()
	b.accepted.Add(1)
	defer func() {
		b.mu.Lock()
		delete(b.conns, c)
		b.mu.Unlock()
	}()
	if f, _ := b.currentFault(); f.Stall {
		c.stall() // before the protocol header: a stalled peer never answers it
		return
	}
	err := amqp.Serve(nc, amqp.Config{
		ContainerID: "devhost-servicebus",
		// What Service Bus offers (its sasl-mechanisms in the traces of
		// smallrye/smallrye-reactive-messaging#987 and
		// Azure/azure-sdk-for-java#31966), less EXTERNAL (TLS client
		// certificates: no TLS here). The SDKs take ANONYMOUS for emulator
		// connection strings and authenticate on $cbs.
		Mechanisms:       []amqp.Symbol{"MSSBCBS", "PLAIN", "ANONYMOUS"},
		SASL:             c.sasl,
		MaxMessageSize:   controlMessageBytes,
		IdleTimeout:      limits.idle,
		HandshakeTimeout: limits.handshake,
		Handler:          c,
		Trace:            b.trace,
		OnFrame: func(conn *amqp.Conn, _ amqp.Frame) bool {
			if f, _ := b.currentFault(); f.Stall {
				conn.Silence()
				c.stall()
				return false
			}
			return true
		},
	})
	if err != nil && b.log != nil && !errors.Is(err, net.ErrClosed) {
		b.log.Printf("servicebus: connection from %s: %v", nc.RemoteAddr(), err)
	}
}

// busConn is one client connection: its claims (from $cbs) and its
// request/response reply links.
type busConn struct {
	bus *Bus
	nc  net.Conn

	mu       sync.Mutex
	conn     *amqp.Conn
	claims   map[string]time.Time   // audience path → token expiry
	replies  map[string]*amqp.Link  // reply links by target address and by name
	sessions map[int64]*SessionLock // sessions this connection's receivers hold, by lock token
	dropped  bool
	// rule: the connection authenticated with SASL PLAIN as the
	// namespace's rule, whose rights then govern it (no CBS token needed).
	rule bool
}

// sasl checks a client's SASL init as Service Bus does
// (service-bus-amqp-protocol-guide.md, "Connections and sessions"): PLAIN
// carries a shared access rule's name as the user name and its key as the
// password (RFC 4616: [authzid] NUL authcid NUL passwd), checked against
// the namespace's; ANONYMOUS and MSSBCBS carry no credentials (the client
// then puts a token on $cbs before any link: azure-uamqp-c's
// sasl_mssbcbs.c sends an empty initial response).
func (c *busConn) sasl(mechanism amqp.Symbol, initial []byte) bool {
	switch mechanism {
	case "ANONYMOUS", "MSSBCBS":
		return true
	case "PLAIN":
		parts := bytes.Split(initial, []byte{0})
		if len(parts) != 3 {
			return false
		}
		name := subtle.ConstantTimeCompare(parts[1], []byte(c.bus.keyName))
		key := subtle.ConstantTimeCompare(parts[2], []byte(c.bus.key))
		if name&key != 1 {
			return false
		}
		c.mu.Lock()
		c.rule = true
		c.mu.Unlock()
		return true
	}
	return false
}

// stall reads and discards until the fault changes or the connection ends.
func (c *busConn) stall() {
	buf := make([]byte, 4096)
	for {
		_ = c.nc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := c.nc.Read(buf); err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				return
			}
		}
		if f, _ := c.bus.currentFault(); !f.Stall {
			_ = c.nc.Close() // the client's connection is in an unknown state: it reconnects
			return
		}
	}
}

func (c *busConn) drop() {
	c.mu.Lock()
	c.dropped = true
	conn := c.conn
	c.mu.Unlock()
	if conn != nil {
		conn.Drop()
	}
	_ = c.nc.Close()
}

// entity splits an address into the queue and what follows it ("", or
// "$deadletterqueue", "$management", "$deadletterqueue/$management"). An
// address may be a path or a URI (amqps://host/queue).
func (b *Bus) entity(address string) (q *Queue, rest string, err *amqp.Error) {
	if i := strings.Index(address, "://"); i >= 0 {
		address = address[i+3:]
		if j := strings.IndexByte(address, '/'); j >= 0 {
			address = address[j+1:]
		} else {
			address = ""
		}
	}
	name, rest, _ := strings.Cut(strings.Trim(address, "/"), "/")
	q = b.queues[strings.ToLower(name)]
	if q == nil {
		return nil, "", &amqp.Error{Condition: amqp.ErrNotFound, Description: fmt.Sprintf("The messaging entity '%s' could not be found.", name)}
	}
	return q, strings.ToLower(rest), nil
}

// missingEntity is the not-found error of an address that names no queue
// or no part of one (a subscription under a queue's name, say), nil when
// the address is an entity of the namespace.
func (b *Bus) missingEntity(address string) *amqp.Error {
	_, rest, err := b.entity(address)
	if err != nil {
		return err
	}
	switch rest {
	case "", "$deadletterqueue", "$management", "$deadletterqueue/$management":
		return nil
	}
	return &amqp.Error{Condition: amqp.ErrNotFound, Description: fmt.Sprintf("The messaging entity '%s' could not be found.", strings.Trim(address, "/"))}
}

// authorized: a put-token for the address (or a path above it) that has not
// expired.
func (c *busConn) authorized(address string) bool {
	path := audiencePath(address)
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rule {
		return true
	}
	for aud, until := range c.claims {
		if now.Before(until) && (aud == "" || path == aud || strings.HasPrefix(path, aud+"/")) {
			return true
		}
	}
	return false
}

// audiencePath is an audience or address without scheme and host, in lower case.
func audiencePath(a string) string {
	if i := strings.Index(a, "://"); i >= 0 {
		a = a[i+3:]
		if j := strings.IndexByte(a, '/'); j >= 0 {
			a = a[j:]
		} else {
			a = ""
		}
	}
	return strings.ToLower(strings.Trim(a, "/"))
}

// checkToken validates a SharedAccessSignature token (sr, sig, se, skn):
// the key name, the HMAC-SHA256 of "<sr as sent>\n<se>" with the key, and
// the expiry, as Service Bus does (service-bus-sas.md). It returns the
// audience path and the expiry.
func (b *Bus) checkToken(token string) (string, time.Time, error) {
	rest, ok := strings.CutPrefix(token, "SharedAccessSignature ")
	if !ok {
		return "", time.Time{}, errors.New("InvalidToken: the token is not a SharedAccessSignature")
	}
	fields := map[string]string{}
	for _, kv := range strings.Split(rest, "&") {
		k, v, _ := strings.Cut(kv, "=")
		fields[k] = v
	}
	sr, sig, se, skn := fields["sr"], fields["sig"], fields["se"], fields["skn"]
	if skn != b.keyName {
		return "", time.Time{}, fmt.Errorf("InvalidSignature: the key name %q is not %q", skn, b.keyName)
	}
	mac := hmac.New(sha256.New, []byte(b.key))
	mac.Write([]byte(sr + "\n" + se))
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	got, err := url.QueryUnescape(sig)
	if err != nil || !hmac.Equal([]byte(got), []byte(want)) {
		return "", time.Time{}, errors.New("InvalidSignature: the token has an invalid signature")
	}
	secs, err := strconv.ParseInt(se, 10, 64)
	if err != nil {
		return "", time.Time{}, errors.New("InvalidToken: se is not a number")
	}
	until := time.Unix(secs, 0)
	if !time.Now().Before(until) {
		return "", time.Time{}, errors.New("ExpiredToken: the token is expired")
	}
	aud, err := url.QueryUnescape(sr)
	if err != nil {
		return "", time.Time{}, errors.New("InvalidToken: sr is not URL-encoded")
	}
	return audiencePath(aud), until, nil
}
