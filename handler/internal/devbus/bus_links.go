package devbus

import (
	"errors"
	"fmt"
	"strings"
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
		var se *sendError
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
