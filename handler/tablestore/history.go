package tablestore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/keyed"
)

var _ convoy.History = (*Store)(nil)

// Rows implements convoy.History: one query of the coll rows from
// position from (more when the service has another page).
func (s *Store) Rows(ctx context.Context, orderID, coll string, from int64, limit int) ([]keyed.Row, bool, error) {
	prefix := coll + ":"
	filter := fmt.Sprintf("PartitionKey eq '%s' and RowKey ge '%s' and RowKey lt '%s'", escape(orderID), prefix+keyed.Position(from), prefixEnd(prefix))
	rs, more, err := listUpTo(ctx, s.table, filter, limit, "read the history of "+orderID, func(raw []byte) (keyed.Row, error) {
		return decodeRow(raw, prefix)
	})
	if rs == nil {
		rs = []keyed.Row{}
	}
	return rs, more, err
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

// decodeRow reads a row of the collection whose RowKeys begin with prefix.
func decodeRow(raw []byte, prefix string) (keyed.Row, error) {
	var e aztables.EDMEntity
	if err := json.Unmarshal(raw, &e); err != nil {
		return keyed.Row{}, err
	}
	if !strings.HasPrefix(e.RowKey, prefix) {
		return keyed.Row{}, fmt.Errorf("unexpected row %q", e.RowKey)
	}
	return keyed.Row{ID: strings.TrimPrefix(e.RowKey, prefix), Props: props(e.Properties).keyed(nil)}, nil
}

func decodeRejection(raw []byte) (convoy.Rejection, error) {
	var e aztables.EDMEntity
	if err := json.Unmarshal(raw, &e); err != nil {
		return convoy.Rejection{}, err
	}
	p := props(e.Properties)
	return convoy.Rejection{Seq: p.int("Seq"), Reason: p.str("Reason"), Tag: p.keyed(map[string]bool{"Seq": true, "Reason": true})}, nil
}
