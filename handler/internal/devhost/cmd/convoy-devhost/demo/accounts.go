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

// ExpectedAccounts is what each account's commands, in seq order, must
// leave, by the independent fold (convoytest.ExpectAccount: its state,
// every entry and every rejected seq), never by the account rules
// themselves. The seqs are those the account messages actually carried
// (sent: the accounts queue's journal), as for orders (ExpectedOrders).
func ExpectedAccounts(ledgers []*ledger.Ledger, sent []devbus.Message) (map[string]convoytest.AccountExpected, error) {
	byKey, err := InSeqOrder(ledgers, accounts.Domain, sent)
	if err != nil {
		return nil, err
	}
	want := map[string]convoytest.AccountExpected{}
	for id, es := range byKey {
		cmds := make([]accounts.Command, len(es))
		for i, e := range es {
			c, ok := e.Command.(accounts.Command)
			if !ok {
				return nil, fmt.Errorf("account %s: entry of seq %d is a %T, not an accounts.Command", id, i+1, e.Command)
			}
			cmds[i] = c
		}
		want[id] = convoytest.ExpectAccount(cmds)
	}
	return want, nil
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
		if problem := convoytest.CompareAccount(v, expected[id]); problem != "" {
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
