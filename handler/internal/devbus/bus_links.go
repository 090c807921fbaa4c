package devbus

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/convoy-dev/convoy/handler/internal/amqp"
)

// Link semantics of the emulated namespace, from the SDKs' source
// (azservicebus v1.11.0 with go-amqp v1.7.0; @azure/service-bus 7.9 with
// rhea 3) and the Service Bus AMQP docs (service-bus-amqp-protocol-guide.md,
// service-bus-amqp-request-response.md). docs/host-contract.md lists them.

const (
	// batchFormat is the message format of a batch: one envelope whose data
	// sections are the encoded messages (docs/host-contract.md).
	batchFormat uint32 = 0x80013700

	sessionFilter  amqp.Symbol = "com.microsoft:session-filter"
	lockedUntilUTC amqp.Symbol = "com.microsoft:locked-until-utc"
	linkTimeout    amqp.Symbol = "com.microsoft:timeout"
	// scheduledEnqueueTime is the annotation of a scheduled message.
	scheduledEnqueueTime amqp.Symbol = "x-opt-scheduled-enqueue-time"

	// acceptTimeout is how long Service Bus waits for a next available
	// session when the client names no timeout (its operation timeout).
	acceptTimeout = time.Minute
	// senderCredit is the credit kept open on a client's sender link.
	senderCredit = 1000
)

// Broker-written descriptions of its own dead-letter reasons, as the table
// in service-bus-dead-letter-queues.md ("Moving messages to the DLQ") gives them.
var brokerDescriptions = map[string]string{
	ReasonMaxDelivery: "Message couldn't be consumed after maximum delivery attempts.",
	ReasonExpired:     "The message expired and was dead lettered.",
}

func accepted() *amqp.Performative { return amqp.New(amqp.CodeAccepted) }

func rejected(cond amqp.Symbol, format string, args ...any) *amqp.Performative {
	return amqp.New(amqp.CodeRejected, (&amqp.Error{Condition: cond, Description: fmt.Sprintf(format, args...)}).Performative().Described())
}

// Attach implements amqp.Handler: the $cbs node, the $management nodes, and
// the queues' senders and receivers.
func (c *busConn) Attach(l *amqp.Link) (amqp.LinkHandler, *amqp.Error) {
	c.mu.Lock()
	if c.conn == nil {
		c.conn = l.Conn()
	}
	c.mu.Unlock()
	addr := l.Address()
	if addr == "" {
		return nil, &amqp.Error{Condition: amqp.ErrInvalidField, Description: "the link has no address"}
	}
	isCBS := strings.EqualFold(addr, "$cbs")
	var q *Queue
	var rest string
	if !isCBS {
		var err *amqp.Error
		if q, rest, err = c.bus.entity(addr); err != nil {
			return nil, err
		}
		if !c.authorized(addr) {
			return nil, &amqp.Error{Condition: amqp.ErrUnauthorized, Description: fmt.Sprintf("Unauthorized access to '%s': put a token on $cbs first.", addr)}
		}
		if f, _ := c.bus.currentFault(); f.Condition != "" {
			return nil, &amqp.Error{Condition: f.Condition, Description: "The server is busy (emulated fault)."}
		}
	}
	management := isCBS || rest == "$management" || rest == "$deadletterqueue/$management"
	switch {
	case management && !l.ClientSends:
		return c.attachReplies(l)
	case management:
		return c.attachRequests(l, q, strings.TrimSuffix(rest, "$management"))
	case rest != "" && rest != "$deadletterqueue":
		return nil, &amqp.Error{Condition: amqp.ErrNotFound, Description: fmt.Sprintf("The messaging entity '%s' could not be found.", addr)}
	case l.ClientSends && rest != "":
		return nil, &amqp.Error{Condition: amqp.ErrNotAllowed, Description: "Cannot send to a dead-letter queue."}
	case l.ClientSends:
		return c.attachSender(l, q)
	}
	return c.attachReceiver(l, q, rest != "")
}

// replyLinks is the handler of a client's reply link: responses are sent
// on it, found by its target address (azservicebus) or its name (rhea,
// whose reply link has no target address).
type replyLink struct{ c *busConn }

func (c *busConn) attachReplies(l *amqp.Link) (amqp.LinkHandler, *amqp.Error) {
	c.mu.Lock()
	if t, _ := l.Target.Field(0).(string); t != "" {
		c.replies[t] = l
	}
	c.replies[l.Name] = l
	c.mu.Unlock()
	if err := l.AttachReply(l.Source, l.Target, 0, nil); err != nil {
		return nil, &amqp.Error{Condition: amqp.ErrInternal, Description: err.Error()}
	}
	return replyLink{c: c}, nil
}

func (replyLink) Transfer(*amqp.Link, amqp.Delivery) *amqp.Performative { return nil }
func (replyLink) Disposition(*amqp.Link, uint32, []byte, *amqp.Performative) *amqp.Performative {
	return nil
}
func (replyLink) Flow(*amqp.Link) {}
func (r replyLink) Detached(l *amqp.Link, _ *amqp.Error) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	for k, v := range r.c.replies {
		if v == l {
			delete(r.c.replies, k)
		}
	}
}

// senderLink receives what a client sends to a queue.
type senderLink struct {
	c *busConn
	q *Queue
}

func (c *busConn) attachSender(l *amqp.Link, q *Queue) (amqp.LinkHandler, *amqp.Error) {
	if err := l.AttachReply(l.Source, l.Target, MaxMessageBytes, nil); err != nil {
		return nil, &amqp.Error{Condition: amqp.ErrInternal, Description: err.Error()}
	}
	if err := l.Grant(senderCredit); err != nil {
		return nil, &amqp.Error{Condition: amqp.ErrInternal, Description: err.Error()}
	}
	return senderLink{c: c, q: q}, nil
}

// Transfer enqueues one message or a batch, all or nothing, and answers
// with Service Bus's outcome.
func (s senderLink) Transfer(_ *amqp.Link, d amqp.Delivery) *amqp.Performative {
	if f, _ := s.c.bus.currentFault(); f.Condition != "" {
		return rejected(f.Condition, "The server is busy (emulated fault).")
	}
	if len(d.Payload) > MaxMessageBytes {
		return rejected(amqp.ErrMessageSizeExceed, "The received message (delivery-id:%d, size:%d bytes) exceeds the limit (%d bytes) currently allowed on the link.", d.ID, len(d.Payload), MaxMessageBytes)
	}
	msg, err := amqp.UnmarshalMessage(d.Payload)
	if err != nil {
		return rejected(amqp.ErrDecode, "%v", err)
	}
	inner := []*amqp.Message{msg}
	if d.Format == batchFormat {
		inner = inner[:0]
		for i, data := range msg.Data {
			m, err := amqp.UnmarshalMessage(data)
			if err != nil {
				return rejected(amqp.ErrDecode, "batch message %d: %v", i, err)
			}
			inner = append(inner, m)
		}
	}
	msgs := make([]Message, len(inner))
	for i, m := range inner {
		msgs[i] = fromAMQP(m)
	}
	if _, _, err := s.q.Send(msgs); err != nil {
		var se *SendError
		if errors.As(err, &se) {
			return rejected(se.Condition, "%s", se.Error())
		}
		return rejected(amqp.ErrInternal, "%v", err)
	}
	return accepted()
}

func (senderLink) Disposition(*amqp.Link, uint32, []byte, *amqp.Performative) *amqp.Performative {
	return nil
}
func (senderLink) Flow(*amqp.Link)                  {}
func (senderLink) Detached(*amqp.Link, *amqp.Error) {}

// fromAMQP is a received message as the queue keeps it.
func fromAMQP(m *amqp.Message) Message {
	out := Message{AMQP: m, Body: m.Body(), Properties: map[string]any{}}
	switch id := m.Prop(amqp.PropMessageID).(type) {
	case string:
		out.MessageID = id
	case amqp.UUID:
		out.MessageID = id.String()
	case uint64:
		out.MessageID = fmt.Sprint(id)
	case []byte:
		out.MessageID = fmt.Sprintf("%x", id)
	}
	// A group-id present and empty is the empty SessionId (accepted by
	// Service Bus: TestSessionReceiver_blankSessionIDs); absent (null) is none.
	if gid, ok := m.Prop(amqp.PropGroupID).(string); ok {
		out.SessionID, out.EmptySessionID = gid, gid == ""
	}
	// A send that carries x-opt-scheduled-enqueue-time schedules the message
	// (message-sequencing.md: "set the ScheduledEnqueueTimeUtc property on
	// the message before sending"; azservicebus's testScheduleMessages).
	if at, ok := m.MessageAnnotations[scheduledEnqueueTime].(time.Time); ok {
		out.ScheduledEnqueueTime = at
	}
	if ct, ok := m.Prop(amqp.PropContentType).(amqp.Symbol); ok {
		out.ContentType = string(ct)
	}
	for k, v := range m.ApplicationProperties {
		out.Properties[k.(string)] = v
	}
	if ttl, ok := amqp.Uint(m.HeaderField(amqp.HeaderTTL)); ok && ttl > 0 {
		out.TimeToLive = time.Duration(ttl) * time.Millisecond
	}
	return out
}

// toAMQP is a queued message as a receiver gets it: as sent, with the
// broker's header delivery count (previous deliveries), annotations and,
// for a dead letter, its reason and description as application properties.
func toAMQP(m *Message, lockedUntil time.Time, token *amqp.UUID) ([]byte, error) {
	var out amqp.Message
	if m.AMQP != nil {
		out = *m.AMQP
		out.Header = append([]any(nil), m.AMQP.Header...)
		out.Properties = append([]any(nil), m.AMQP.Properties...)
	} else {
		out.Data = [][]byte{m.Body}
		out.SetProp(amqp.PropMessageID, m.MessageID)
		if m.hasSessionID() {
			out.SetProp(amqp.PropGroupID, m.SessionID)
		}
		if m.ContentType != "" {
			out.SetProp(amqp.PropContentType, amqp.Symbol(m.ContentType))
		}
	}
	if out.Properties == nil { // azservicebus reads the header only when properties are present
		out.Properties = []any{}
	}
	out.SetHeader(amqp.HeaderDeliveryCount, uint32(max(m.DeliveryCount-1, 0)))
	props := amqp.Map{}
	for k, v := range m.Properties {
		props[k] = v
	}
	if m.DeadLetterReason != "" {
		desc := m.DeadLetterDescription
		if desc == "" {
			desc = brokerDescriptions[m.DeadLetterReason]
		}
		props["DeadLetterReason"], props["DeadLetterErrorDescription"] = m.DeadLetterReason, desc
	}
	if len(props) > 0 {
		out.ApplicationProperties = props
	}
	ann := amqp.Map{}
	for k, v := range out.MessageAnnotations {
		if v != nil { // a sender's null broker annotations are replaced, not passed on
			ann[k] = v
		}
	}
	ann[amqp.Symbol("x-opt-sequence-number")] = m.SequenceNumber
	ann[amqp.Symbol("x-opt-enqueued-time")] = m.EnqueuedTime
	if !lockedUntil.IsZero() {
		ann[amqp.Symbol("x-opt-locked-until")] = lockedUntil
	}
	if m.State != StateActive {
		// x-opt-message-state: 1 deferred, 2 scheduled (azservicebus
		// message.go, newReceivedMessage; @azure/service-bus likewise).
		ann[amqp.Symbol("x-opt-message-state")] = int32(m.State)
	}
	if !m.ScheduledEnqueueTime.IsZero() {
		ann[scheduledEnqueueTime] = m.ScheduledEnqueueTime
	}
	out.MessageAnnotations = ann
	if token != nil {
		out.DeliveryAnnotations = amqp.Map{amqp.Symbol("x-opt-lock-token"): *token}
	}
	return out.Marshal()
}

// netGUID is a lock token in .NET's Guid.ToByteArray order, as Service Bus
// writes it in a delivery tag (the SDKs swap it back).
func netGUID(u [16]byte) []byte {
	b := u
	b[0], b[1], b[2], b[3] = u[3], u[2], u[1], u[0]
	b[4], b[5] = u[5], u[4]
	b[6], b[7] = u[7], u[6]
	return b[:]
}

// ticks is t as .NET ticks (100 ns since 0001-01-01), as Service Bus
// writes com.microsoft:locked-until-utc.
func ticks(t time.Time) int64 { return t.UnixMilli()*10_000 + 621_355_968_000_000_000 }

// receiverLink delivers a queue's (or its dead-letter sub-queue's)
// messages to a client receiver, as its credit allows.
type receiverLink struct {
	c       *busConn
	q       *Queue
	dead    bool         // the dead-letter sub-queue
	session *SessionLock // a session receiver's session
	deletes bool         // receive-and-delete: sent settled, removed at once
	// A session receiver's request: the session named (nil: the next
	// available one) and how long to wait for one.
	accept     bool
	sessionID  *string
	acceptWait time.Duration
	name       string // the link's name

	mu   sync.Mutex
	done chan struct{}
}

type delivered struct{ lock, seq int64 }

// receivers are the receiver links by connection and link name: a
// $management request names the receiver it is for in its
// associated-link-name application property (azservicebus's mgmt.go:
// addAssociatedLinkName; its ReceiveDeferred sends no session-id), and on a
// session queue that receiver's session is the one the request acts in.
var receivers sync.Map // receiverKey → *receiverLink

type receiverKey struct {
	c    *busConn
	name string
}

// receiverNamed is the connection's receiver link called name, or nil.
func (c *busConn) receiverNamed(name string) *receiverLink {
	if v, ok := receivers.Load(receiverKey{c, name}); ok {
		return v.(*receiverLink)
	}
	return nil
}

func (c *busConn) attachReceiver(l *amqp.Link, q *Queue, dead bool) (amqp.LinkHandler, *amqp.Error) {
	r := &receiverLink{c: c, q: q, dead: dead, deletes: l.SndSettle == 1, name: l.Name, done: make(chan struct{})}
	receivers.Store(receiverKey{c, l.Name}, r)
	filters, _ := l.Source.Field(7).(amqp.Map)
	want, isSession := filters[sessionFilter]
	switch {
	case isSession && (dead || !q.Properties().RequiresSession):
		receivers.CompareAndDelete(receiverKey{c, l.Name}, r)
		return nil, &amqp.Error{Condition: amqp.ErrNotAllowed, Description: fmt.Sprintf("It is not possible for an entity that does not require sessions to create a session receiver: %s", l.Address())}
	case !isSession && !dead && q.Properties().RequiresSession:
		receivers.CompareAndDelete(receiverKey{c, l.Name}, r)
		return nil, &amqp.Error{Condition: amqp.ErrNotAllowed, Description: fmt.Sprintf("It is not possible for an entity that requires sessions to create a non-sessionful message receiver: %s", l.Address())}
	case !isSession:
		if err := l.AttachReply(l.Source, l.Target, 0, nil); err != nil {
			receivers.CompareAndDelete(receiverKey{c, l.Name}, r)
			return nil, &amqp.Error{Condition: amqp.ErrInternal, Description: err.Error()}
		}
		return r, nil
	}
	var id *string
	if d, ok := want.(*amqp.Described); ok {
		want = d.Value
	}
	if s, ok := want.(string); ok {
		id = &s
	}
	r.accept, r.sessionID, r.acceptWait = true, id, acceptTimeout
	if ms, ok := amqp.Uint(l.Properties[linkTimeout]); ok {
		r.acceptWait = time.Duration(ms) * time.Millisecond
	}
	return r, nil
}

// Start implements amqp.Starter: a session receiver's attach is answered
// when a session is locked (accepting the next available one waits; the
// connection goes on meanwhile); then, as for any receiver, messages flow
// as the credit allows.
func (r *receiverLink) Start(l *amqp.Link) {
	if r.accept {
		go r.acceptSession(l, r.sessionID, r.acceptWait)
		return
	}
	go r.deliver(l)
}

func (r *receiverLink) acceptSession(l *amqp.Link, id *string, wait time.Duration) {
	var lock *SessionLock
	if id != nil {
		var err error
		if lock, err = r.q.AcceptNamedSession(*id); err != nil {
			_ = l.Refuse(&amqp.Error{Condition: CondSessionCannotLock, Description: fmt.Sprintf("The requested session '%s' cannot be accepted. It may be locked by another receiver.", *id)})
			return
		}
	} else {
		ctx, cancel := contextUntil(r.done, wait)
		lock = r.q.AcceptSession(ctx, 0)
		cancel()
		if lock == nil {
			_ = l.Refuse(&amqp.Error{Condition: CondTimeout, Description: "The operation did not complete within the allocated time: no unlocked session is available."})
			return
		}
	}
	r.mu.Lock()
	r.session = lock
	r.mu.Unlock()
	r.c.holdSession(lock)
	source := &amqp.Performative{Code: amqp.CodeSource, Fields: append([]any(nil), l.Source.Fields...)}
	filters := amqp.Map{}
	for k, v := range source.Field(7).(amqp.Map) {
		filters[k] = v
	}
	// The session id comes back in the form the client asked in: described
	// for azservicebus (go-amqp reads only a described filter), a plain
	// string for rhea (which leaves a described value of an unknown
	// descriptor wrapped, and compares the string).
	if d, ok := filters[sessionFilter].(*amqp.Described); ok {
		filters[sessionFilter] = &amqp.Described{Descriptor: d.Descriptor, Value: lock.SessionID()}
	} else {
		filters[sessionFilter] = lock.SessionID()
	}
	source.Fields[7] = filters
	if err := l.AttachReply(source, l.Target, 0, amqp.Map{lockedUntilUTC: ticks(lock.LockedUntil())}); err != nil {
		lock.Release()
		return
	}
	r.deliver(l)
}

// deliver sends messages while the link has credit, until it goes. A
// session receiver's link is detached with com.microsoft:session-lock-lost
// as soon as its session lock expires, credit or not, as Service Bus does
// ("when a sessionful entity's lock expired, the service would send a
// detach frame indicating the session lock is lost": azure-uamqp-python
// issue 183; azure-service-bus-dotnet PR 226 handles "the scenario where
// session link is closed from the broker due to Session timing out"). A
// settlement the client then tries can only go through $management, where
// the lock is lost too.
func (r *receiverLink) deliver(l *amqp.Link) {
	for {
		credit, drain, changed := l.Credit()
		select {
		case <-r.done:
			return
		default:
		}
		if s := r.lockedSession(); s != nil && !s.Held() {
			_ = l.Detach(sessionLockLost())
			return
		}
		sent := 0
		for ; credit > 0; credit-- {
			ok, err := r.sendOne(l)
			if err != nil {
				_ = l.Detach(err)
				return
			}
			if !ok {
				break
			}
			sent++
		}
		if sent > 0 {
			continue
		}
		if drain {
			_ = l.Drained()
			continue
		}
		r.q.mu.Lock()
		queueChanged := r.q.changed
		r.q.mu.Unlock()
		select {
		case <-r.done:
			return
		case <-changed:
		case <-queueChanged:
		case <-time.After(pollEvery):
		}
	}
}

// sendOne takes one message for the link and sends it; false when there is none.
func (r *receiverLink) sendOne(l *amqp.Link) (bool, *amqp.Error) {
	var m *Message
	var lock int64
	var until time.Time
	switch {
	case r.lockedSession() != nil:
		msgs, err := r.session.TryNext(1)
		if err != nil {
			return false, sessionLockLost()
		}
		if len(msgs) == 0 {
			return false, nil
		}
		m, lock, until = msgs[0], r.session.Token(), r.session.LockedUntil()
	case r.dead:
		got := r.q.ReceiveDeadLetters(1)
		if len(got) == 0 {
			return false, nil
		}
		m, lock, until = &got[0].Message, got[0].LockToken, got[0].LockedUntil
	default:
		got := r.q.TryReceive()
		if got == nil {
			return false, nil
		}
		m, lock, until = got.Message, got.Token, got.LockedUntil
	}
	token := amqp.UUID(LockToken(lock, m.SequenceNumber))
	if r.deletes {
		_ = r.settle(delivered{lock, m.SequenceNumber}, SettleComplete, SettleOptions{})
		until = time.Time{}
	}
	payload, err := toAMQP(m, until, &token)
	if err != nil {
		return false, &amqp.Error{Condition: amqp.ErrInternal, Description: err.Error()}
	}
	if err := l.Send(netGUID(token), 0, payload, r.deletes); err != nil {
		return false, &amqp.Error{Condition: amqp.ErrInternal, Description: err.Error()}
	}
	return true, nil
}

// sessionLockLost is Service Bus's error for a session whose lock expired.
func sessionLockLost() *amqp.Error {
	return &amqp.Error{Condition: CondSessionLockLost, Description: "The session lock has expired on the MessageSession. Accept a new MessageSession."}
}

// settle applies a settlement to a message this link delivered.
func (r *receiverLink) settle(d delivered, how Settlement, o SettleOptions) error {
	return settleOn(r.q, r.dead, r.c.sessionByToken(d.lock), d, how, o)
}

// settleOn settles message d of q (its dead-letter sub-queue when dead). On
// a session queue the session lock d was delivered under must be held
// (session is the connection's lock of that token, nil when it has none):
// a session's messages are settled only under their session's lock, so a
// token whose session lock expired or was given up is lost whatever path it
// comes by, the link or $management. Without sessions, any receiver settles
// by lock token while the message's own lock holds.
func settleOn(q *Queue, dead bool, session *SessionLock, d delivered, how Settlement, o SettleOptions) error {
	switch {
	case dead && how == SettleComplete:
		return q.CompleteDeadLetter(d.seq, d.lock)
	case dead && (how == SettleAbandon || how == SettleRelease):
		return q.AbandonDeadLetter(d.seq, d.lock)
	case dead:
		return errNotOnDeadLetters
	case q.Properties().RequiresSession:
		if session == nil {
			return ErrLockLost
		}
		return session.SettleAs(d.seq, how, o)
	}
	return q.SettleMessage(d.seq, d.lock, how, o)
}

// errNotOnDeadLetters: dead-lettering a dead letter, or deferring one (not
// emulated), is refused.
var errNotOnDeadLetters = errors.New("a dead letter cannot be dead-lettered again, and deferring one is not emulated")

// propertiesToModify is a settlement's map of application properties to
// modify (the modified outcome's message-annotations, update-disposition's
// properties-to-modify, the dead-letter error's info less its reason and
// description), with string keys.
func propertiesToModify(m amqp.Map, skip ...string) map[string]any {
	var out map[string]any
	for k, v := range m {
		var key string
		switch k := k.(type) {
		case string:
			key = k
		case amqp.Symbol:
			key = string(k)
		default:
			continue
		}
		if slices.Contains(skip, key) {
			continue
		}
		if out == nil {
			out = map[string]any{}
		}
		out[key] = v
	}
	return out
}

// Disposition implements amqp.LinkHandler: complete (accepted), abandon
// (modified), defer (modified with undeliverable-here, as azservicebus's
// DeferMessage and @azure/service-bus's deferMessage send it), release
// (released), dead-letter (rejected with com.microsoft:dead-letter); the
// modified outcome's message-annotations and the dead-letter error's other
// info are properties to modify. A lost lock answers with the SDKs'
// lock-lost error.
func (r *receiverLink) Disposition(_ *amqp.Link, _ uint32, tag []byte, state *amqp.Performative) *amqp.Performative {
	if len(tag) != 16 || state == nil {
		return nil
	}
	lock, seq := ParseLockToken([16]byte(netGUID([16]byte(tag))))
	how := SettleAbandon
	var o SettleOptions
	switch state.Code {
	case amqp.CodeAccepted:
		how = SettleComplete
	case amqp.CodeReleased:
		how = SettleRelease
	case amqp.CodeModified:
		if undeliverable, _ := state.Field(1).(bool); undeliverable {
			how = SettleDefer
		}
		ann, _ := state.Field(2).(amqp.Map)
		o.Properties = propertiesToModify(ann)
	case amqp.CodeRejected:
		how = SettleDeadLetter
		if e := amqp.AsError(state.Field(0)); e != nil {
			o.Reason, _ = e.Info["DeadLetterReason"].(string)
			o.Description, _ = e.Info["DeadLetterErrorDescription"].(string)
			o.Properties = propertiesToModify(e.Info, "DeadLetterReason", "DeadLetterErrorDescription")
		}
	default:
		return nil
	}
	if err := r.settle(delivered{lock, seq}, how, o); err != nil {
		switch {
		case errors.Is(err, errNotOnDeadLetters):
			return rejected(amqp.ErrNotImplemented, "%v", err)
		case r.lockedSession() != nil:
			return rejected(CondSessionLockLost, "The session lock has expired on the MessageSession. Accept a new MessageSession.")
		}
		return rejected(CondMessageLockLost, "The lock supplied is invalid. Either the lock expired, or the message has already been removed from the queue.")
	}
	if how == SettleDeadLetter {
		// Done: the answer must carry no error (both SDKs read an error in
		// the answer's state as a failed settlement).
		return amqp.New(amqp.CodeRejected)
	}
	return nil
}

func (r *receiverLink) lockedSession() *SessionLock {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.session
}

func (r *receiverLink) Transfer(*amqp.Link, amqp.Delivery) *amqp.Performative { return nil }
func (r *receiverLink) Flow(*amqp.Link)                                       {}

// Detached: a session receiver gives its session up (what it delivered and
// did not settle becomes available again, its delivery counted).
func (r *receiverLink) Detached(*amqp.Link, *amqp.Error) {
	receivers.CompareAndDelete(receiverKey{r.c, r.name}, r)
	r.mu.Lock()
	select {
	case <-r.done:
	default:
		close(r.done)
	}
	s := r.session
	r.mu.Unlock()
	if s != nil {
		r.c.releaseSession(s)
		s.Release()
	}
}
