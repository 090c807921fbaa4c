package replay_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/internal/ledgertest"
	"github.com/convoy-dev/convoy/handler/replay"
)

// replayAll calls replay.All with continuations until done (or calls run out).
func replayAll(t *testing.T, src replay.Source, sender *ledgertest.Sender, opts replay.AllOptions, calls int) []replay.Progress {
	t.Helper()
	var out []replay.Progress
	for range calls {
		p, err := replay.All(context.Background(), src, sender, opts)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
		if p.Done {
			if p.Continuation != "" {
				t.Fatalf("done with a continuation: %+v", p)
			}
			return out
		}
		if p.Continuation == "" {
			t.Fatalf("not done and no continuation: %+v", p)
		}
		opts.Continuation = p.Continuation
	}
	return out
}

// TestReplayAll: an outage dead-lettered messages of many orders; replay of
// every dead letter, a few per call, re-sends each placeable one once,
// grouped by order and in seq order per order within a call, completes the
// duplicates, leaves the unplaceable ones (more of them at the head than one
// call receives) and ends done, with totals over all calls.
func TestReplayAll(t *testing.T) {
	var all []replay.DeadLetter
	for i := range 5 {
		all = append(all, dead(int64(1+i), fmt.Sprintf("bad-%d", i), nil)) // unplaceable, at the head
	}
	qseq := int64(100)
	for seq := int64(9); seq >= 1; seq-- { // dead-lettered in reverse seq order
		for _, o := range []string{"o-a", "o-b", "o-c"} {
			qseq++
			all = append(all, dead(qseq, o, seq))
		}
	}
	q := newDLQ(all...)
	sender := &ledgertest.Sender{}
	progress := replayAll(t, q, sender, replay.AllOptions{Options: replay.Options{Orders: orders{"o-a": 2}}, Max: 4}, 50)
	q.endRun(t)
	last := progress[len(progress)-1]
	if !last.Done || last.Totals.Replayed != 25 || last.Totals.Duplicates != 2 || last.Totals.Calls != int64(len(progress)) || len(q.msgs) != 5 {
		t.Fatalf("after %d calls: %+v; %d left dead-lettered, want the 5 unplaceable", len(progress), last, len(q.msgs))
	}
	sent := map[string]int{}
	for _, b := range sender.Batches() {
		for i, m := range b {
			sent[m.MessageID]++
			if i > 0 && (m.SessionID != b[0].SessionID || m.Seq <= b[i-1].Seq) {
				t.Fatalf("a batch mixes orders or is out of seq order: %+v", b)
			}
		}
	}
	for id, n := range sent {
		if n != 1 {
			t.Fatalf("%s sent %d times", id, n)
		}
	}
	if len(sent) != 25 {
		t.Fatalf("%d sent, want 25", len(sent))
	}
}

// TestReplayAllStuck: when a whole call's scan limit is taken by
// unplaceable dead letters, the answer says it cannot get past them.
func TestReplayAllStuck(t *testing.T) {
	var all []replay.DeadLetter
	for i := range 5 {
		all = append(all, dead(int64(1+i), "bad", nil))
	}
	all = append(all, dead(9, "o-1", int64(1)))
	q := newDLQ(all...)
	p, err := replay.All(context.Background(), q, &ledgertest.Sender{}, replay.AllOptions{Options: replay.Options{MaxScan: 4}, Max: 4})
	q.endRun(t)
	if err != nil || p.Done || p.Incomplete == nil || !p.Incomplete.ScanLimitReached || p.Incomplete.LockedElsewhere() {
		t.Fatalf("%+v (incomplete %+v), %v; want stuck at the scan limit", p, p.Incomplete, err)
	}
}

// TestReplayAllLockedElsewhere: dead letters another reader holds keep a
// replay of everything from saying done; once released, it finishes.
func TestReplayAllLockedElsewhere(t *testing.T) {
	ctx := context.Background()
	q := newDLQ(dead(1, "o-1", int64(1)), dead(2, "o-2", int64(1)), dead(3, "o-3", int64(1)))
	other := q.reader()
	held, _ := other.Receive(ctx, 2)
	sender := &ledgertest.Sender{}
	p, err := replay.All(ctx, q, sender, replay.AllOptions{})
	if err != nil || p.Done || p.Replayed != 1 || p.Incomplete == nil || !p.Incomplete.LockedElsewhere() || p.Incomplete.NotReceived != 2 || p.Continuation == "" {
		t.Fatalf("%+v (incomplete %+v), %v; want 1 replayed and 2 locked elsewhere", p, p.Incomplete, err)
	}
	for _, m := range held {
		_ = other.Abandon(ctx, m)
	}
	p, err = replay.All(ctx, q, sender, replay.AllOptions{Continuation: p.Continuation})
	q.endRun(t)
	if err != nil || !p.Done || p.Replayed != 2 || p.Totals.Replayed != 3 || len(q.msgs) != 0 {
		t.Fatalf("after the release: %+v, %v", p, err)
	}
}

func TestContinuationValidation(t *testing.T) {
	valid := func() string {
		q := newDLQ(dead(1, "o-1", int64(1)), dead(2, "o-1", int64(2)))
		p, err := replay.All(context.Background(), q, &ledgertest.Sender{}, replay.AllOptions{Max: 1})
		if err != nil || p.Continuation == "" {
			t.Fatalf("%+v %v", p, err)
		}
		return p.Continuation
	}()
	if _, err := replay.ParseContinuation(valid); err != nil {
		t.Fatalf("an issued token is refused: %v", err)
	}
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, bad := range []string{"%%%", "e30", enc(`{"v":2,"calls":1}`), enc(`{"v":1,"calls":0}`), enc(`{"v":1,"calls":1,"replayed":-1}`),
		enc(`{"v":1,"calls":1,"extra":1}`), enc(`{"v":1,"calls":1} {}`), enc(`{"v":1,"calls":1,"skip":99999999999}`), valid + valid + valid + valid + valid + valid + valid + valid + valid} {
		if _, err := replay.ParseContinuation(bad); fault.CodeOf(err) != fault.Invalid {
			t.Errorf("token %q: %v, want an Invalid fault", bad, err)
		}
	}
	// A token too long is refused for its length alone: the same JSON padded
	// with spaces parses while its encoding is short, and not once it is
	// longer than 512 characters (valid + valid + ... is refused anyway, as
	// JSON followed by more).
	padded := func(n int) string { return enc(`{"v":1,"calls":1` + strings.Repeat(" ", n) + `}`) }
	if short := padded(300); len(short) > 512 {
		t.Fatalf("%d characters", len(short))
	} else if _, err := replay.ParseContinuation(short); err != nil {
		t.Fatalf("a well-formed token of %d characters: %v", len(short), err)
	}
	if long := padded(400); len(long) <= 512 {
		t.Fatalf("%d characters", len(long))
	} else if _, err := replay.ParseContinuation(long); fault.CodeOf(err) != fault.Invalid {
		t.Errorf("a well-formed token of %d characters: %v, want an Invalid fault", len(long), err)
	}
}

// FuzzParseContinuation: any string is refused with an Invalid fault or is
// a token that encodes back to one that parses the same.
func FuzzParseContinuation(f *testing.F) {
	f.Add("")
	f.Add("eyJ2IjoxLCJjYWxscyI6MSwic2Nhbm5lZCI6MSwicmVwbGF5ZWQiOjEsImR1cGxpY2F0ZXMiOjAsInNraXAiOjB9")
	f.Add("e30")
	f.Add(base64.RawURLEncoding.EncodeToString([]byte(`{"v":1,"calls":3,"skip":7}`)))
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := replay.ParseContinuation(s)
		if err != nil {
			if fault.CodeOf(err) != fault.Invalid {
				t.Fatalf("%q: %v is not an Invalid fault", s, err)
			}
			return
		}
		if tok.V != 1 || tok.Skip < 0 || tok.Calls < 0 || tok.Replayed < 0 {
			t.Fatalf("%q accepted as %+v", s, tok)
		}
	})
}

// TestReplayAllLockExpired: as TestReplayLockExpired, for a replay of every
// dead letter: what comes back under a new lock is replayed once, completed
// with the newest lock, counted once, and the call ends; the unplaceable one
// is released with its newest lock (endRun). A call that came round before
// it received everything is not done, and the next one finishes.
func TestReplayAllLockExpired(t *testing.T) {
	for _, tc := range []struct {
		name    string
		every   bool
		batch   int
		want    []int64 // completed and re-sent by the first call
		scanned int
		done    bool
	}{
		{name: "once", want: []int64{1, 2, 3}, scanned: 4, done: true},
		{name: "before every receive", every: true, want: []int64{1, 2, 3}, scanned: 4, done: true},
		{name: "before the call received all", batch: 2, want: []int64{1, 2}, scanned: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			q := newDLQ(dead(1, "o-1", int64(1)), dead(2, "o-2", int64(1)), dead(3, "o-1", int64(2)), dead(4, "bad", nil))
			r := expiring(q, 1, tc.every)
			r.batch = tc.batch
			sender := &ledgertest.Sender{}
			p, err := replay.All(ctx, r, sender, replay.AllOptions{})
			if err != nil {
				t.Fatalf("%v (progress %+v)", err, p)
			}
			if r.receives > 2 {
				t.Fatalf("%d receives: the scan went on after its locks expired and a dead letter came back", r.receives)
			}
			q.endRun(t)
			sentOnce(t, q, sender, tc.want...)
			if p.Scanned != tc.scanned || p.Replayed != len(tc.want) || p.Done != tc.done {
				t.Fatalf("progress %+v, want %d scanned, %d replayed, done %v", p, tc.scanned, len(tc.want), tc.done)
			}
			if tc.done {
				return
			}
			if inc := p.Incomplete; inc == nil || !inc.LockedElsewhere() || inc.NotReceived != 2 || inc.Reason == "" || p.Continuation == "" {
				t.Fatalf("progress %+v (incomplete %+v), want 2 not received and a continuation", p, inc)
			}
			p, err = replay.All(ctx, q.reader(), sender, replay.AllOptions{Continuation: p.Continuation})
			q.endRun(t)
			if err != nil || !p.Done || p.Totals.Replayed != 3 {
				t.Fatalf("the next call: %+v, %v", p, err)
			}
			sentOnce(t, q, sender, 1, 2, 3)
		})
	}
}
