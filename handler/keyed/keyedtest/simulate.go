package keyedtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/internal/memstore"
	"github.com/convoy-dev/convoy/handler/keyed"
)

// Fold is the team's own fold of one key: the state its commands leave,
// applied in seq order (a command its rules reject leaves the state as it
// was). Write it apart from the rules' Decide: it is the oracle.
type Fold[S, C any] func(cmds []C) S

// Simulate runs the real engine (two instances, convoy.Processor, on the
// in-memory store that holds Table Storage's limits) over the keys and
// commands gen makes, under the faults the healing simulation injects:
// commits that fail before landing and replies lost after, failed reads,
// redeliveries and duplicates, reordering, batches, two instances on one
// key at once, messages dead-lettered and then replayed or skipped by an
// operator, a replay racing the skip of its seq. After quiescence it checks
// each key: every seq consumed, nothing left parked, and its stored state
// equal to fold of its commands with the skipped ones left out.
func Simulate[S, C any](t testing.TB, r keyed.Rules[S, C], gen Generator[C], fold Fold[S, C], opts Options) {
	t.Helper()
	opts.run(t, 30, func(seed int64) error { return simulate(r, gen, fold, seed) })
}

// world is one seed's run.
type world[S, C any] struct {
	rules     keyed.Rules[S, C]
	store     *memstore.Store
	instances [2]*convoy.Processor
	mu        sync.Mutex // guards rng, faults
	rng       *rand.Rand
	faults    bool
	keys      map[string][]C
	lost      map[delivery]bool // dead-lettered at some point
}

func simulate[S, C any](r keyed.Rules[S, C], gen Generator[C], fold Fold[S, C], seed int64) error {
	if err := harnessProblem(r.EncodeState(*new(S))); err != nil {
		return err
	}
	w := &world[S, C]{rules: r, store: memstore.New(), rng: rand.New(rand.NewPCG(uint64(seed), 0x73696d)), faults: true,
		keys: map[string][]C{}}
	for k := range 1 + w.rng.IntN(4) {
		key := fmt.Sprintf("k-%d", k)
		w.keys[key] = gen(rand.New(rand.NewPCG(uint64(seed), uint64(k))), key)
	}
	failRate, loseRate := w.rng.Float64()*0.2, w.rng.Float64()*0.1
	w.store.Fail = func(op, _ string) error {
		if w.roll(failRate) {
			return fault.Errorf(fault.Unavailable, "simulated: %s failed", op)
		}
		return nil
	}
	w.store.LoseReply = func(string) bool { return w.roll(loseRate) }
	for i := range w.instances {
		w.instances[i] = convoy.NewProcessor(w.store, convoy.ProcessorOptions{Domain: keyed.Erase[trackedState[S], trackedCmd[C]](tracked[S, C]{r}),
			Index: w.store, CacheSize: 1 + w.rng.IntN(8),
			Retry: fault.RetryPolicy{MaxAttempts: 2 + w.rng.IntN(2), Initial: time.Microsecond, Max: time.Microsecond}})
	}
	w.lost = w.deliver()
	// Quiescence: no more faults; the keys blocked behind what was
	// dead-lettered hold the healing invariants; every dead letter is
	// replayed, or its seq skipped, or both at once (one of the two wins).
	w.mu.Lock()
	w.faults = false
	w.mu.Unlock()
	if err := w.invariants(); err != nil {
		return fmt.Errorf("after the deliveries: %w", err)
	}
	if err := w.heal(w.lost); err != nil {
		return err
	}
	if err := w.invariants(); err != nil {
		return fmt.Errorf("after healing: %w", err)
	}
	return w.check(fold)
}

// invariants are the healing simulation's, on the store's own rows: a key's
// parked rows lie above its appliedSeq and number what its head counts; the
// blocked list names each key with parked messages, once, waiting for the
// seq after its appliedSeq, and no other.
func (w *world[S, C]) invariants() error {
	ctx := context.Background()
	entries, _, err := w.store.ScanBlocked(ctx, "", 1<<20)
	if err != nil {
		return err
	}
	listed, err := convoy.VerifyEntries(ctx, w.store, entries)
	if err != nil {
		return err
	}
	times := map[string]int{}
	for _, b := range listed {
		times[b.OrderID]++
	}
	for key := range w.keys {
		o, err := w.store.Load(ctx, key)
		if err != nil {
			return err
		}
		parked, _, err := w.store.Parked(ctx, key, 0, convoy.MaxParkAhead)
		if err != nil {
			return err
		}
		if len(parked) != o.ParkedCount {
			return fmt.Errorf("key %s: %d parked rows, its head counts %d", key, len(parked), o.ParkedCount)
		}
		if len(parked) > 0 && parked[0].Seq <= o.AppliedSeq {
			return fmt.Errorf("key %s: seq %d is parked at or below appliedSeq %d", key, parked[0].Seq, o.AppliedSeq)
		}
		if want := min(o.ParkedCount, 1); times[key] != want {
			var mine []string
			for _, e := range entries {
				if e.OrderID == key {
					mine = append(mine, fmt.Sprintf("%+v", e))
				}
			}
			return fmt.Errorf("key %s with %d parked is listed blocked %d times, want %d (head v%d since %v updated %v; entries %v)", key, o.ParkedCount, times[key], want, o.Version, o.BlockedSince, o.UpdatedAt, mine)
		}
	}
	for _, b := range listed {
		o, _ := w.store.Load(ctx, b.OrderID)
		if b.MissingSeq != o.AppliedSeq+1 {
			return fmt.Errorf("key %s is listed waiting for seq %d, its appliedSeq is %d", b.OrderID, b.MissingSeq, o.AppliedSeq)
		}
	}
	return nil
}

// roll reports true with probability p, while faults are on.
func (w *world[S, C]) roll(p float64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.faults && w.rng.Float64() < p
}

func (w *world[S, C]) intn(n int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rng.IntN(n)
}

type delivery struct {
	key   string
	seq   int64
	tries int
}

// maxDeliveries is Service Bus's MaxDeliveryCount in the simulation: a
// message that failed that often is dead-lettered (lost until replayed).
const maxDeliveries = 4

// deliver sends every key's messages, reordered and duplicated, in batches
// of one key, to both instances at once; it returns the dead-lettered ones.
func (w *world[S, C]) deliver() map[delivery]bool {
	var queue []delivery
	for key, cmds := range w.keys {
		for i := range cmds {
			queue = append(queue, delivery{key: key, seq: int64(i + 1)})
		}
	}
	// Reorder: each message moves a few places from where it was sent.
	w.rng.Shuffle(len(queue), func(i, j int) {
		if d := i - j; d < 4 && d > -4 {
			queue[i], queue[j] = queue[j], queue[i]
		}
	})
	lost := map[delivery]bool{}
	var mu sync.Mutex
	work := make(chan []delivery)
	var wg sync.WaitGroup
	var retry []delivery
	for i := range w.instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for batch := range work {
				key := batch[0].key
				if _, err := w.instances[i].Process(context.Background(), key, w.messages(batch)); err != nil {
					mu.Lock()
					for _, d := range batch {
						if d.tries++; d.tries >= maxDeliveries {
							lost[delivery{key: d.key, seq: d.seq}] = true
						} else {
							retry = append(retry, d)
						}
					}
					mu.Unlock()
					continue
				}
				if w.intn(5) == 0 { // a duplicate: redelivered after its lock was lost
					mu.Lock()
					retry = append(retry, batch[0])
					mu.Unlock()
				}
			}
		}()
	}
	for len(queue) > 0 {
		batch := []delivery{queue[0]}
		queue = queue[1:]
		for len(queue) > 0 && queue[0].key == batch[0].key && len(batch) < 1+w.intn(3) {
			batch, queue = append(batch, queue[0]), queue[1:]
		}
		if w.intn(10) == 0 { // dead-lettered at once (a poison delivery the host gave up on)
			mu.Lock()
			lost[delivery{key: batch[0].key, seq: batch[0].seq}] = true
			mu.Unlock()
			batch = batch[1:]
			if len(batch) == 0 {
				continue
			}
		}
		work <- batch
		mu.Lock()
		queue, retry = append(queue, retry...), nil
		mu.Unlock()
	}
	close(work)
	wg.Wait()
	for _, d := range retry { // failed in the last batches: dead-lettered
		lost[delivery{key: d.key, seq: d.seq}] = true
	}
	return lost
}

// messages are the messages of a batch of deliveries.
func (w *world[S, C]) messages(batch []delivery) []convoy.Message {
	msgs := make([]convoy.Message, len(batch))
	for i, d := range batch {
		msgs[i] = convoy.Message{Seq: d.seq, MessageID: fmt.Sprintf("%s:%d", d.key, d.seq),
			Command: trackedCmd[C]{C: w.keys[d.key][d.seq-1], Seq: d.seq}}
	}
	return msgs
}

// heal brings every key to its last seq: the missing seq of a blocked key
// is replayed or skipped (or both, racing), a lost tail is replayed.
func (w *world[S, C]) heal(lost map[delivery]bool) error {
	ctx := context.Background()
	for key, cmds := range w.keys {
		last := int64(len(cmds))
		for round := 0; ; round++ {
			if round > 4*len(cmds)+10 {
				return fmt.Errorf("key %s does not reach seq %d", key, last)
			}
			if _, err := w.instances[0].Resume(ctx, key); err != nil {
				return fmt.Errorf("resume %s: %w", key, err)
			}
			o, err := w.store.Load(ctx, key)
			if err != nil {
				return err
			}
			if o.AppliedSeq >= last {
				break
			}
			next := o.AppliedSeq + 1
			replay := func() error {
				_, err := w.instances[1].Process(ctx, key, w.messages([]delivery{{key: key, seq: next}}))
				return err
			}
			if o.ParkedCount == 0 || !lost[delivery{key: key, seq: next}] {
				if err := replay(); err != nil && !errors.Is(err, convoy.ErrConflict) {
					return fmt.Errorf("replay %s seq %d: %w", key, next, err)
				}
				continue
			}
			switch w.intn(3) {
			case 0:
				err = replay()
			case 1:
				_, _, err = w.instances[0].Skip(ctx, key, next)
			default: // both at once: one wins, the other finds it done
				var wg sync.WaitGroup
				var skipErr error
				wg.Add(1)
				go func() { defer wg.Done(); _, _, skipErr = w.instances[0].Skip(ctx, key, next) }()
				err = replay()
				wg.Wait()
				if fault.CodeOf(skipErr) == fault.Conflict { // the replay applied it first: not missing any more
					skipErr = nil
				}
				err = errors.Join(err, skipErr)
			}
			// A refusal (the other one won) or a conflict between the two
			// (each retries only so often) leaves the seq to the next round.
			if err != nil && fault.CodeOf(err) != fault.Conflict && !errors.Is(err, convoy.ErrConflict) {
				return fmt.Errorf("heal %s seq %d: %w", key, next, err)
			}
		}
	}
	return nil
}

// check compares every key with the fold of its commands, the skipped ones
// left out.
func (w *world[S, C]) check(fold Fold[S, C]) error {
	ctx := context.Background()
	for key, cmds := range w.keys {
		o, err := w.store.Load(ctx, key)
		if err != nil {
			return err
		}
		if o.AppliedSeq != int64(len(cmds)) || o.ParkedCount != 0 {
			return fmt.Errorf("key %s: appliedSeq %d with %d parked, want %d with none", key, o.AppliedSeq, o.ParkedCount, len(cmds))
		}
		if parked, _, err := w.store.Parked(ctx, key, 0, 1); err != nil || len(parked) > 0 {
			return fmt.Errorf("key %s: parked rows left behind: %v %v", key, parked, err)
		}
		rejected, _, err := w.store.Rejections(ctx, key, 0, len(cmds)+1)
		if err != nil {
			return err
		}
		var applied []C
		skipped := map[int64]bool{}
		for _, r := range rejected {
			if r.Reason == convoy.ReasonSkipped {
				skipped[r.Seq] = true
			}
		}
		for i, c := range cmds {
			if !skipped[int64(i+1)] {
				applied = append(applied, c)
			}
		}
		for seq := range skipped {
			if !w.lost[delivery{key: key, seq: seq}] {
				return fmt.Errorf("key %s: seq %d was skipped, but it was never dead-lettered", key, seq)
			}
		}
		version := o.StateVersion
		if version == 0 { // not written: a state of the current version, or none
			version = w.rules.Version()
		}
		got, err := tracked[S, C]{w.rules}.DecodeState(version, o.StateProps)
		if err != nil {
			return fmt.Errorf("key %s: the stored state does not decode: %w", key, err)
		}
		if got.Twice != 0 {
			return fmt.Errorf("key %s: seq %d was applied twice", key, got.Twice)
		}
		if n := got.Applied + int64(len(rejected)); n != int64(len(cmds)) {
			return fmt.Errorf("key %s: %d seqs applied and %d rejected or skipped, for %d messages: a seq was decided twice, or not at all", key, got.Applied, len(rejected), len(cmds))
		}
		if want := fold(applied); !reflect.DeepEqual(got.S, want) {
			return fmt.Errorf("key %s: stored state %+v, the fold says %+v (skipped %v)", key, got.S, want, skipped)
		}
	}
	return nil
}
