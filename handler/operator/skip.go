package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/replay"
)

// Skipper records a key's missing seq as skipped (convoy.Processor).
type Skipper interface {
	Skip(ctx context.Context, id string, seq int64) (convoy.Result, convoy.View, error)
}

// SkipResult is a skip function's answer (SkipGap's). Its JSON names the
// key's id and view as its domain does: {"orderId": …, "skipped": …,
// "drained": […], "order": {the view}, …} for orders, "accountId" and
// "account" for accounts.
type SkipResult struct {
	ID      string
	Skipped int64
	Drained []int64
	// View is the domain's view of the key after the skip, with its first
	// page of history; without it (it could not be read), the key's id and
	// appliedSeq.
	View any
	// AppliedSeq is the key's appliedSeq after the skip and its drain.
	AppliedSeq int64
	// SkippedEarlier: the seq was skipped already, by an earlier skip whose
	// answer was lost; this one skipped nothing and settles its dead letter.
	SkippedEarlier bool
	// Draining says, when the drain behind the skip stopped short of the
	// parked tail (the answer's deadline, storage failing), how it goes on.
	Draining string
	// DeadLetter says what became of the skipped seq's dead letter (absent
	// when the skip had no Service Bus to look with).
	DeadLetter *SkippedDeadLetter
	// Noun is the domain's ("order"): the JSON names the id <Noun>Id and
	// the view <Noun>.
	Noun string
}

// MarshalJSON writes the members in their order, those empty left out as
// the answer always did: <noun>Id, skipped, drained, <noun>,
// skippedEarlier, draining, deadLetter.
func (r SkipResult) MarshalJSON() ([]byte, error) {
	noun := r.Noun
	if noun == "" {
		noun = "order"
	}
	drained := r.Drained
	if drained == nil {
		drained = []int64{}
	}
	members := []member{{noun + "Id", r.ID}, {"skipped", r.Skipped}, {"drained", drained}, {noun, r.View}}
	if r.SkippedEarlier {
		members = append(members, member{"skippedEarlier", true})
	}
	if r.Draining != "" {
		members = append(members, member{"draining", r.Draining})
	}
	if r.DeadLetter != nil {
		members = append(members, member{"deadLetter", r.DeadLetter})
	}
	return object(members)
}

// member is one member of a JSON object that object writes.
type member struct {
	key   string
	value any
}

// object is the JSON object of members, in their order.
func object(members []member) ([]byte, error) {
	out := []byte{'{'}
	for i, m := range members {
		if i > 0 {
			out = append(out, ',')
		}
		k, _ := json.Marshal(m.key)
		v, err := json.Marshal(m.value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.key, err)
		}
		out = append(append(append(out, k...), ':'), v...)
	}
	return append(out, '}'), nil
}

// SkipGap records seq (as text, from the outside) of the key id of d as
// skipped with p: the one code path of the skip functions (SkipGap: POST
// /api/orders/{orderId}/skip?seq=N, SkipAccountGap) and `convoy skip`. seq
// must be the key's missing seq; anything else is a fault (Invalid,
// NotFound or Conflict) that changes nothing.
func SkipGap(ctx context.Context, d keyed.Domain, p Skipper, id, seq string) (SkipResult, error) {
	if err := CheckID(d, id); err != nil {
		return SkipResult{}, err
	}
	noun := d.Noun()
	n, err := strconv.ParseInt(seq, 10, 64)
	if err != nil || n < 1 {
		return SkipResult{}, fault.Errorf(fault.Invalid, "seq must be the %s's missing seq, an integer ≥ 1 (got %q)", noun, cut(seq, maxQuoted))
	}
	res, view, err := p.Skip(ctx, id, n)
	if err != nil {
		return SkipResult{}, err
	}
	out := SkipResult{ID: id, Noun: noun, Skipped: n, Drained: []int64{}, View: viewOf(view, IDName(d)), AppliedSeq: res.AppliedSeq,
		SkippedEarlier: res.SkippedEarlier}
	for _, o := range res.Outcomes {
		if o.Drained {
			out.Drained = append(out.Drained, o.Seq)
		}
	}
	if res.Draining {
		out.Draining = fmt.Sprintf("the skip stands; %d parked message(s) behind it are still to drain: "+
			"each read of the %s (GET /api/%s/%s) and each AutoReplay run resumes the drain, as does the %s's next message", res.Parked, noun, d.Name(), id, noun)
	}
	return out, nil
}

// viewOf is the domain's view of the key v holds; of a head that is not
// bound to its domain (Processor.Skip's answer when the view could not be
// read), its id (named idName) and appliedSeq alone.
func viewOf(v convoy.View, idName string) any {
	if x := v.Value(); x != nil {
		return x
	}
	if v.Order == nil {
		return nil
	}
	raw, _ := object([]member{{idName, v.Order.ID}, {"appliedSeq", v.Order.AppliedSeq}})
	return json.RawMessage(raw)
}

// SkippedDeadLetter is what a skip did with the dead letter of its seq: once
// the seq is skipped it is a duplicate, completed so that it no longer
// counts (and alerts) as a dead letter of a permanent cause.
type SkippedDeadLetter struct {
	Completed []string `json:"completed"` // message ids completed
	Note      string   `json:"note,omitempty"`
}

// SkipSettler completes the dead letters of a seq an operator skipped
// (QueueReplayer: replay.Order choosing that seq, which the key now counts
// as applied, so it is completed as a duplicate, never re-sent).
type SkipSettler interface {
	SettleSkipped(ctx context.Context, orderID string, seq int64) (replay.Report, error)
}

// SkipSettleDeadline bounds what follows a skip that succeeded: one scan of
// the dead-letter queue for the skipped seq's dead letter, whose last
// receive waits about 5 s for more. The skip stands whatever the scan finds,
// so the scan has a deadline of its own, not the skip's.
const SkipSettleDeadline = 15 * time.Second

// SettleSkipped completes the dead letter of the seq res skipped, if any,
// within SkipSettleDeadline, and says so in res; a skip stands whatever
// this finds (its dead letter is then left for a replay of every dead
// letter, which completes it as a duplicate).
func SettleSkipped(ctx context.Context, s SkipSettler, res *SkipResult) {
	ctx, cancel := context.WithTimeout(ctx, SkipSettleDeadline)
	defer cancel()
	rep, err := s.SettleSkipped(ctx, res.ID, res.Skipped)
	d := &SkippedDeadLetter{Completed: []string{}}
	for _, x := range rep.Duplicates {
		d.Completed = append(d.Completed, x.MessageID)
	}
	switch {
	case err != nil:
		d.Note = "the dead-letter queue could not be read: " + cut(fault.MessageOf(err), maxQuoted) +
			"; a replay of every dead letter (POST /api/deadletters/replay) completes it later"
	case rep.Incomplete != nil:
		d.Note = rep.Incomplete.Reason
	case len(d.Completed) == 0:
		d.Note = fmt.Sprintf("no dead letter of seq %d: it was never dead-lettered (or already removed)", res.Skipped)
	}
	res.DeadLetter = d
}
