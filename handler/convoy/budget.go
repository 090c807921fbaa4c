package convoy

import (
	"fmt"
	"strings"
	"unicode/utf16"

	"github.com/convoy-dev/convoy/handler/keyed"
)

// The engine's own properties: of the head (beside the domain's state) and
// of a parked row (beside the domain's command). A domain's properties may
// not take their names.
var (
	headProps = []string{"AppliedSeq", "Version", "Parked", "ParkedLast", "Complete", "UpdatedAt", "BlockedSince",
		"AppliedAt", "Crit", "Layout", "StateVersion", "FailedSeq", "Failure", "FailedAt"}
	parkedProps   = []string{"Seq", "Last", "MessageId", "EnqueuedAt", "TraceParent", "Oversize"}
	rejectedProps = []string{"Seq", "Reason"}
)

// headReserve is what the engine's head properties take at most, of the
// 1 MiB an entity holds (Crit's buckets are bounded: crit.go).
const headReserve = 64 << 10

// budget is d's Budget within the engine's limits.
func budget(d keyed.Domain) keyed.Budget {
	b := d.Budget()
	b.Writes = min(max(b.Writes, 1), keyed.MaxWrites)
	b.Bytes = min(max(b.Bytes, 1), keyed.MaxBytes)
	b.ParkedBytes = min(max(b.ParkedBytes, 1), keyed.MaxParkedBytes)
	return b
}

// check returns the encoding of a decision's new state, or the reason the
// decision is rejected: it would break its budget, one of Table Storage's
// limits, or write a row the key knows to exist.
func (o *Key) check(next any, writes keyed.Writes) (keyed.Props, string, error) {
	b := budget(o.domain)
	if len(writes) > b.Writes {
		return nil, fmt.Sprintf("the decision writes %d rows, more than its budget of %d", len(writes), b.Writes), nil
	}
	bytes := 0
	for _, w := range writes {
		bytes += w.Props.WireSize()
		if why := rowProblem(w.Props, nil); why != "" {
			return nil, fmt.Sprintf("row %s/%s: %s", w.Ref.Collection, w.Ref.ID, why), nil
		}
		if why := refProblem(w.Ref); why != "" {
			return nil, why, nil
		}
		if _, present := o.rows.get(w.Ref); present && w.Insert {
			return nil, fmt.Sprintf("row %s/%s exists: it cannot be inserted", w.Ref.Collection, w.Ref.ID), nil
		}
	}
	if bytes > b.Bytes {
		return nil, fmt.Sprintf("the decision writes %d bytes, more than its budget of %d", bytes, b.Bytes), nil
	}
	state, err := o.domain.EncodeState(next)
	if err != nil {
		return nil, "", err
	}
	if why := rowProblem(state, headProps); why != "" {
		return nil, "the state: " + why, nil
	}
	if state.Size() > keyed.MaxRowSize-headReserve {
		return nil, fmt.Sprintf("the state takes %d bytes, more than %d (an entity holds 1 MiB)", state.Size(), keyed.MaxRowSize-headReserve), nil
	}
	return state, "", nil
}

// rowProblem returns why p cannot be stored as a row's properties beside
// the engine's own (taken), or "".
func rowProblem(p keyed.Props, taken []string) string {
	if err := p.Check(); err != nil {
		return err.Error()
	}
	if len(p)+len(taken) > keyed.MaxProperties {
		return fmt.Sprintf("%d properties, more than %d (an entity holds 252)", len(p), keyed.MaxProperties-len(taken))
	}
	for _, q := range p {
		for _, t := range taken {
			if q.Name == t {
				return fmt.Sprintf("property %q is the engine's", q.Name)
			}
		}
		if s, ok := q.Value.(string); ok && 2*len(utf16.Encode([]rune(s))) > keyed.MaxPropertySize {
			return fmt.Sprintf("property %q takes more than 64 KiB", q.Name)
		}
	}
	if p.Size() > keyed.MaxRowSize-4<<10 {
		return fmt.Sprintf("%d bytes, more than an entity holds (1 MiB)", p.Size())
	}
	return ""
}

// reservedInitials are the first letters a collection may not take: the
// engine's rows are h (the head), p: (parked), r: (rejections), v: (commit
// markers), w: (migration), and one query reads the head and the parked
// rows, every RowKey from "h" to "p;".
const reservedInitials = "hijklmnoprvw"

// refProblem returns why ref cannot name a row, or "": a collection is 1-16
// letters and digits (not beginning with reservedInitials), an id at most 512 characters without the characters
// a RowKey may not hold.
func refProblem(ref keyed.RowRef) string {
	c := ref.Collection
	if c == "" || len(c) > 16 || strings.IndexFunc(c, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') }) >= 0 {
		return fmt.Sprintf("collection %.64q is not 1-16 letters and digits", c)
	}
	if strings.ContainsRune(reservedInitials, rune(c[0])) {
		return fmt.Sprintf("collection %q begins with one of %s, which the engine's rows take", c, reservedInitials)
	}
	if ref.ID == "" || len(ref.ID) > 512 || strings.ContainsAny(ref.ID, "/\\#?") || strings.IndexFunc(ref.ID, func(r rune) bool { return r < 0x20 || r >= 0x7f && r < 0xa0 }) >= 0 {
		return fmt.Sprintf("row id %.64q of %s is not 1-512 characters without /, \\, #, ? and control characters", ref.ID, c)
	}
	return ""
}
