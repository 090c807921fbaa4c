// Package commitshape is, for the benchmark suite only, the entity-group
// transaction the processor commits for one AddTransaction message, built
// with the SDK: the same rows, keys, properties and EDM types as tablestore
// writes. The floor of the handler's CPU (cmd/commitfloor) and the raw
// baseline of its throughput submit it, so both measure the same work as
// the handler does.
//
// The keys matter as much as the properties: Azurite finds and indexes
// entities by comparing their keys as strings, so a baseline on shorter
// partition keys than the orders' ids is faster than any commit can be
// (about 12 % on the throughput bench's transactions).
package commitshape

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/convoy-dev/convoy/handler/convoy"
)

// Actions is what the processor commits for the seq-th message of order:
// the marker of version seq (an insert), the head (upserted), and the two
// rows of the transaction the message adds (inserts: by position, and by
// txId, issue 27).
func Actions(order string, seq int64) []aztables.TransactionAction {
	now := time.Now().UTC()
	txID := fmt.Sprintf("t-%d", seq)
	return []aztables.TransactionAction{
		{ActionType: aztables.TransactionTypeAdd, Entity: entity(order, fmt.Sprintf("v:%019d", seq),
			map[string]any{"AppliedSeq": aztables.EDMInt64(seq), "At": aztables.EDMDateTime(now)})},
		{ActionType: aztables.TransactionTypeInsertReplace, Entity: Head(order, seq, now)},
		{ActionType: aztables.TransactionTypeAdd, Entity: entity(order, fmt.Sprintf("t:%010d", seq-2),
			map[string]any{"TxId": txID, "Amount": aztables.EDMInt64(seq)})},
		{ActionType: aztables.TransactionTypeAdd, Entity: entity(order, "x:"+txID,
			map[string]any{"Position": aztables.EDMInt64(seq - 2), "Amount": aztables.EDMInt64(seq)})},
	}
}

// Head is the order's head row after its seq-th message, its critical
// times spread over a few buckets as a busy order's are.
func Head(order string, seq int64, now time.Time) []byte {
	var crit convoy.CriticalTimes
	for i := range 8 {
		crit.Add(now, time.Duration(10<<i)*time.Millisecond, convoy.DefaultLagWindow)
	}
	return entity(order, "h", map[string]any{"Crit": convoy.EncodeCriticalTimes(crit),
		"Parked": int32(0), "Status": "open", "Complete": false, "Currency": "EUR", "AppliedSeq": aztables.EDMInt64(seq),
		"Version": aztables.EDMInt64(seq), "Total": aztables.EDMInt64(seq), "TxCount": aztables.EDMInt64(seq - 1),
		"Layout": int32(2), "UpdatedAt": aztables.EDMDateTime(now), "AppliedAt": aztables.EDMDateTime(now)})
}

func entity(order, rowKey string, props map[string]any) []byte {
	data, err := json.Marshal(aztables.EDMEntity{Entity: aztables.Entity{PartitionKey: order, RowKey: rowKey}, Properties: props})
	if err != nil {
		panic(err) // only fixed types above: cannot fail
	}
	return data
}
