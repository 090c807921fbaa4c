package devbus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/convoy-dev/convoy/handler/internal/amqp"
)

// The request/response nodes: $cbs (claims) and <entity>/$management
// (service-bus-amqp-request-response.md; docs/host-contract.md). A request is a
// message with reply-to and message-id; the answer goes to the client's
// reply link with the request's message-id as correlation-id and the status
// in application properties: status-code on $cbs, statusCode on
// $management (the JS SDK tests statusCode === 204 for an empty peek).

// requestLink receives a client's requests to one node.
type requestLink struct {
	c    *busConn
	q    *Queue // nil for $cbs
	dead bool   // the node of the dead-letter sub-queue
}

func (c *busConn) attachRequests(l *amqp.Link, q *Queue, sub string) (amqp.LinkHandler, *amqp.Error) {
	if err := l.AttachReply(l.Source, l.Target, 0, nil); err != nil {
		return nil, &amqp.Error{Condition: amqp.ErrInternal, Description: err.Error()}
	}
	if err := l.Grant(100); err != nil {
		return nil, &amqp.Error{Condition: amqp.ErrInternal, Description: err.Error()}
	}
	return requestLink{c: c, q: q, dead: strings.HasPrefix(sub, "$deadletterqueue")}, nil
}

func (requestLink) Disposition(*amqp.Link, uint32, []byte, *amqp.Performative) *amqp.Performative {
	return nil
}
func (requestLink) Flow(*amqp.Link)                  {}
func (requestLink) Detached(*amqp.Link, *amqp.Error) {}

// response is a node's answer.
type response struct {
	status      int32
	description string
	// condition, when set, is the AMQP error condition of a failure, in the
	// errorCondition application property (read by @azure/core-amqp's
	// getCodeDescriptionAndError before it falls back on the status code,
	// which for 410 cannot tell a message lock from a session lock).
	condition amqp.Symbol
	body      amqp.Map // nil: no body
}

func okWith(body amqp.Map) response { return response{status: 200, description: "OK", body: body} }

func failed(status int32, format string, args ...any) response {
	return response{status: status, description: fmt.Sprintf(format, args...)}
}

func (r response) because(cond amqp.Symbol) response {
	r.condition = cond
	return r
}

// Lock-lost answers: 410, which azservicebus reads as lock lost
// (internal/errors.go, isLockLostError: RPCResponseCodeLockLost).
func messageLockLost() response {
	return failed(410, "The lock supplied is invalid. Either the lock expired, or the message has already been removed from the queue.").because(condMessageLockLost)
}

func sessionLockLostResponse(id string) response {
	return failed(410, "The session lock has expired on the MessageSession, or the session '%s' is not held by this receiver. Accept a new MessageSession.", id).because(condSessionLockLost)
}

var replyTags atomic.Uint64

// Transfer answers one request.
func (r requestLink) Transfer(_ *amqp.Link, d amqp.Delivery) *amqp.Performative {
	req, err := amqp.UnmarshalMessage(d.Payload)
	if err != nil {
		return rejected(amqp.ErrDecode, "%v", err)
	}
	replyTo, _ := req.Prop(amqp.PropReplyTo).(string)
	r.c.mu.Lock()
	reply := r.c.replies[replyTo]
	r.c.mu.Unlock()
	if reply == nil {
		return rejected(amqp.ErrNotFound, "no reply link for reply-to %q", replyTo)
	}
	op, _ := req.ApplicationProperties["operation"].(string)
	var res response
	statusKey, descKey := "statusCode", "statusDescription"
	if r.q == nil {
		statusKey, descKey = "status-code", "status-description"
		res = r.putToken(op, req)
	} else if f, _ := r.c.bus.currentFault(); f.Condition != "" {
		status := int32(503)
		if f.Condition == CondTimeout {
			status = 408
		}
		res = failed(status, "The server is busy (emulated fault: %s).", f.Condition)
	} else {
		body, _ := req.Value.(amqp.Map)
		linkName, _ := req.ApplicationProperties["associated-link-name"].(string)
		res = r.manage(op, body, linkName)
	}
	out := &amqp.Message{ApplicationProperties: amqp.Map{statusKey: res.status, descKey: res.description}}
	if res.condition != "" {
		out.ApplicationProperties["errorCondition"] = res.condition
	}
	out.SetProp(amqp.PropCorrelationID, req.Prop(amqp.PropMessageID))
	if res.body != nil {
		out.Value, out.HasValue = res.body, true
	}
	payload, err := out.Marshal()
	if err != nil {
		return rejected(amqp.ErrInternal, "%v", err)
	}
	tag := fmt.Appendf(nil, "%d", replyTags.Add(1))
	if err := reply.Send(tag, 0, payload, true); err != nil {
		return rejected(amqp.ErrInternal, "%v", err)
	}
	return accepted()
}

// putToken checks a SAS token and records the claim on the connection; a
// wrong key or an expired token is answered 401, as Service Bus does.
func (r requestLink) putToken(op string, req *amqp.Message) response {
	if op != "put-token" {
		return failed(400, "operation %q is not supported on $cbs", op)
	}
	typ, _ := req.ApplicationProperties["type"].(string)
	if typ != "servicebus.windows.net:sastoken" {
		return failed(400, "token type %q is not supported: the emulation takes SAS tokens", typ)
	}
	token, _ := req.Value.(string)
	aud, until, err := r.c.bus.checkToken(token)
	if err != nil {
		return failed(401, "%v", err)
	}
	name, _ := req.ApplicationProperties["name"].(string)
	if p := audiencePath(name); p != aud && !strings.HasPrefix(p, aud+"/") && aud != "" {
		return failed(401, "InvalidAudience: the token's audience %q does not cover %q", aud, name)
	}
	// A token for an entity that does not exist is answered 404, as Service
	// Bus does (azure-service-bus issue 451): azservicebus reports
	// CodeNotFound only from this answer, not from a refused attach.
	if p := audiencePath(name); p != "" {
		if missing := r.c.bus.missingEntity(p); missing != nil {
			return failed(404, "%s", missing.Description).because(amqp.ErrNotFound)
		}
	}
	r.c.mu.Lock()
	r.c.claims[audiencePath(name)] = until
	r.c.mu.Unlock()
	return response{status: 202, description: "Accepted"}
}

// manage runs one $management operation; linkName is the receiver or
// sender the request is for (associated-link-name), "" when it names none.
func (r requestLink) manage(op string, body amqp.Map, linkName string) response {
	switch op {
	case "com.microsoft:peek-message":
		return r.peek(body)
	case "com.microsoft:renew-lock":
		return r.renewLocks(body)
	case "com.microsoft:renew-session-lock", "com.microsoft:get-session-state", "com.microsoft:set-session-state":
		return r.sessionOp(op, body)
	case "com.microsoft:update-disposition":
		return r.updateDisposition(body)
	case "com.microsoft:receive-by-sequence-number":
		return r.receiveBySequenceNumber(body, linkName)
	case "com.microsoft:schedule-message":
		return r.schedule(body)
	case "com.microsoft:cancel-scheduled-message":
		return r.cancelScheduled(body)
	}
	return failed(501, "The operation %q is not implemented by the local emulation (rules and session listing are not emulated).", op)
}

func (r requestLink) peek(body amqp.Map) response {
	from, _ := amqp.Int(body["from-sequence-number"])
	count, _ := amqp.Int(body["message-count"])
	if count <= 0 {
		return failed(400, "message-count must be positive")
	}
	var sessionID *string
	if s, ok := body["session-id"].(string); ok {
		sessionID = &s
	}
	var msgs []Message
	if r.dead {
		msgs = r.q.PeekDeadLetters(from, int(count))
	} else {
		msgs = r.q.Peek(from, int(count), sessionID)
	}
	if len(msgs) == 0 {
		return response{status: 204, description: "No Content"}
	}
	list := make([]any, len(msgs))
	for i := range msgs {
		payload, err := toAMQP(&msgs[i], time.Time{}, nil)
		if err != nil {
			return failed(500, "%v", err)
		}
		list[i] = amqp.Map{"message": payload}
	}
	return okWith(amqp.Map{"messages": list})
}

func lockTokens(body amqp.Map) []delivered {
	var out []delivered
	if a, ok := body["lock-tokens"].(amqp.Array); ok {
		for _, v := range a {
			if u, ok := v.(amqp.UUID); ok {
				lock, seq := parseLockToken(u)
				out = append(out, delivered{lock, seq})
			}
		}
	}
	return out
}

// renewLocks renews message locks (queues without sessions; a session's
// messages are locked by the session lock).
func (r requestLink) renewLocks(body amqp.Map) response {
	tokens := lockTokens(body)
	if len(tokens) == 0 {
		return failed(400, "lock-tokens is missing")
	}
	exp := make(amqp.Array, len(tokens))
	for i, t := range tokens {
		until, err := r.q.renewMessageLock(t.seq, t.lock)
		if err != nil {
			return messageLockLost()
		}
		exp[i] = until
	}
	return okWith(amqp.Map{"expirations": exp})
}

func (r requestLink) sessionOp(op string, body amqp.Map) response {
	id, _ := body["session-id"].(string)
	s := r.c.heldSession(r.q, id)
	if s == nil {
		return sessionLockLostResponse(id)
	}
	switch op {
	case "com.microsoft:renew-session-lock":
		until, err := s.renew()
		if err != nil {
			return sessionLockLostResponse(id)
		}
		return okWith(amqp.Map{"expiration": until})
	case "com.microsoft:get-session-state":
		state, err := s.state()
		if err != nil {
			return sessionLockLostResponse(id)
		}
		var v any
		if state != nil {
			v = state
		}
		return okWith(amqp.Map{"session-state": v})
	}
	state, _ := body["session-state"].([]byte)
	if len(state) == 0 {
		state = nil // an empty state clears it (azservicebus sends an empty binary)
	}
	if err := s.setState(state); err != nil {
		return sessionLockLostResponse(id)
	}
	return response{status: 200, description: "OK"}
}

// updateDisposition settles by lock token: a message received by sequence
// number (which azservicebus and @azure/service-bus settle only here), or
// one whose receiving link is gone (azservicebus falls back here when the
// link fails: messageSettler.go, shouldSettleOnMgmtLink). Statuses as the
// SDKs send them: completed, abandoned, suspended (dead-letter), defered
// (azservicebus internal/mgmt.go DeferredDisposition, spelt so). On a
// session queue the token's session lock must still be held by a receiver
// of this connection, and be the session-id the request names (JS and .NET
// send one; azservicebus does not): otherwise, as after the lock expired,
// the lock is lost (410).
func (r requestLink) updateDisposition(body amqp.Map) response {
	status, _ := body["disposition-status"].(string)
	how := map[string]settlement{"completed": settleComplete, "abandoned": settleAbandon, "suspended": settleDeadLetter, "defered": settleDefer}
	h, known := how[status]
	if !known {
		return failed(400, "disposition-status %q is not one of completed, abandoned, suspended, defered", status)
	}
	var o settleOptions
	o.Reason, _ = body["deadletter-reason"].(string)
	o.Description, _ = body["deadletter-description"].(string)
	props, _ := body["properties-to-modify"].(amqp.Map)
	o.Properties = propertiesToModify(props)
	sessionID, named := body["session-id"].(string)
	tokens := lockTokens(body)
	if len(tokens) == 0 {
		return failed(400, "lock-tokens is missing")
	}
	for _, t := range tokens {
		session := r.c.sessionByToken(t.lock)
		if session != nil && named && session.SessionID() != sessionID {
			session = nil
		}
		if err := settleOn(r.q, r.dead, session, t, h, o); err != nil {
			switch {
			case errors.Is(err, errNotOnDeadLetters):
				return failed(400, "%v", err)
			case r.q.Properties().RequiresSession && !r.dead:
				if session != nil {
					sessionID = session.SessionID()
				}
				return sessionLockLostResponse(sessionID)
			}
			return messageLockLost()
		}
	}
	return response{status: 200, description: "OK"}
}

// sequenceNumbers reads a request's sequence-numbers: an array of long
// (azservicebus sends []int64; @azure/service-bus an array of long built
// from 8-byte big-endian buffers).
func sequenceNumbers(body amqp.Map) ([]int64, bool) {
	var list []any
	switch v := body["sequence-numbers"].(type) {
	case amqp.Array:
		list = v
	case []any:
		list = v
	default:
		return nil, false
	}
	out := make([]int64, 0, len(list))
	for _, v := range list {
		n, ok := amqp.Int(v)
		if !ok {
			return nil, false
		}
		out = append(out, n)
	}
	return out, len(out) > 0
}

// receiveBySequenceNumber receives deferred messages (service-bus-amqp-
// request-response.md, "Receive by sequence number"): the answer's
// messages are maps of the encoded message and, in peek-lock
// (receiver-settle-mode 1), its lock-token; the encoded message carries the
// token too, as x-opt-lock-token (azservicebus reads it there, having no
// delivery tag: message.go, newReceivedMessage). On a session queue the
// messages are those of the session the request's receiver holds: named
// by session-id (@azure/service-bus, .NET), or the session of the receiver
// link named by associated-link-name (azservicebus); that session's lock
// must be held (410 otherwise). A number that is not a deferred message is
// not found (404, com.microsoft:message-not-found: .NET's
// ReceiveDeferredMessageAsync, reason MessageNotFound).
func (r requestLink) receiveBySequenceNumber(body amqp.Map, linkName string) response {
	if r.dead {
		return failed(400, "deferred messages of a dead-letter sub-queue are not emulated")
	}
	seqs, ok := sequenceNumbers(body)
	if !ok {
		return failed(400, "sequence-numbers is missing or not an array of long")
	}
	peekLock := true
	if mode, ok := amqp.Uint(body["receiver-settle-mode"]); ok && mode == 0 {
		peekLock = false
	}
	var session *SessionLock
	if r.q.Properties().RequiresSession {
		id, named := body["session-id"].(string)
		switch rl := r.c.receiverNamed(linkName); {
		case named:
			session = r.c.heldSession(r.q, id)
		case rl != nil && rl.q == r.q:
			session = rl.lockedSession()
			if session != nil {
				id = session.SessionID()
			}
		default:
			return failed(400, "The messages of a session entity are received by sequence number in a session: name the session-id, or the session receiver's link in associated-link-name.")
		}
		if session == nil {
			return sessionLockLostResponse(id)
		}
	}
	got, err := r.q.receiveDeferred(seqs, session, peekLock)
	switch {
	case errors.Is(err, errLockLost):
		return sessionLockLostResponse(session.SessionID())
	case err != nil:
		return failed(404, "Failed to lock one or more specified messages. Either the message is not deferred, or another receiver holds it (sequence numbers %v).", seqs).because(condMessageNotFound)
	}
	list := make([]any, len(got))
	for i, m := range got {
		entry := amqp.Map{}
		var token *amqp.UUID
		if peekLock {
			u := amqp.UUID(lockToken(m.Token, m.SequenceNumber))
			token, entry["lock-token"] = &u, u
		}
		payload, err := toAMQP(m.Message, m.LockedUntil, token)
		if err != nil {
			return failed(500, "%v", err)
		}
		entry["message"] = payload
		list[i] = entry
	}
	return okWith(amqp.Map{"messages": list})
}

// schedule schedules messages (service-bus-amqp-request-response.md,
// "Schedule Message"): each entry's message is the encoded message, whose
// x-opt-scheduled-enqueue-time the SDKs set to the time asked for
// (azservicebus mgmt.go ScheduleMessages; @azure/service-bus
// scheduleMessages). The answer's sequence-numbers (array of long) are
// those cancel-scheduled-message takes. A send Service Bus refuses (no
// SessionId on a session queue…) is refused whole, as on a sender link.
func (r requestLink) schedule(body amqp.Map) response {
	if r.dead {
		return failed(400, "Cannot schedule messages on a dead-letter queue.")
	}
	var entries []any
	switch v := body["messages"].(type) {
	case []any:
		entries = v
	case amqp.Array:
		entries = v
	}
	if len(entries) == 0 {
		return failed(400, "messages is missing or empty")
	}
	msgs := make([]Message, len(entries))
	for i, e := range entries {
		entry, _ := e.(amqp.Map)
		encoded, _ := entry["message"].([]byte)
		if encoded == nil {
			return failed(400, "messages[%d] has no message", i)
		}
		m, err := amqp.UnmarshalMessage(encoded)
		if err != nil {
			return failed(400, "messages[%d]: %v", i, err)
		}
		msgs[i] = fromAMQP(m)
		if msgs[i].ScheduledEnqueueTime.IsZero() {
			return failed(400, "messages[%d] has no x-opt-scheduled-enqueue-time", i)
		}
	}
	seqs, err := r.q.enqueue(msgs)
	if err != nil {
		var se *sendError
		if errors.As(err, &se) {
			return failed(400, "%s", se.Text).because(se.Condition)
		}
		return failed(500, "%v", err)
	}
	out := make(amqp.Array, len(seqs))
	for i, seq := range seqs {
		out[i] = seq
	}
	return okWith(amqp.Map{"sequence-numbers": out})
}

// cancelScheduled cancels scheduled messages by sequence number
// (service-bus-amqp-request-response.md, "Cancel Scheduled Message").
func (r requestLink) cancelScheduled(body amqp.Map) response {
	seqs, ok := sequenceNumbers(body)
	if !ok {
		return failed(400, "sequence-numbers is missing or not an array of long")
	}
	if !r.dead {
		r.q.cancelScheduled(seqs)
	}
	return response{status: 200, description: "OK"}
}

// Sessions this connection's receivers hold, for session operations and
// settlement by lock token.
func (c *busConn) holdSession(s *SessionLock) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessions == nil {
		c.sessions = map[int64]*SessionLock{}
	}
	c.sessions[s.Token()] = s
}

func (c *busConn) releaseSession(s *SessionLock) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.sessions, s.Token())
}

func (c *busConn) sessionByToken(token int64) *SessionLock {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[token]
}

func (c *busConn) heldSession(q *Queue, id string) *SessionLock {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.sessions {
		if s.q == q && s.SessionID() == id {
			return s
		}
	}
	return nil
}

// contextUntil is a context that ends after wait or when done closes.
func contextUntil(done <-chan struct{}, wait time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	go func() {
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
