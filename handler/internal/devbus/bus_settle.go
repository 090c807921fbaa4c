package devbus

import (
	"errors"
	"slices"

	"github.com/convoy-dev/convoy/handler/internal/amqp"
)

// Settlement on the AMQP face: dispositions from receiver links, and the
// rules every settlement path ($management's update-disposition too) keeps.

// settle applies a settlement to a message this link delivered.
func (r *receiverLink) settle(d delivered, how settlement, o settleOptions) error {
	return settleOn(r.q, r.dead, r.c.sessionByToken(d.lock), d, how, o)
}

// settleOn settles message d of q (its dead-letter sub-queue when dead). On
// a session queue the session lock d was delivered under must be held
// (session is the connection's lock of that token, nil when it has none):
// a session's messages are settled only under their session's lock, so a
// token whose session lock expired or was given up is lost whatever path it
// comes by, the link or $management. Without sessions, any receiver settles
// by lock token while the message's own lock holds.
func settleOn(q *Queue, dead bool, session *SessionLock, d delivered, how settlement, o settleOptions) error {
	switch {
	case dead && how == settleComplete:
		return q.completeDeadLetter(d.seq, d.lock)
	case dead && (how == settleAbandon || how == settleRelease):
		return q.AbandonDeadLetter(d.seq, d.lock)
	case dead:
		return errNotOnDeadLetters
	case q.Properties().RequiresSession:
		if session == nil {
			return errLockLost
		}
		return session.settleAs(d.seq, how, o)
	}
	return q.settleByToken(d.seq, d.lock, how, o)
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
	lock, seq := parseLockToken([16]byte(netGUID([16]byte(tag))))
	how := settleAbandon
	var o settleOptions
	switch state.Code {
	case amqp.CodeAccepted:
		how = settleComplete
	case amqp.CodeReleased:
		how = settleRelease
	case amqp.CodeModified:
		if undeliverable, _ := state.Field(1).(bool); undeliverable {
			how = settleDefer
		}
		ann, _ := state.Field(2).(amqp.Map)
		o.Properties = propertiesToModify(ann)
	case amqp.CodeRejected:
		how = settleDeadLetter
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
			return rejected(condSessionLockLost, "The session lock has expired on the MessageSession. Accept a new MessageSession.")
		}
		return rejected(condMessageLockLost, "The lock supplied is invalid. Either the lock expired, or the message has already been removed from the queue.")
	}
	if how == settleDeadLetter {
		// Done: the answer must carry no error (both SDKs read an error in
		// the answer's state as a failed settlement).
		return amqp.New(amqp.CodeRejected)
	}
	return nil
}
