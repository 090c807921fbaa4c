package keyed

import (
	"encoding/json"
	"fmt"

	"github.com/convoy-dev/convoy/handler/fault"
)

// Domain is a domain's Rules with their types erased: what the engine holds,
// one value for every domain (Erase makes it). A panic of the rules in any
// method that returns an error is that error (a *PanicError); Tag and View
// answer nil instead.
type Domain interface {
	Name() string
	Noun() string // what one key is called in messages (Namer's, else Name)
	ReadCommand(key string, body []byte) (any, error)
	Needs(s, c any) (Needs, error)
	Decide(s, c any, rows Rows) (any, Writes, error)
	Tag(c any) Props // Tag(nil): the zero command's
	Version() int
	EncodeState(s any) (Props, error)
	DecodeState(version int, p Props) (any, error)
	EncodeCommand(c any) (Props, error)
	DecodeCommand(key string, p Props) (any, error)
	Budget() Budget
	// History and View: the Viewer's, if the rules have one.
	History(s any) (string, int64)
	View(head Head, s any, page Page) any
	// Publishes tells whether the rules are a Publisher: whether a ledger
	// may carry the domain's commands. ReadEntry and Body are the
	// Publisher's; of rules that are none, ReadEntry answers a problem and
	// Body an error. A panic of ReadEntry is a problem of the entry.
	Publishes() bool
	ReadEntry(index int, raw []byte, extra ...string) (key string, c any, extras map[string]json.RawMessage, problems []fault.Problem)
	Body(c any) ([]byte, error)
	// Commands returns an empty list of the domain's commands with room
	// for capacity of them.
	Commands(capacity int) CommandList
}

// CommandList holds commands of one domain in one slice of their type: a
// ledger of a million entries keeps its commands there, not each boxed in
// an any (an allocation of its own).
type CommandList interface {
	// Append adds c, a command of the domain (it panics on any other
	// value), and returns its index.
	Append(c any) int
	// At returns a copy of the i-th command, boxed.
	At(i int) any
}

// Erase returns r as a Domain.
func Erase[S, C any](r Rules[S, C]) Domain { return erased[S, C]{r} }

type erased[S, C any] struct{ r Rules[S, C] }

func (e erased[S, C]) Name() string { return e.r.Name() }

func (e erased[S, C]) Noun() string {
	if n, ok := e.r.(Namer); ok {
		return n.Noun()
	}
	return e.r.Name()
}

func (e erased[S, C]) ReadCommand(key string, body []byte) (_ any, err error) {
	defer recovered(&err)
	c, err := e.r.ReadCommand(key, body)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (e erased[S, C]) Needs(s, c any) (n Needs, err error) {
	defer recovered(&err)
	return e.r.Needs(s.(S), c.(C)), nil
}

// recovered turns a panic of the rules into *err.
func recovered(err *error) {
	if v := recover(); v != nil {
		*err = &PanicError{Value: v}
	}
}

// PanicError is a decision that panicked: it fails its message.
type PanicError struct{ Value any }

func (p *PanicError) Error() string { return fmt.Sprintf("the rules panicked: %v", p.Value) }

func (e erased[S, C]) Decide(s, c any, rows Rows) (next any, w Writes, err error) {
	defer func() {
		if v := recover(); v != nil {
			next, w, err = s, nil, &PanicError{Value: v}
		}
	}()
	n, w, err := e.r.Decide(s.(S), c.(C), rows)
	if err != nil {
		return s, nil, err
	}
	return n, w, nil
}

func (e erased[S, C]) Tag(c any) (p Props) {
	defer func() {
		if recover() != nil {
			p = nil
		}
	}()
	if c == nil {
		var zero C
		return e.r.Tag(zero)
	}
	return e.r.Tag(c.(C))
}

func (e erased[S, C]) Version() int { return e.r.Version() }

func (e erased[S, C]) EncodeState(s any) (p Props, err error) {
	defer recovered(&err)
	return e.r.EncodeState(s.(S)), nil
}

func (e erased[S, C]) EncodeCommand(c any) (p Props, err error) {
	defer recovered(&err)
	return e.r.EncodeCommand(c.(C)), nil
}

func (e erased[S, C]) DecodeState(version int, p Props) (_ any, err error) {
	defer recovered(&err)
	s, err := e.r.DecodeState(version, p)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (e erased[S, C]) DecodeCommand(key string, p Props) (_ any, err error) {
	defer recovered(&err)
	c, err := e.r.DecodeCommand(key, p)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (e erased[S, C]) Budget() Budget {
	b := e.r.Budget()
	if b == (Budget{}) {
		return DefaultBudget
	}
	return b
}

func (e erased[S, C]) History(s any) (string, int64) {
	if v, ok := e.r.(Viewer[S]); ok {
		return v.History(s.(S))
	}
	return "", 0
}

func (e erased[S, C]) View(head Head, s any, page Page) (v any) {
	defer func() {
		if recover() != nil {
			v = nil
		}
	}()
	if v, ok := e.r.(Viewer[S]); ok {
		return v.View(head, s.(S), page)
	}
	return struct {
		Head  Head  `json:"head"`
		State Props `json:"state"`
	}{head, e.r.EncodeState(s.(S))}
}

func (e erased[S, C]) Publishes() bool {
	_, ok := e.r.(Publisher[C])
	return ok
}

func (e erased[S, C]) ReadEntry(index int, raw []byte, extra ...string) (key string, c any, extras map[string]json.RawMessage, problems []fault.Problem) {
	p, ok := e.r.(Publisher[C])
	if !ok {
		return "", nil, nil, []fault.Problem{{Index: index, Reason: "is a command of " + e.r.Name() + ", whose entries cannot be in a ledger"}}
	}
	defer func() {
		if v := recover(); v != nil {
			key, c, extras, problems = "", nil, nil, []fault.Problem{{Index: index, Reason: "cannot be read: " + (&PanicError{Value: v}).Error()}}
		}
	}()
	key, cmd, extras, problems := p.ReadEntry(index, raw, extra...)
	return key, cmd, extras, problems
}

func (e erased[S, C]) Body(c any) (_ []byte, err error) {
	defer recovered(&err)
	p, ok := e.r.(Publisher[C])
	if !ok {
		return nil, fmt.Errorf("%s has no message body for a ledger entry: its rules are no Publisher", e.r.Name())
	}
	return p.Body(c.(C))
}

func (e erased[S, C]) Commands(capacity int) CommandList {
	l := make(commandList[C], 0, capacity)
	return &l
}

type commandList[C any] []C

func (l *commandList[C]) Append(c any) int {
	*l = append(*l, c.(C))
	return len(*l) - 1
}

func (l *commandList[C]) At(i int) any { return (*l)[i] }
