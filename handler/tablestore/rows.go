package tablestore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/convoy-dev/convoy/handler/convoy"
)

// prefixEnd is the first RowKey after every key that starts with prefix (a
// letter and ':'): the same letter and ';'.
func prefixEnd(prefix string) string { return prefix[:len(prefix)-1] + ";" }

func txKey(position int64) string { return fmt.Sprintf("%s%010d", txPrefix, position) }

func markerKey(version int64) string { return fmt.Sprintf("%s%019d", markerPrefix, version) }

func seqKey(prefix string, seq int64) string { return fmt.Sprintf("%s%019d", prefix, seq) }

func escape(s string) string { return strings.ReplaceAll(s, "'", "''") }

func (p props) data() json.RawMessage {
	if s := p.str("Data"); s != "" {
		return json.RawMessage(s)
	}
	return nil
}

// decodeHead reads the head's properties into o.
func decodeHead(o *convoy.Order, p props) {
	o.Status = convoy.Status(p.str("Status"))
	o.Complete = p.bool("Complete")
	o.Currency = p.str("Currency")
	o.AppliedSeq = p.int("AppliedSeq")
	o.Version = p.int("Version")
	o.TotalAmount = p.int("Total")
	o.TxCount = p.int("TxCount")
	o.UpdatedAt = p.time("UpdatedAt")
	o.BlockedSince = p.time("BlockedSince")
	o.AppliedAt = p.time("AppliedAt") // zero in a head written before it was kept
	o.Crit = convoy.DecodeCriticalTimes(p.str("Crit"))
	o.Data = p.data()
	o.ParkedCount = int(p.int("Parked"))
	o.ParkedLast = p.int("ParkedLast") // absent (0, not known) in a head written before it was kept
}

// decodeParked reads a parked row's properties.
func decodeParked(orderID string, p props) convoy.Message {
	m := convoy.Message{Seq: p.int("Seq"), Last: p.bool("Last"), MessageID: p.str("MessageId"),
		EnqueuedAt: p.time("EnqueuedAt"), TraceParent: p.str("TraceParent"), Tx: convoy.Transaction{
			OrderID: orderID, Op: convoy.Op(p.str("Op")), TxID: p.str("TxId"), Currency: p.str("Currency"), Data: p.data(),
		}}
	if _, ok := p["Amount"]; ok {
		amount := p.int("Amount")
		m.Tx.Amount = &amount
	}
	return m
}

type props map[string]any

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
