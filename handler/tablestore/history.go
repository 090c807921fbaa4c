package tablestore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/convoy-dev/convoy/handler/convoy"
)

var _ convoy.History = (*Store)(nil)

// Transactions implements convoy.History: one query of the t rows from
// position from (more when the service has another page).
func (s *Store) Transactions(ctx context.Context, orderID string, from int64, limit int) ([]convoy.TxEntry, bool, error) {
	filter := fmt.Sprintf("PartitionKey eq '%s' and RowKey ge '%s' and RowKey lt '%s'", escape(orderID), txKey(from), prefixEnd(txPrefix))
	rs, more, err := listUpTo(ctx, s.table, filter, limit, "read the transactions of order "+orderID, decodeTx)
	out := make([]convoy.TxEntry, len(rs))
	for i, r := range rs {
		out[i] = r.TxEntry
	}
	return out, more, err
}

// Rejections implements convoy.History: one query of the r rows from seq from.
func (s *Store) Rejections(ctx context.Context, orderID string, from int64, limit int) ([]convoy.Rejection, bool, error) {
	filter := fmt.Sprintf("PartitionKey eq '%s' and RowKey ge '%s' and RowKey lt '%s'", escape(orderID), seqKey(rejectPrefix, max(from, 0)), prefixEnd(rejectPrefix))
	rs, more, err := listUpTo(ctx, s.table, filter, limit, "read the rejections of order "+orderID, decodeRejection)
	if rs == nil {
		rs = []convoy.Rejection{}
	}
	return rs, more, err
}

func decodeTx(raw []byte) (convoy.TxRecord, error) {
	var e aztables.EDMEntity
	if err := json.Unmarshal(raw, &e); err != nil {
		return convoy.TxRecord{}, err
	}
	pos, err := strconv.ParseInt(strings.TrimPrefix(e.RowKey, txPrefix), 10, 64)
	if err != nil || !strings.HasPrefix(e.RowKey, txPrefix) {
		return convoy.TxRecord{}, fmt.Errorf("unexpected transaction row %q", e.RowKey)
	}
	p := props(e.Properties)
	return convoy.TxRecord{Position: pos, TxEntry: convoy.TxEntry{TxID: p.str("TxId"), Amount: p.int("Amount"), Data: p.data()}}, nil
}

func decodeRejection(raw []byte) (convoy.Rejection, error) {
	var e aztables.EDMEntity
	if err := json.Unmarshal(raw, &e); err != nil {
		return convoy.Rejection{}, err
	}
	p := props(e.Properties)
	return convoy.Rejection{Seq: p.int("Seq"), Op: convoy.Op(p.str("Op")), TxID: p.str("TxId"), Reason: p.str("Reason")}, nil
}
