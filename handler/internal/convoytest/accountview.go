package convoytest

import (
	"fmt"
	"slices"

	"github.com/convoy-dev/convoy/handler/accounts"
)

// AccountExpected is what an account's view must show after its commands,
// taken in seq order: the fold's state, every entry and every rejected seq.
type AccountExpected struct {
	State      accounts.State
	AppliedSeq int64
	Entries    []accounts.Entry
	Rejected   []int64 // seqs
}

// ExpectAccount folds cmds, which carry seqs 1..n in order, with FoldAccount
// one prefix at a time: a command that leaves the fold's state as it was
// was rejected; one that adds an entry made it, and what it moved is the
// change in the balance. Nothing here is read from the domain's rules.
func ExpectAccount(cmds []accounts.Command) AccountExpected {
	want := AccountExpected{State: FoldAccount(nil), AppliedSeq: int64(len(cmds))}
	for i, c := range cmds {
		next := FoldAccount(cmds[:i+1])
		switch {
		case next == want.State:
			want.Rejected = append(want.Rejected, int64(i+1))
		case next.Entries > want.State.Entries:
			e := accounts.Entry{Reference: c.Reference, Kind: c.Kind, Amount: next.Balance - want.State.Balance, Balance: next.Balance}
			if c.Kind == accounts.Reverse {
				e.Reverses = c.Reverses
			}
			want.Entries = append(want.Entries, e)
		}
		want.State = next
	}
	return want
}

// CompareAccount returns how an account's view (its whole history on one
// page) differs from want ("" if it does not); an account with parked
// messages, or with more to page through, never matches.
func CompareAccount(got accounts.View, want AccountExpected) string {
	s := want.State
	var rejected []int64
	for _, r := range got.Rejected {
		rejected = append(rejected, r.Seq)
	}
	switch {
	case got.Parked != 0 || got.MissingSeq != 0:
		return fmt.Sprintf("%d message(s) still parked, missing seq %d", got.Parked, got.MissingSeq)
	case got.Continuation != "":
		return "the history does not fit one page"
	case got.Status != s.Status || got.Currency != s.Currency || got.Limit != s.Limit || got.Balance != s.Balance || got.AppliedSeq != want.AppliedSeq:
		return fmt.Sprintf("%s %s limit %d balance %d appliedSeq %d, want %s %s limit %d balance %d appliedSeq %d",
			got.Status, got.Currency, got.Limit, got.Balance, got.AppliedSeq, s.Status, s.Currency, s.Limit, s.Balance, want.AppliedSeq)
	case !slices.Equal(got.Entries, want.Entries):
		return fmt.Sprintf("entries %v, want %v", got.Entries, want.Entries)
	case !slices.Equal(rejected, want.Rejected):
		return fmt.Sprintf("rejected seqs %v, want %v", rejected, want.Rejected)
	}
	return ""
}
