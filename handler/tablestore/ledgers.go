package tablestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/ledger"
)

// Ledgers is a ledger.Store on one table:
//
//	PK ledger:<ledgerId>  RK record           the ledger's record (status, hash, progress)
//	PK order:<orderId>    RK counter          the last seq allocated to the order
//	PK order:<orderId>    RK alloc:<ledgerId> the seqs a ledger was given: First, Count, Hash
//
// An allocation writes the counter (ETag-guarded) and its alloc row in one
// entity-group transaction: two ledgers racing over an order cannot both
// take the same numbers, and numbers are never taken without their record.
// The alloc row holds the ledger's count and content hash: the numbers go
// back only to the same content. Records are inserted (AddEntity) or
// replaced under the ETag they were read with, never upserted.
type Ledgers struct {
	table *aztables.Client
}

var _ ledger.Store = (*Ledgers)(nil)

// NewLedgers returns a Ledgers on table, created on first use if missing.
func NewLedgers(table *aztables.Client) *Ledgers { return &Ledgers{table: table} }

// A rejected ledger's record must always be writable: a string property
// holds at most 64 KiB (32K UTF-16 units). The problems kept are the first
// that fit maxProblemsBytes of JSON, at most maxStoredProblems;
// ProblemCount says how many there were. The error is cut to maxErrorRunes.
const (
	maxStoredProblems = 100
	maxProblemsBytes  = 30_000
	maxErrorRunes     = 4_000
)

// GetLedger implements ledger.Store.
func (s *Ledgers) GetLedger(ctx context.Context, id string) (*ledger.Record, error) {
	resp, err := s.table.GetEntity(ctx, "ledger:"+id, "record", nil)
	switch tableCode(err) {
	case "":
	case aztables.ResourceNotFound, aztables.EntityNotFound, aztables.TableNotFound:
		return nil, nil
	default:
		return nil, classify(err, "read ledger "+id)
	}
	var e aztables.EDMEntity
	if err := json.Unmarshal(resp.Value, &e); err != nil {
		return nil, fault.Wrap(fault.Internal, err, "decode ledger "+id)
	}
	p := props(e.Properties)
	r := &ledger.Record{ID: id, Hash: p.str("Hash"), Status: ledger.Status(p.str("Status")),
		Transactions: int(p.int("Transactions")), Orders: int(p.int("Orders")), Sent: int(p.int("Sent")),
		Error: p.str("Error"), UpdatedAt: p.time("UpdatedAt"), ETag: string(resp.ETag)}
	if s := p.str("Problems"); s != "" {
		_ = json.Unmarshal([]byte(s), &r.Problems)
	}
	return r, nil
}

func recordEntity(r *ledger.Record) ([]byte, error) {
	problems := r.Problems
	if len(problems) > maxStoredProblems {
		problems = problems[:maxStoredProblems]
	}
	pj, err := json.Marshal(problems)
	for err == nil && len(pj) > maxProblemsBytes {
		problems = problems[:len(problems)*maxProblemsBytes/len(pj)] // shrinks every round: len(pj) > maxProblemsBytes
		pj, err = json.Marshal(problems)
	}
	if err != nil {
		return nil, err
	}
	msg := r.Error
	if rs := []rune(msg); len(rs) > maxErrorRunes {
		msg = string(rs[:maxErrorRunes]) + "…"
	}
	return json.Marshal(aztables.EDMEntity{
		Entity: aztables.Entity{PartitionKey: "ledger:" + r.ID, RowKey: "record"},
		Properties: map[string]any{
			"Hash": r.Hash, "Status": string(r.Status), "Transactions": int32(r.Transactions), "Orders": int32(r.Orders),
			"Sent": int32(r.Sent), "Error": msg, "Problems": string(pj), "ProblemCount": int32(len(r.Problems)),
			"UpdatedAt": aztables.EDMDateTime(r.UpdatedAt),
		},
	})
}

// CreateLedger implements ledger.Store.
func (s *Ledgers) CreateLedger(ctx context.Context, r *ledger.Record) error {
	data, err := recordEntity(r)
	if err != nil {
		return fault.Wrap(fault.Internal, err, "encode ledger record")
	}
	err = withTable(ctx, s.table, func() error {
		resp, err := s.table.AddEntity(ctx, data, nil)
		if err == nil {
			r.ETag = string(resp.ETag)
		}
		return err
	})
	if tableCode(err) == aztables.EntityAlreadyExists {
		return ledger.ErrLedgerExists
	}
	return classifyOrNil(err, "create ledger "+r.ID)
}

// SaveLedger implements ledger.Store.
func (s *Ledgers) SaveLedger(ctx context.Context, r *ledger.Record) error {
	data, err := recordEntity(r)
	if err != nil {
		return fault.Wrap(fault.Internal, err, "encode ledger record")
	}
	if r.ETag == "" {
		return fault.Errorf(fault.Internal, "save ledger %q: no ETag (a record is replaced only as it was read)", r.ID)
	}
	etag := azcore.ETag(r.ETag)
	resp, err := s.table.UpdateEntity(ctx, data, &aztables.UpdateEntityOptions{UpdateMode: aztables.UpdateModeReplace, IfMatch: &etag})
	switch tableCode(err) {
	case "":
		if err != nil {
			return classify(err, "save ledger "+r.ID)
		}
		r.ETag = string(resp.ETag)
		return nil
	case aztables.UpdateConditionNotSatisfied, aztables.ResourceNotFound, aztables.EntityNotFound, aztables.TableNotFound:
		return ledger.ErrLedgerChanged
	default:
		return classify(err, "save ledger "+r.ID)
	}
}

// Allocate implements ledger.Store: one query (counter and this ledger's
// alloc row) and one transaction per attempt.
func (s *Ledgers) Allocate(ctx context.Context, ledgerID, hash, orderID string, count int) (int64, error) {
	pk := "order:" + orderID
	allocKey := "alloc:" + ledgerID
	filter := fmt.Sprintf("PartitionKey eq '%s' and (RowKey eq 'counter' or RowKey eq '%s')", escape(pk), escape(allocKey))
	for attempt := 0; attempt < 20; attempt++ {
		var last int64
		var etag *azcore.ETag
		pager := s.table.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter})
		for pager.More() {
			page, err := pager.NextPage(ctx)
			if err != nil && tableCode(err) != aztables.TableNotFound {
				return 0, classify(err, "read seq counter of order "+orderID)
			}
			for _, raw := range page.Entities {
				var e aztables.EDMEntity
				if err := json.Unmarshal(raw, &e); err != nil {
					return 0, fault.Wrap(fault.Internal, err, "decode seq counter")
				}
				p := props(e.Properties)
				if e.RowKey == allocKey { // this ledger was given its numbers before
					if got, gotHash := int(p.int("Count")), p.str("Hash"); !ledger.SameAllocation(count, hash, got, gotHash) {
						return 0, ledger.AllocationMismatch(ledgerID, orderID, count, hash, got, gotHash)
					}
					return p.int("First"), nil
				}
				tag := azcore.ETag(e.ETag)
				last, etag = p.int("Last"), &tag
			}
		}
		counter, _ := json.Marshal(aztables.EDMEntity{Entity: aztables.Entity{PartitionKey: pk, RowKey: "counter"},
			Properties: map[string]any{"Last": aztables.EDMInt64(last + int64(count))}})
		alloc, _ := json.Marshal(aztables.EDMEntity{Entity: aztables.Entity{PartitionKey: pk, RowKey: allocKey},
			Properties: map[string]any{"First": aztables.EDMInt64(last + 1), "Count": int32(count), "Hash": hash}})
		actions := []aztables.TransactionAction{{ActionType: aztables.TransactionTypeAdd, Entity: alloc}}
		if etag == nil {
			actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeAdd, Entity: counter})
		} else {
			actions = append(actions, aztables.TransactionAction{ActionType: aztables.TransactionTypeUpdateReplace, Entity: counter, IfMatch: etag})
		}
		err := withTable(ctx, s.table, func() error { return submitTransaction(ctx, s.table, actions) })
		switch tableCode(err) {
		case "":
			if err != nil {
				return 0, classify(err, "allocate seqs of order "+orderID)
			}
			return last + 1, nil
		case aztables.EntityAlreadyExists, aztables.UpdateConditionNotSatisfied:
			continue // another ledger (or this one, elsewhere) allocated first: read again
		default:
			return 0, classify(err, "allocate seqs of order "+orderID)
		}
	}
	return 0, fault.Errorf(fault.Unavailable, "allocate seqs of order %q: too much contention", orderID)
}

func classifyOrNil(err error, what string) error {
	if err == nil {
		return nil
	}
	var fe *fault.Error
	if errors.As(err, &fe) {
		return err
	}
	return classify(err, what)
}

var _ convoy.Allocations = (*Ledgers)(nil)

// Published implements convoy.Allocations: one query of the order's
// partition (its counter and its alloc rows, one per ledger that published
// to it; more than 1,000 of them take another page each), the columns it
// needs only. When seq was allocated is the Timestamp of the alloc row that
// holds it: alloc rows are inserted once and never changed.
func (s *Ledgers) Published(ctx context.Context, orderID string, seq int64) (convoy.Published, error) {
	filter := fmt.Sprintf("PartitionKey eq '%s'", escape("order:"+orderID))
	sel := "RowKey,Timestamp,Last,First,Count"
	pager := s.table.NewListEntitiesPager(&aztables.ListEntitiesOptions{Filter: &filter, Select: &sel})
	var out convoy.Published
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if tableCode(err) == aztables.TableNotFound {
			return convoy.Published{}, nil
		}
		if err != nil {
			return convoy.Published{}, classify(err, "read the seqs published to order "+orderID)
		}
		for _, raw := range page.Entities {
			var e aztables.EDMEntity
			if err := json.Unmarshal(raw, &e); err != nil {
				return convoy.Published{}, fault.Wrap(fault.Internal, err, "decode the seqs published to order "+orderID)
			}
			p := props(e.Properties)
			switch {
			case e.RowKey == "counter":
				out.LastSeq = p.int("Last")
			case strings.HasPrefix(e.RowKey, "alloc:"):
				if first := p.int("First"); first <= seq && seq < first+p.int("Count") {
					out.SeqAllocatedAt = time.Time(e.Timestamp).UTC()
				}
			}
		}
	}
	if seq > out.LastSeq {
		out.SeqAllocatedAt = time.Time{}
	}
	return out, nil
}
