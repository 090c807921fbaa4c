package tablestore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/keyed"
)

// prefixEnd is the first RowKey after every key that starts with prefix (a
// letter and ':'): the same letter and ';'.
func prefixEnd(prefix string) string { return prefix[:len(prefix)-1] + ";" }

func txKey(position int64) string { return fmt.Sprintf("%s%010d", txPrefix, position) }

func markerKey(version int64) string { return fmt.Sprintf("%s%019d", markerPrefix, version) }

func seqKey(prefix string, seq int64) string { return fmt.Sprintf("%s%019d", prefix, seq) }

func escape(s string) string { return strings.ReplaceAll(s, "'", "''") }

// engineHead are the head's properties that are the engine's (the rest are
// the domain's state); engineParked, a parked row's (the rest, its command).
var (
	engineHead   = map[string]bool{"Parked": true, "ParkedLast": true, "Complete": true, "AppliedSeq": true, "Version": true, "Layout": true, "UpdatedAt": true, "BlockedSince": true, "AppliedAt": true, "Crit": true, "StateVersion": true, "FailedSeq": true, "Failure": true, "FailedAt": true}
	engineParked = map[string]bool{"Seq": true, "Last": true, "MessageId": true, "EnqueuedAt": true, "TraceParent": true, "Oversize": true}
)

// decodeHead reads the head's properties into o: the engine's, and the
// rest as the domain's state (StateProps).
func decodeHead(o *convoy.Key, p props) {
	o.Complete = p.bool("Complete")
	o.AppliedSeq = p.int("AppliedSeq")
	o.Version = p.int("Version")
	o.UpdatedAt = p.time("UpdatedAt")
	o.BlockedSince = p.time("BlockedSince")
	o.AppliedAt = p.time("AppliedAt") // zero in a head written before it was kept
	o.Crit = convoy.DecodeCriticalTimes(p.str("Crit"))
	o.ParkedCount = int(p.int("Parked"))
	o.ParkedLast = p.int("ParkedLast") // absent (0, not known) in a head written before it was kept
	o.StateVersion = int(p.int("StateVersion"))
	o.Failure = p.failure()
	o.StateProps = p.keyed(engineHead)
}

// decodeParked reads a parked row's properties.
func decodeParked(p props) convoy.Message {
	return convoy.Message{Seq: p.int("Seq"), Last: p.bool("Last"), MessageID: p.str("MessageId"),
		EnqueuedAt: p.time("EnqueuedAt"), TraceParent: p.str("TraceParent"), Oversize: p.str("Oversize"),
		Stored: p.keyed(engineParked)}
}

// keyed returns the properties not in skip as a domain reads them, by name.
func (p props) keyed(skip map[string]bool) keyed.Props {
	out := make(keyed.Props, 0, len(p))
	for _, name := range slices.Sorted(maps.Keys(p)) {
		if skip[name] {
			continue
		}
		switch v := p[name].(type) {
		case aztables.EDMInt64:
			out = append(out, keyed.Prop{Name: name, Value: int64(v)})
		case aztables.EDMDateTime:
			out = append(out, keyed.Prop{Name: name, Value: time.Time(v).UTC()})
		case float64: // an Edm.Int32 or Edm.Double the JSON decoder read as a number
			out = append(out, keyed.Prop{Name: name, Value: int32(v)})
		case int32, string, bool:
			out = append(out, keyed.Prop{Name: name, Value: v})
		}
	}
	return out
}

type props map[string]any

// failure is the head's note of a decision that failed (Store.NoteFailure).
func (p props) failure() keyed.Failure {
	return keyed.Failure{Seq: p.int("FailedSeq"), Why: p.str("Failure"), At: p.time("FailedAt")}
}

func (p props) str(k string) string { s, _ := p[k].(string); return s }
func (p props) bool(k string) bool  { b, _ := p[k].(bool); return b }

func (p props) int(k string) int64 {
	switch v := p[k].(type) {
	case aztables.EDMInt64:
		return int64(v)
	case int32:
		return int64(v)
	case float64:
		return int64(v)
	}
	return 0
}

func (p props) time(k string) time.Time {
	if v, ok := p[k].(aztables.EDMDateTime); ok {
		return time.Time(v).UTC()
	}
	return time.Time{}
}

// listUpTo reads the entities filter selects, page by page, until it has
// more than limit (so that the caller knows there are more); a missing table
// holds none.
func listUpTo[T any](ctx context.Context, table *aztables.Client, filter string, limit int, what string, decode func([]byte) (T, error)) ([]T, bool, error) {
	top := int32(min(limit+1, maxPageSize))
	pager := table.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter, Top: &top})
	var out []T
	for pager.More() && len(out) <= limit {
		if len(out) == limit {
			// The service says another page follows: more, without reading
			// it (it may prove empty; the next call then finds nothing).
			return out, true, nil
		}
		page, err := pager.NextPage(ctx)
		if tableAbsent(err) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, classify(err, what)
		}
		for _, raw := range page.Entities {
			v, err := decode(raw)
			if err != nil {
				return nil, false, err
			}
			out = append(out, v)
		}
	}
	return out[:min(limit, len(out))], len(out) > limit, nil
}

// maxPageSize is the most entities the Table service returns per page ($top).
const maxPageSize = 1000
