package healsim

import (
	"flag"
	"fmt"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
)

var (
	seedFlag     = flag.Uint64("seed", 0, "run this one seed (the command a failing seed prints)")
	seedsFlag    = flag.Int("seeds", 0, "how many seeds to run (default 300, 200 under -race, 40 with -short)")
	durationFlag = flag.Duration("duration", 0, "run seeds until this much time has passed (make soak), whatever -seeds says")
	firstFlag    = flag.Uint64("first", 1, "the first seed")
	allFlag      = flag.Bool("all", false, "go on past a failing seed, and say how many failed (a mutation check counts the seeds that kill a mutant)")
)

// TestHealingSimulation runs the simulation over many seeds; a failing seed
// prints the one-line command that replays it.
func TestHealingSimulation(t *testing.T) {
	if *seedFlag != 0 {
		if st, err := runSeed(*seedFlag, true); err != nil {
			t.Fatalf("seed %d: %v", *seedFlag, err)
		} else {
			t.Logf("seed %d: %s", *seedFlag, st)
		}
		return
	}
	seeds := *seedsFlag
	if seeds == 0 {
		seeds = defaultSeeds
		if testing.Short() {
			seeds = 40
		}
	}
	var total stats
	start := time.Now()
	n, failed := 0, 0
	for seed := *firstFlag; ; seed++ {
		if *durationFlag > 0 {
			if time.Since(start) > *durationFlag {
				break
			}
		} else if n >= seeds {
			break
		}
		st, err := runSeed(seed, false)
		if err != nil && *allFlag {
			failed++
			first, _, _ := strings.Cut(err.Error(), "\n")
			t.Errorf("seed %d: %s", seed, first)
		} else if err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, replayCommand(seed))
		}
		total.add(st)
		n++
	}
	t.Logf("%d seeds in %s: %s", n, time.Since(start).Round(time.Millisecond), total)
	if failed > 0 {
		t.Errorf("%d of %d seeds failed", failed, n)
	}
}

func replayCommand(seed uint64) string {
	return fmt.Sprintf("replay it: go test ./handler/internal/healsim -run TestHealingSimulation -v -seed=%d", seed)
}

// runSeed is simulate, with a panic in the code under test (or in the
// simulation) reported as the seed's failure, with its stack: the seed
// replays it, where a crash of the test binary would say nothing of which
// seed it was.
func runSeed(seed uint64, verbose bool) (st stats, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return simulate(seed, verbose)
}

// stats are what a run did, to say that the faults were exercised.
type stats struct {
	strands, longDrains, deliveries, batches, faults, sbFaults, lostReplies, interleaved, deadLettered, refused, skips, skipsRefused,
	replays, healRuns, skipsRacingDelivery, cutOnDeadLetter, parkedDeadLettered, skipsCut, racingRuns, resumed, deadlines, dupsDropped, landedTimeouts, rounds int
}

func (s *stats) add(o stats) {
	s.deliveries += o.deliveries
	s.batches += o.batches
	s.longDrains += o.longDrains
	s.strands += o.strands
	s.faults += o.faults
	s.sbFaults += o.sbFaults
	s.lostReplies += o.lostReplies
	s.interleaved += o.interleaved
	s.deadLettered += o.deadLettered
	s.refused += o.refused
	s.skips += o.skips
	s.skipsRefused += o.skipsRefused
	s.skipsRacingDelivery += o.skipsRacingDelivery
	s.replays += o.replays
	s.healRuns += o.healRuns
	s.racingRuns += o.racingRuns
	s.resumed += o.resumed
	s.deadlines += o.deadlines
	s.dupsDropped += o.dupsDropped
	s.landedTimeouts += o.landedTimeouts
	s.rounds += o.rounds
	s.cutOnDeadLetter += o.cutOnDeadLetter
	s.parkedDeadLettered += o.parkedDeadLettered
	s.skipsCut += o.skipsCut
}

func (s stats) String() string {
	return fmt.Sprintf("%d deliveries in %d batches (%d of several commits), %d store faults, %d Service Bus faults (%d sends that timed out but landed), "+
		"%d duplicates dropped by MessageId, %d lost replies, %d interleaved actions, %d dead-lettered, %d refused (MaxParkAhead), "+
		"%d skips (%d refused, %d landing while another instance processed their seq), %d replays, %d AutoReplay runs (%d inside another), %d drains resumed (%d steps ended with a drain cut), "+
		"%d deadlines fired, %d quiescence rounds, %d steps ended with a cut drain whose next seq is a dead letter, %d messages dead-lettered while parked, %d skips whose drain stopped short",
		s.deliveries, s.batches, s.longDrains, s.faults, s.sbFaults, s.landedTimeouts, s.dupsDropped, s.lostReplies, s.interleaved, s.deadLettered, s.refused,
		s.skips, s.skipsRefused, s.skipsRacingDelivery, s.replays, s.healRuns, s.racingRuns, s.resumed, s.strands, s.deadlines, s.rounds, s.cutOnDeadLetter, s.parkedDeadLettered, s.skipsCut)
}

// simulate runs one seed; the error names the first invariant broken.
func simulate(seed uint64, verbose bool) (stats, error) {
	w := newWorld(seed, verbose)
	w.story()
	w.armed = true
	steps := 200 + w.r.IntN(300)
	for i := range steps {
		for _, l := range w.late {
			if int(l.at*float64(steps)) == i {
				w.send([]convoy.Envelope{l.m}, " (sent late)")
				if l.m.SessionID == w.slowSession && l.m.Seq == 1 {
					w.slowSession = "" // its calls were slow while its tail piled up
				}
			}
		}
		w.step()
		for _, id := range w.orders {
			if m, cut := w.peek(id).NextParked(); cut {
				w.st.strands++
				if w.deadLettered(id, m.Seq) {
					w.st.cutOnDeadLetter++
				}
			}
		}
		if len(w.violations) > 0 {
			break
		}
	}
	w.armed = false
	if len(w.violations) == 0 {
		w.quiesce()
	}
	if len(w.violations) == 0 {
		w.checkFinal()
	}
	if len(w.violations) > 0 {
		last := w.trace[max(0, len(w.trace)-60):]
		return w.st, fmt.Errorf("%s\nthe run's last actions:\n  %s", strings.Join(w.violations, "\n"), strings.Join(last, "\n  "))
	}
	return w.st, nil
}
