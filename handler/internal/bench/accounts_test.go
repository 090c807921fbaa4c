package bench_test

import (
	"fmt"
	"reflect"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/accounts"
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/orders"
)

// BenchmarkAccountsBesideOrders (issue 44): what an account message costs
// beside an order message, both measured the same way in the same run, each
// account figure a ratio to the order figure: the CPU per message of the
// processor in this process (the body read by the domain, the decision, the
// commit through the SDK to Azurite; 16 sessions in parallel, one message per
// call), and Table round trips per message (single mode, batches of 50, and
// steady state: a warm cache on keys with a history). The handler binary
// serves orders alone so far, so the CPU is the processor's in-process, not
// the handler process's through the host (BenchmarkHandlerCPU).
//
// The order workload is the acceptance ledger's (a CreateOrder, then
// AddTransactions with unique txIds); the account workload is an open, then
// deposits and withdrawals with unique references, and every tenth entry the
// reversal of a deposit a few entries back.
func BenchmarkAccountsBesideOrders(b *testing.B) {
	const sessions, perKey, rounds = 16, 100, 9
	loads := []domainLoad{orderLoad, accountLoad}
	for i := range b.N {
		// CPU: rounds of one run each, in alternating order, so that the
		// machine's drift falls on both alike; the ratio is each round's.
		cpu := map[string][]float64{}
		var ratios []float64
		for r := range rounds {
			perMsg := map[string]float64{}
			order := slices.Clone(loads)
			if r%2 == 1 {
				slices.Reverse(order)
			}
			for _, w := range order {
				perMsg[w.name] = domainCPU(b, w, fmt.Sprintf("dcpu%d%s%d", i, w.name[:1], r), sessions, perKey)
				cpu[w.name] = append(cpu[w.name], perMsg[w.name])
			}
			ratios = append(ratios, perMsg["accounts"]/perMsg["orders"])
		}
		ratio("cpu_accounts_vs_orders", median(ratios),
			fmt.Sprintf("processor CPU per account message / per order message, in process, 16 sessions, one message per call; median of %d alternating rounds (%.2f to %.2f)",
				rounds, slices.Min(ratios), slices.Max(ratios)), atMost(1.2))
		for _, w := range loads {
			record(figure{name: "cpu_per_message_" + w.name, value: median(cpu[w.name]) * 1e6, unit: "us",
				what: fmt.Sprintf("CPU of this process per %s message (the body read, the decision, the commit through the SDK), median of the rounds", w.noun)})
		}

		// Round trips: the same scenarios for both, each on a table of its own.
		trips := map[string]map[string]tally3{}
		for _, w := range loads {
			prefix := fmt.Sprintf("drt%d%s", i, w.name[:1])
			trips[w.name] = map[string]tally3{
				"single":  domainTrips(b, w, prefix+"s", 40, 50, 1),
				"batch50": domainTrips(b, w, prefix+"b", 40, 50, 50),
				"steady":  steadyTrips(b, w, prefix+"w"),
			}
		}
		for _, s := range []struct{ name, what string }{
			{"single", "one message per call, in order, a new processor (cold cache) on 40 keys of 50 messages"},
			{"batch50", "the same in contiguous batches of 50 messages per call"},
			{"steady", "warm cache, one message per call, on 8 keys with 120 messages before (the last 20 after a restart)"},
		} {
			o, a := trips["orders"][s.name], trips["accounts"][s.name]
			for _, c := range []struct {
				load domainLoad
				t    tally3
			}{{orderLoad, o}, {accountLoad, a}} {
				record(figure{name: "roundtrips_" + s.name + "_" + c.load.name, value: c.t.perMessage(c.t.trips), unit: "trips/message",
					what: fmt.Sprintf("Table round trips per %s message, %s (%.3g of them reads)", c.load.noun, s.what, c.t.perMessage(c.t.reads))})
			}
			ratio("roundtrips_"+s.name+"_accounts_vs_orders", float64(a.trips)/float64(o.trips),
				"round trips of the account messages / of as many order messages, "+s.name, atMost(1))
		}
	}
}

// A domainLoad is one domain's workload: its rules, and the messages of
// perKey commands for each of keys, interleaved as a ledger publishes them,
// with the state each key ends in once all are applied (the oracle).
type domainLoad struct {
	name, noun string
	domain     keyed.Domain
	messages   func(b *testing.B, prefix string, keys []string, perKey int) ([]convoy.Envelope, map[string]any)
}

var orderLoad = domainLoad{name: "orders", noun: "order", domain: orders.Domain, messages: orderLoadMessages}

var accountLoad = domainLoad{name: "accounts", noun: "account", domain: keyed.Erase(accounts.Rules{}), messages: accountLoadMessages}

// orderLoadMessages are the acceptance ledger's (ledgertest.Doc) through
// the real publisher: the i-th entry is key i mod len(keys)'s, a CreateOrder
// in EUR first, then AddTransactions of amount i.
func orderLoadMessages(b *testing.B, prefix string, keys []string, perKey int) ([]convoy.Envelope, map[string]any) {
	msgs := orderMessages(b, prefix, len(keys)*perKey, keys)
	want := map[string]any{}
	for k, id := range keys {
		s := orders.State{Status: orders.StatusOpen, Currency: "EUR", TxCount: int64(perKey - 1)}
		for n := 1; n < perKey; n++ {
			s.Total += int64(n*len(keys) + k)
		}
		want[id] = s
	}
	return msgs, want
}

// accountLoadMessages: each account is opened in EUR without overdraft,
// then takes deposits (three for each withdrawal) and, every tenth entry,
// the reversal of the deposit three deposits back; a withdrawal the balance
// does not cover is a deposit instead, so nothing is rejected.
func accountLoadMessages(b *testing.B, prefix string, keys []string, perKey int) ([]convoy.Envelope, map[string]any) {
	cmds := map[string][]accounts.Command{}
	want := map[string]any{}
	for _, id := range keys {
		s := accounts.State{Status: accounts.StatusOpen, Currency: "EUR"}
		list := []accounts.Command{{AccountID: id, Kind: accounts.Open, Currency: "EUR"}}
		var deposits []accounts.Command
		for n := 1; n < perKey; n++ {
			c := accounts.Command{AccountID: id, Reference: fmt.Sprintf("%s-%d", prefix, n)}
			switch {
			case n%10 == 0 && len(deposits) >= 3 && deposits[len(deposits)-3].Amount <= s.Balance:
				of := deposits[len(deposits)-3]
				c.Kind, c.Reverses = accounts.Reverse, of.Reference
				s.Balance -= of.Amount
				deposits = slices.Delete(deposits, len(deposits)-3, len(deposits)-2) // reversed once
			case n%4 == 3 && s.Balance >= 100:
				c.Kind, c.Amount = accounts.Withdraw, 100
				s.Balance -= 100
			default:
				c.Kind, c.Amount = accounts.Deposit, int64(1000+n)
				s.Balance += c.Amount
				deposits = append(deposits, c)
			}
			s.Entries++
			list = append(list, c)
		}
		cmds[id], want[id] = list, s
	}
	var msgs []convoy.Envelope
	for n := range perKey {
		for k, id := range keys {
			body, err := accounts.EncodeBody(cmds[id][n])
			if err != nil {
				b.Fatal(err)
			}
			msgs = append(msgs, convoy.NewMessage(prefix, n*len(keys)+k, int64(n+1), false, id, body))
		}
	}
	return msgs, want
}

// byKey reads msgs with the domain's rules, grouped by key in the order of
// their first message.
func (w domainLoad) byKey(b *testing.B, msgs []convoy.Envelope) (map[string][]convoy.Message, []string) {
	by := map[string][]convoy.Message{}
	var keys []string
	for _, m := range msgs {
		cmd, err := w.domain.ReadCommand(m.SessionID, m.Body)
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := by[m.SessionID]; !ok {
			keys = append(keys, m.SessionID)
		}
		by[m.SessionID] = append(by[m.SessionID], convoy.Message{Seq: m.Seq, Last: m.Last, MessageID: m.MessageID, Command: cmd})
	}
	return by, keys
}

// check fails b unless every key of want applied all its messages and ends
// in the state want says.
func (w domainLoad) check(b *testing.B, store convoy.Store, want map[string]any, perKey int) {
	for id, s := range want {
		o, err := store.Load(b.Context(), id)
		if err == nil {
			_, err = o.Bind(w.domain)
		}
		if err != nil || o.AppliedSeq != int64(perKey) || o.ParkedCount != 0 || !reflect.DeepEqual(o.State, s) {
			b.Fatalf("%s %s: applied seq %d, %d parked, state %+v, %v; want seq %d, state %+v", w.noun, id, o.AppliedSeq, o.ParkedCount, o.State, err, perKey, s)
		}
	}
}

// domainCPU is the CPU of this process per message while sessions
// goroutines each apply perKey messages of a key of their own, one per
// call, through one processor on a new table: each body is read by the
// domain's rules in the measured time, as the handler reads it.
func domainCPU(b *testing.B, w domainLoad, prefix string, sessions, perKey int) float64 {
	msgs, want := w.messages(b, prefix, orderIDs(prefix, sessions), perKey)
	by := map[string][]convoy.Envelope{}
	for _, m := range msgs {
		by[m.SessionID] = append(by[m.SessionID], m)
	}
	store := sharedAzurite(b).NewOrderStore(b, nil)
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: w.domain})
	errs := make(chan error, sessions)
	var wg sync.WaitGroup
	liveHeap() // no garbage of the setup collected in the measured time
	cpu0 := selfCPU(b)
	for id, list := range by {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, m := range list {
				cmd, err := w.domain.ReadCommand(id, m.Body)
				if err == nil {
					_, err = p.Process(b.Context(), id, []convoy.Message{{Seq: m.Seq, Last: m.Last, MessageID: m.MessageID, Command: cmd}})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	cpu := selfCPU(b) - cpu0
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	w.check(b, store, want, perKey)
	return cpu.Seconds() / float64(len(msgs))
}

// selfCPU is this process's user + system CPU so far.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// tally3 is what a round-trip scenario counted, over messages.
type tally3 struct{ trips, reads, messages int64 }

func (t tally3) perMessage(n int64) float64 { return float64(n) / float64(t.messages) }

// domainTrips applies keys×perKey messages through a new processor on a
// new table, key after key, in calls of at most batch messages, and counts
// the Table round trips.
func domainTrips(b *testing.B, w domainLoad, prefix string, keys, perKey, batch int) tally3 {
	msgs, want := w.messages(b, prefix, orderIDs(prefix, keys), perKey)
	by, ids := w.byKey(b, msgs)
	counter := &countingTransport{}
	store := sharedAzurite(b).NewOrderStore(b, counter)
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: w.domain})
	counter.reset()
	for _, id := range ids {
		applyInCalls(b, p, id, by[id], batch)
	}
	t := tally3{counter.trips.Load(), counter.reads.Load(), int64(len(msgs))}
	w.check(b, store, want, perKey)
	return t
}

// steadyTrips: 8 keys are given 100 messages each (batches of 50), then a
// new processor (a restart) takes 20 more of each, one per call; the round
// trips counted are those of the 50 after, one per call.
func steadyTrips(b *testing.B, w domainLoad, prefix string) tally3 {
	const keys, history, warm, measured = 8, 100, 20, 50
	msgs, want := w.messages(b, prefix, orderIDs(prefix, keys), history+warm+measured)
	by, ids := w.byKey(b, msgs)
	counter := &countingTransport{}
	store := sharedAzurite(b).NewOrderStore(b, counter)
	setup := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: w.domain})
	for _, id := range ids {
		applyInCalls(b, setup, id, by[id][:history], 50)
	}
	p := convoy.NewProcessor(store, convoy.ProcessorOptions{Domain: w.domain})
	for _, id := range ids {
		applyInCalls(b, p, id, by[id][history:history+warm], 1)
	}
	counter.reset()
	for _, id := range ids {
		applyInCalls(b, p, id, by[id][history+warm:], 1)
	}
	t := tally3{counter.trips.Load(), counter.reads.Load(), keys * measured}
	w.check(b, store, want, history+warm+measured)
	return t
}

func applyInCalls(b *testing.B, p *convoy.Processor, id string, msgs []convoy.Message, batch int) {
	for k := 0; k < len(msgs); k += batch {
		if _, err := p.Process(b.Context(), id, msgs[k:min(k+batch, len(msgs))]); err != nil {
			b.Fatalf("%s seq %d: %v", id, msgs[k].Seq, err)
		}
	}
}
