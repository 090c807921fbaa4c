package devhost

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/convoy-dev/convoy/handler/internal/amqp"
)

// The request/response nodes: $cbs (claims) and <entity>/$management
// (service-bus-amqp-request-response.md; HOST-CONTRACT.md). A request is a
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
	body        amqp.Map // nil: no body
}

func okWith(body amqp.Map) response { return response{status: 200, description: "OK", body: body} }

func failed(status int32, format string, args ...any) response {
	return response{status: status, description: fmt.Sprintf(format, args...)}
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
		res = r.manage(op, body)
	}
	out := &amqp.Message{ApplicationProperties: amqp.Map{statusKey: res.status, descKey: res.description}}
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
	r.c.mu.Lock()
	r.c.claims[audiencePath(name)] = until
	r.c.mu.Unlock()
	return response{status: 202, description: "Accepted"}
}

// manage runs one $management operation.
func (r requestLink) manage(op string, body amqp.Map) response {
	switch op {
	case "com.microsoft:peek-message":
		return r.peek(body)
	case "com.microsoft:renew-lock":
		return r.renewLocks(body)
	case "com.microsoft:renew-session-lock", "com.microsoft:get-session-state", "com.microsoft:set-session-state":
		return r.sessionOp(op, body)
	case "com.microsoft:update-disposition":
		return r.updateDisposition(body)
	}
	return failed(501, "The operation %q is not implemented by the local emulation (scheduled and deferred messages, rules and session listing are not emulated).", op)
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
				lock, seq := ParseLockToken(u)
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
		until, err := r.q.RenewMessageLock(t.seq, t.lock)
		if err != nil {
			return failed(410, "The lock supplied is invalid. Either the lock expired, or the message has already been removed from the queue.")
		}
		exp[i] = until
	}
	return okWith(amqp.Map{"expirations": exp})
}

func (r requestLink) sessionOp(op string, body amqp.Map) response {
	id, _ := body["session-id"].(string)
	s := r.c.heldSession(r.q, id)
	if s == nil {
		return failed(410, "The session lock has expired on the MessageSession, or the session '%s' is not held by this connection.", id)
	}
	switch op {
	case "com.microsoft:renew-session-lock":
		until, err := s.Renew()
		if err != nil {
			return failed(410, "The session lock has expired on the MessageSession. Accept a new MessageSession.")
		}
		return okWith(amqp.Map{"expiration": until})
	case "com.microsoft:get-session-state":
		state, err := s.State()
		if err != nil {
			return failed(410, "The session lock has expired on the MessageSession. Accept a new MessageSession.")
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
	if err := s.SetState(state); err != nil {
		return failed(410, "The session lock has expired on the MessageSession. Accept a new MessageSession.")
	}
	return response{status: 200, description: "OK"}
}

// updateDisposition settles by lock token, for a receiver whose link is gone.
func (r requestLink) updateDisposition(body amqp.Map) response {
	status, _ := body["disposition-status"].(string)
	how := map[string]settlement{"completed": settleComplete, "abandoned": settleAbandon, "suspended": settleDeadLetter}
	h, known := how[status]
	if !known {
		return failed(501, "disposition-status %q is not emulated (deferral is not)", status)
	}
	reason, _ := body["deadletter-reason"].(string)
	description, _ := body["deadletter-description"].(string)
	for _, t := range lockTokens(body) {
		if err := settleOn(r.q, r.dead, r.c.sessionByToken(t.lock), t, h, reason, description); err != nil {
			return failed(410, "The lock supplied is invalid. Either the lock expired, or the message has already been removed from the queue.")
		}
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
