package demo

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/convoy-dev/convoy/handler/accounts"
	"github.com/convoy-dev/convoy/handler/internal/convoytest"
	"github.com/convoy-dev/convoy/handler/internal/devbus"
	"github.com/convoy-dev/convoy/handler/ledger"
)

// GetAccount reads an account's state through the front end, as a user
// would.
func GetAccount(ctx context.Context, base, id string) (accounts.View, error) {
	var v accounts.View
	return v, getJSON(ctx, base+"/api/accounts/"+id, &v)
}

// ExpectedAccount is what an account's commands, as sent, must leave: the
// independent fold's state (convoytest.FoldAccount) and how many commands
// there were, each having consumed its seq.
type ExpectedAccount struct {
	State    accounts.State
	Commands int64
}

// Rejected is how many of the commands had no effect: every command but
// the entries, the open that opened the account and the close that closed it.
func (e ExpectedAccount) Rejected() int64 {
	n := e.Commands - e.State.Entries
	if e.State.Status != accounts.StatusNew {
		n-- // the open
	}
	if e.State.Status == accounts.StatusClosed {
		n-- // the close
	}
	return n
}

// ExpectedAccounts folds each account's commands in seq order with the
// independent fold (convoytest.FoldAccount), never with the account rules
// themselves. The seqs are those the account messages actually carried
// (sent: the accounts queue's journal), as for orders (ExpectedOrders).
func ExpectedAccounts(ledgers []*ledger.Ledger, sent []devbus.Message) (map[string]ExpectedAccount, error) {
	byKey, err := inSeqOrder(ledgers, accounts.Domain, sent)
	if err != nil {
		return nil, err
	}
	want := map[string]ExpectedAccount{}
	for id, es := range byKey {
		cmds := make([]accounts.Command, len(es))
		for i, e := range es {
			c, ok := e.Command.(accounts.Command)
			if !ok {
				return nil, fmt.Errorf("account %s: entry of seq %d is a %T, not an accounts.Command", id, i+1, e.Command)
			}
			cmds[i] = c
		}
		want[id] = ExpectedAccount{State: convoytest.FoldAccount(cmds), Commands: int64(len(cmds))}
	}
	return want, nil
}

// CompareAccount returns how got differs from want ("" if it does not).
func CompareAccount(got accounts.View, want ExpectedAccount) string {
	s := want.State
	switch {
	case got.Parked != 0 || got.MissingSeq != 0:
		return fmt.Sprintf("%d message(s) still parked, missing seq %d", got.Parked, got.MissingSeq)
	case got.Status != s.Status || got.Currency != s.Currency || got.Limit != s.Limit:
		return fmt.Sprintf("status %s %s limit %d, want %s %s limit %d", got.Status, got.Currency, got.Limit, s.Status, s.Currency, s.Limit)
	case got.Balance != s.Balance:
		return fmt.Sprintf("balance %d, want %d", got.Balance, s.Balance)
	case got.Continuation == "" && int64(len(got.Entries)) != s.Entries:
		return fmt.Sprintf("%d entries, want %d", len(got.Entries), s.Entries)
	case len(got.Entries) > 0 && got.Continuation == "" && got.Entries[len(got.Entries)-1].Balance != s.Balance:
		return fmt.Sprintf("the last entry left balance %d, want %d", got.Entries[len(got.Entries)-1].Balance, s.Balance)
	case got.AppliedSeq != want.Commands:
		return fmt.Sprintf("appliedSeq %d, want %d (one per command)", got.AppliedSeq, want.Commands)
	case got.Continuation == "" && int64(len(got.Rejected)) != want.Rejected():
		return fmt.Sprintf("%d rejected, want %d", len(got.Rejected), want.Rejected())
	}
	return ""
}

// reportAccounts prints every account of the ledgers and compares it with
// the fold of its commands in seq order; it returns the mismatches.
func reportAccounts(ctx context.Context, out io.Writer, base string, ledgers []*ledger.Ledger, sent []devbus.Message) (mismatches []string, checked int, err error) {
	expected, err := ExpectedAccounts(ledgers, sent)
	if err != nil {
		return nil, 0, err
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ACCOUNT\tSTATUS\tCURRENCY\tBALANCE\tLIMIT\tENTRIES\tAPPLIED SEQ\tREJECTED\tPARKED\tMATCHES FOLD")
	var rejections []string
	for _, id := range allKeys(ledgers, accounts.Domain.Name()) {
		v, err := GetAccount(ctx, base, id)
		if err != nil {
			return nil, 0, err
		}
		mark := "yes"
		if problem := CompareAccount(v, expected[id]); problem != "" {
			mark = "NO: " + problem
			mismatches = append(mismatches, id+": "+problem)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", id, v.Status, v.Currency, v.Balance, v.Limit,
			len(v.Entries), v.AppliedSeq, len(v.Rejected), v.Parked, mark)
		for _, r := range v.Rejected {
			what := strings.TrimSpace(string(r.Kind) + " " + r.Reference)
			rejections = append(rejections, fmt.Sprintf("  %s seq %d %s: %s", id, r.Seq, what, r.Reason))
		}
	}
	tw.Flush()
	printRejections(out, rejections)
	return mismatches, len(expected), nil
}
