package keyed

import "fmt"

// Domain is a domain's Rules with their types erased: what the engine holds,
// one value for every domain (Erase makes it).
type Domain interface {
	Name() string
	ReadCommand(key string, body []byte) (any, error)
	Needs(s, c any) Needs
	// Decide recovers a panic of the rules and returns it as an error.
	Decide(s, c any, rows Rows) (any, Writes, error)
	Tag(c any) Props // Tag(nil): the zero command's
	Version() int
	EncodeState(s any) Props
	DecodeState(version int, p Props) (any, error)
	EncodeCommand(c any) Props
	DecodeCommand(key string, p Props) (any, error)
	Budget() Budget
	// History and View: the Viewer's, if the rules have one.
	History(s any) (string, int64)
	View(head Head, s any, page Page) any
}

// Erase returns r as a Domain.
func Erase[S, C any](r Rules[S, C]) Domain { return erased[S, C]{r} }

type erased[S, C any] struct{ r Rules[S, C] }

func (e erased[S, C]) Name() string { return e.r.Name() }

func (e erased[S, C]) ReadCommand(key string, body []byte) (any, error) {
	c, err := e.r.ReadCommand(key, body)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func (e erased[S, C]) Needs(s, c any) Needs { return e.r.Needs(s.(S), c.(C)) }

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

func (e erased[S, C]) Tag(c any) Props {
	if c == nil {
		var zero C
		return e.r.Tag(zero)
	}
	return e.r.Tag(c.(C))
}

func (e erased[S, C]) Version() int              { return e.r.Version() }
func (e erased[S, C]) EncodeState(s any) Props   { return e.r.EncodeState(s.(S)) }
func (e erased[S, C]) EncodeCommand(c any) Props { return e.r.EncodeCommand(c.(C)) }

func (e erased[S, C]) DecodeState(version int, p Props) (any, error) {
	s, err := e.r.DecodeState(version, p)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (e erased[S, C]) DecodeCommand(key string, p Props) (any, error) {
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

func (e erased[S, C]) View(head Head, s any, page Page) any {
	if v, ok := e.r.(Viewer[S]); ok {
		return v.View(head, s.(S), page)
	}
	return struct {
		Head  Head  `json:"head"`
		State Props `json:"state"`
	}{head, e.r.EncodeState(s.(S))}
}
