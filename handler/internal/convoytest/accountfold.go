package convoytest

import (
	"regexp"

	"github.com/convoy-dev/convoy/handler/accounts"
)

// FoldAccount is the account domain's oracle, written apart from Decide: it replays the
// commands on a plain record of the account (every reference made, what it
// moved, whether it was reversed), checking each rule in the words of the
// account's contract, and keeps what passes.
func FoldAccount(cmds []accounts.Command) accounts.State {
	type made struct {
		signed   int64 // what it added to the balance
		reversal bool
		reversed bool
	}
	var (
		status   = "new"
		currency string
		limit    int64
		ledger   []int64 // the signed amount of every entry, in order
		refs     = map[string]*made{}
	)
	balance := func() int64 {
		var sum int64
		for _, e := range ledger {
			sum += e
		}
		return sum
	}
	isID := regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`).MatchString
	isCurrency := regexp.MustCompile(`^[A-Z]{3}$`).MatchString
	for _, c := range cmds {
		if c.Kind == accounts.Open {
			if status == "new" && isCurrency(c.Currency) && c.Limit >= 0 && c.Limit <= accounts.MaxBalance {
				status, currency, limit = "open", c.Currency, c.Limit
			}
			continue
		}
		if status != "open" {
			continue // before the open, after the close: nothing happens
		}
		var signed int64
		switch c.Kind {
		case accounts.Close:
			if balance() == 0 {
				status = "closed"
			}
			continue
		case accounts.Deposit, accounts.Withdraw:
			if !isID(c.Reference) || refs[c.Reference] != nil || c.Amount < 1 || c.Amount > accounts.MaxAmount {
				continue
			}
			signed = c.Amount
			if c.Kind == accounts.Withdraw {
				signed = -c.Amount
			}
		case accounts.Reverse:
			of := refs[c.Reverses]
			if !isID(c.Reference) || !isID(c.Reverses) || refs[c.Reference] != nil || of == nil || of.reversal || of.reversed {
				continue
			}
			signed = -of.signed
		default:
			continue
		}
		after := balance() + signed
		if after < -limit || after > accounts.MaxBalance || after < -accounts.MaxBalance {
			continue
		}
		ledger = append(ledger, signed)
		refs[c.Reference] = &made{signed: signed, reversal: c.Kind == accounts.Reverse}
		if c.Kind == accounts.Reverse {
			refs[c.Reverses].reversed = true
		}
	}
	return accounts.State{Status: accounts.Status(status), Currency: currency, Limit: limit, Balance: balance(),
		Entries: int64(len(ledger))}
}
