package keyedtest

import (
	"fmt"

	"github.com/convoy-dev/convoy/handler/keyed"
)

// tracked wraps a domain's rules so that the simulation sees what the
// engine decided, beside what the rules did: each command carries its seq,
// and the state counts the commands applied and keeps the last one's seq.
// A command applied at or below that seq is applied twice: the state says
// so (Twice), which check reports. The wrapper's properties take the
// prefix "Harness", which the rules' own may not.
type tracked[S, C any] struct{ r keyed.Rules[S, C] }

type trackedState[S any] struct {
	S       S
	Applied int64 // commands applied
	Last    int64 // the seq of the last one
	Twice   int64 // the seq of a command applied twice, if any
}

type trackedCmd[C any] struct {
	C   C
	Seq int64
}

func (t tracked[S, C]) Name() string { return t.r.Name() }

func (t tracked[S, C]) ReadCommand(key string, body []byte) (trackedCmd[C], error) {
	c, err := t.r.ReadCommand(key, body)
	return trackedCmd[C]{C: c}, err
}

func (t tracked[S, C]) Needs(s trackedState[S], c trackedCmd[C]) keyed.Needs {
	return t.r.Needs(s.S, c.C)
}

func (t tracked[S, C]) Decide(s trackedState[S], c trackedCmd[C], rows keyed.Rows) (trackedState[S], keyed.Writes, error) {
	next, w, err := t.r.Decide(s.S, c.C, rows)
	if err != nil {
		return s, nil, err
	}
	if c.Seq <= s.Last && s.Twice == 0 {
		s.Twice = c.Seq
	}
	s.S, s.Applied, s.Last = next, s.Applied+1, c.Seq
	return s, w, nil
}

func (t tracked[S, C]) Tag(c trackedCmd[C]) keyed.Props { return t.r.Tag(c.C) }
func (t tracked[S, C]) Version() int                    { return t.r.Version() }
func (t tracked[S, C]) Budget() keyed.Budget            { return t.r.Budget() }

func (t tracked[S, C]) EncodeState(s trackedState[S]) keyed.Props {
	p := t.r.EncodeState(s.S)
	return append(p[:len(p):len(p)],
		keyed.Prop{Name: "HarnessApplied", Value: s.Applied}, keyed.Prop{Name: "HarnessLast", Value: s.Last},
		keyed.Prop{Name: "HarnessTwice", Value: s.Twice})
}

func (t tracked[S, C]) DecodeState(version int, p keyed.Props) (trackedState[S], error) {
	s, err := t.r.DecodeState(version, withoutHarness(p))
	return trackedState[S]{S: s, Applied: p.Int("HarnessApplied"), Last: p.Int("HarnessLast"), Twice: p.Int("HarnessTwice")}, err
}

func (t tracked[S, C]) EncodeCommand(c trackedCmd[C]) keyed.Props {
	p := t.r.EncodeCommand(c.C)
	return append(p[:len(p):len(p)], keyed.Prop{Name: "HarnessSeq", Value: c.Seq})
}

func (t tracked[S, C]) DecodeCommand(key string, p keyed.Props) (trackedCmd[C], error) {
	c, err := t.r.DecodeCommand(key, withoutHarness(p))
	return trackedCmd[C]{C: c, Seq: p.Int("HarnessSeq")}, err
}

// withoutHarness is p without the wrapper's properties.
func withoutHarness(p keyed.Props) keyed.Props {
	out := make(keyed.Props, 0, len(p))
	for _, q := range p {
		if len(q.Name) < 7 || q.Name[:7] != "Harness" {
			out = append(out, q)
		}
	}
	return out
}

// harnessProblem returns why the rules' own properties clash with the wrapper's.
func harnessProblem(p keyed.Props) error {
	if len(withoutHarness(p)) != len(p) {
		return fmt.Errorf("a property's name begins with Harness, which keyedtest.Simulate keeps for itself: %v", p)
	}
	return nil
}
