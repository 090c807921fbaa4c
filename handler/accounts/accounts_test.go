package accounts_test

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/convoy-dev/convoy/handler/accounts"
	"github.com/convoy-dev/convoy/handler/internal/convoytest"
	"github.com/convoy-dev/convoy/handler/keyed/keyedtest"
)

// genAccount makes an account's commands: mostly valid ones (an open, then
// deposits, withdrawals and reversals of them), and every kind of mistake
// the rules reject: a reference used again, a withdrawal or a deposit's
// reversal beyond the overdraft limit, a reversal of an unknown reference,
// of a reversal, or a second one, a second open, a close with money, any
// command after the close or before the open, amounts beyond the bounds and
// balances driven to ±(2^53 − 1). Now and then it empties the account and
// closes it (it folds what it made so far to know the balance).
func genAccount(rng *rand.Rand, id string) []accounts.Command {
	n := 1 + rng.IntN(40)
	scale, deposits, withdrawals := int64(1000), 35, 30
	limits := []int64{0, 500, accounts.MaxAmount, accounts.MaxBalance}
	if rng.IntN(4) == 0 { // amounts near the bound, balances driven to ±2^53
		scale = accounts.MaxAmount
		if rng.IntN(2) == 0 {
			deposits, withdrawals = 60, 10
		} else {
			deposits, withdrawals, limits = 10, 60, []int64{accounts.MaxBalance}
		}
	}
	open := func() accounts.Command {
		return accounts.Command{AccountID: id, Kind: accounts.Open, Currency: []string{"EUR", "USD", "JPY"}[rng.IntN(3)],
			Limit: limits[rng.IntN(len(limits))]}
	}
	var cmds []accounts.Command
	if rng.IntN(10) != 0 {
		cmds = append(cmds, open())
	}
	var used, moves []string // every reference made; those of deposits and withdrawals
	fresh := 0
	for len(cmds) < n {
		fresh++
		ref := fmt.Sprintf("r-%d", fresh)
		if len(used) > 0 && rng.IntN(10) == 0 { // a reference used again
			ref = used[rng.IntN(len(used))]
		}
		amount := 1 + rng.Int64N(scale)
		if scale == accounts.MaxAmount && rng.IntN(2) == 0 {
			amount = accounts.MaxAmount - rng.Int64N(3)
		}
		if rng.IntN(30) == 0 { // beyond the bounds
			amount = []int64{0, -1, -amount, accounts.MaxAmount + 1, math.MaxInt64, math.MinInt64}[rng.IntN(6)]
		}
		c := accounts.Command{AccountID: id, Amount: amount, Reference: ref}
		switch k := rng.IntN(100); {
		case k < deposits:
			c.Kind = accounts.Deposit
			moves = append(moves, ref)
		case k < deposits+withdrawals:
			c.Kind = accounts.Withdraw
			moves = append(moves, ref)
		case k < 85:
			c = accounts.Command{AccountID: id, Kind: accounts.Reverse, Reference: ref}
			switch r := rng.IntN(10); {
			case r < 7 && len(moves) > 0: // often one reversed already
				c.Reverses = moves[rng.IntN(len(moves))]
			case r < 9 && len(used) > 0: // perhaps a reversal
				c.Reverses = used[rng.IntN(len(used))]
			default:
				c.Reverses = fmt.Sprintf("u-%d", rng.IntN(100))
			}
			if c.Reverses == c.Reference { // ReadCommand refuses it; Decide never sees it
				continue
			}
		case k < 89:
			c = open()
		case k < 94:
			c = accounts.Command{AccountID: id, Kind: accounts.Close}
		default: // empty it, then close
			switch b := convoytest.FoldAccount(cmds).Balance; { // at most MaxAmount: it may not empty it
			case b > 0:
				cmds = append(cmds, accounts.Command{AccountID: id, Kind: accounts.Withdraw, Amount: min(b, accounts.MaxAmount), Reference: ref})
			case b < 0:
				cmds = append(cmds, accounts.Command{AccountID: id, Kind: accounts.Deposit, Amount: min(-b, accounts.MaxAmount), Reference: ref})
			}
			c = accounts.Command{AccountID: id, Kind: accounts.Close}
		}
		used = append(used, ref)
		cmds = append(cmds, c)
	}
	return cmds
}

func TestAccountRulesConform(t *testing.T) {
	keyedtest.Conformance(t, accounts.Rules{}, genAccount, keyedtest.Options{})
}

// The soak's flags (make soak): seeds from -first on, for -duration.
var (
	soakFirst    = flag.Int64("first", 1, "TestAccountRulesSimulated: the first seed")
	soakDuration = flag.Duration("duration", 0, "TestAccountRulesSimulated: run seeds for this long (make soak)")
)

func TestAccountRulesSimulated(t *testing.T) {
	seeds := 40
	if testing.Short() {
		seeds = 10
	}
	keyedtest.Simulate(t, accounts.Rules{}, genAccount, convoytest.FoldAccount, keyedtest.Options{Seeds: seeds, FirstSeed: *soakFirst, Duration: *soakDuration})
}

// TestGeneratorMakesEveryMistake: the generated commands, folded by the
// oracle, take every path: each kind applied, and each mistake made (read
// from the commands before it, apart from the fold's own logic). A generator
// that stopped making one would leave its rule untested by the harness.
func TestGeneratorMakesEveryMistake(t *testing.T) {
	seen := map[string]bool{}
	for seed := range uint64(200) {
		cmds := genAccount(rand.New(rand.NewPCG(seed, 1)), "a-1")
		kindOf := map[string]accounts.Kind{} // every reference made so far, by the kind of its command
		reversed := map[string]bool{}        // references reversed by an applied reversal
		for i, c := range cmds {
			before, after := convoytest.FoldAccount(cmds[:i]), convoytest.FoldAccount(cmds[:i+1])
			applied := before != after
			if applied {
				seen[string(c.Kind)+" applied"] = true
			}
			_, used := kindOf[c.Reference]
			of, known := kindOf[c.Reverses]
			switch {
			case before.Status == accounts.StatusClosed:
				seen["after close"] = true
			case before.Status == accounts.StatusNew && c.Kind != accounts.Open:
				seen["before open"] = true
			case c.Kind == accounts.Open:
				if !applied {
					seen["open twice"] = true
				}
			case c.Kind == accounts.Close:
				if !applied {
					seen["close with money"] = true
				}
			case c.Kind != accounts.Reverse && (c.Amount < 1 || c.Amount > accounts.MaxAmount):
				seen["amount beyond the bounds"] = true
			case used:
				seen["reference used again"] = true
			case c.Kind == accounts.Reverse && !known:
				seen["reversal of an unknown reference"] = true
			case c.Kind == accounts.Reverse && of == accounts.Reverse:
				seen["reversal of a reversal"] = true
			case c.Kind == accounts.Reverse && reversed[c.Reverses]:
				seen["second reversal"] = true
			case !applied && (c.Kind == accounts.Withdraw || c.Kind == accounts.Reverse && of == accounts.Deposit):
				seen[string(c.Kind)+" beyond the overdraft limit"] = true
			case !applied:
				seen[string(c.Kind)+" beyond 2^53 − 1"] = true
			}
			if c.Reference != "" && c.Kind != accounts.Open && c.Kind != accounts.Close {
				if !used {
					kindOf[c.Reference] = c.Kind
				}
				if applied && c.Kind == accounts.Reverse {
					reversed[c.Reverses] = true
				}
			}
			if after.Balance > accounts.MaxBalance-accounts.MaxAmount {
				seen["balance near 2^53"] = true
			}
			if after.Balance < -accounts.MaxBalance+accounts.MaxAmount {
				seen["balance near -2^53"] = true
			}
		}
	}
	for _, want := range []string{"open applied", "deposit applied", "withdraw applied", "reverse applied", "close applied",
		"after close", "before open", "open twice", "close with money", "amount beyond the bounds", "reference used again",
		"reversal of an unknown reference", "reversal of a reversal", "second reversal", "withdraw beyond the overdraft limit",
		"reverse beyond the overdraft limit", "deposit beyond 2^53 − 1", "reverse beyond 2^53 − 1",
		"balance near 2^53", "balance near -2^53"} {
		if !seen[want] {
			t.Errorf("the generator never makes %q", want)
		}
	}
}
