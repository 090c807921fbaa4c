package convoy_test

import (
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/convoy"
)

// TestJudgeLag: the status rules of docs/operations.md ("Lag per order"),
// case by case, with a window of 300 s.
func TestJudgeLag(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	ago := func(s int) time.Time { return now.Add(-time.Duration(s) * time.Second) }
	const w = 300 * time.Second
	for _, c := range []struct {
		name string
		in   convoy.LagInput
		want convoy.LagStatus
	}{
		{"nothing waiting, head idle for hours", convoy.LagInput{AppliedAt: ago(7200)}, convoy.LagOK},
		{"nothing waiting, never applied", convoy.LagInput{}, convoy.LagOK},
		{"waiting, head moved a second ago", convoy.LagInput{Backlog: 50, AppliedAt: ago(1), HeadSince: ago(2)}, convoy.LagCatchingUp},
		{"waiting, head moved just within the window", convoy.LagInput{Backlog: 1, AppliedAt: ago(300), HeadSince: ago(900)}, convoy.LagCatchingUp},
		{"waiting, head still just past the window", convoy.LagInput{Backlog: 1, AppliedAt: ago(301), HeadSince: ago(900)}, convoy.LagStalled},
		{"idle order just published to", convoy.LagInput{Backlog: 3, AppliedAt: ago(7200), HeadSince: ago(10)}, convoy.LagCatchingUp},
		{"idle order published to a window ago, head never moved", convoy.LagInput{Backlog: 3, AppliedAt: ago(7200), HeadSince: ago(301)}, convoy.LagStalled},
		{"waiting, head age unknown, head moved long ago", convoy.LagInput{Backlog: 3, AppliedAt: ago(7200)}, convoy.LagStalled},
		{"waiting, nothing known of progress", convoy.LagInput{Backlog: 3}, convoy.LagStalled},
		{"gap parked, head moved a second ago", convoy.LagInput{Backlog: 4, Parked: 3, AppliedAt: ago(1), HeadSince: ago(1)}, convoy.LagBlocked},
		{"gap parked, head idle", convoy.LagInput{Backlog: 4, Parked: 3, AppliedAt: ago(7200)}, convoy.LagBlocked},
		{"missing message dead-lettered, nothing parked", convoy.LagInput{Backlog: 1, DeadLettered: true, AppliedAt: ago(1)}, convoy.LagBlocked},
		{"dead-lettered but nothing waiting (replayed and applied since)", convoy.LagInput{DeadLettered: true}, convoy.LagOK},
	} {
		c.in.Now, c.in.Window = now, w
		if got := convoy.JudgeLag(c.in); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// TestOrderLag: the figures OrderStatus shows, from the head and what was
// published to the order.
func TestOrderLag(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	o := convoy.NewKey("o-1")
	o.AppliedSeq, o.AppliedAt, o.UpdatedAt = 7, now.Add(-time.Hour), now.Add(-time.Hour)
	l := convoy.OrderLag(o, convoy.Published{LastSeq: 10, SeqAllocatedAt: now.Add(-90500 * time.Millisecond)}, now, time.Minute)
	if l.Backlog != 3 || l.HeadAgeSeconds == nil || *l.HeadAgeSeconds != 90.5 || l.Status != convoy.LagStalled || l.Window != 60 {
		t.Fatalf("3 waiting for 90.5 s, head idle for an hour, window 60 s: %+v (age %v)", l, l.HeadAgeSeconds)
	}
	// Nothing waiting: no head age.
	if l := convoy.OrderLag(o, convoy.Published{LastSeq: 7}, now, time.Minute); l.Backlog != 0 || l.HeadAgeSeconds != nil || l.Status != convoy.LagOK {
		t.Fatalf("nothing waiting: %+v", l)
	}
	// A parked message counts, even past the counter (a producer of its own).
	o.Parked[12] = convoy.Message{Seq: 12}
	if l := convoy.OrderLag(o, convoy.Published{LastSeq: 10}, now, time.Minute); l.Backlog != 5 || l.Status != convoy.LagBlocked {
		t.Fatalf("seq 12 parked: %+v", l)
	}
	// Parked beyond the window the order holds (a long parked tail): the
	// highest parked seq the head keeps, or when not kept, one seq past the
	// missing one per parked message at least.
	o.ParkedCount, o.ParkedLast = 40, 60
	if l := convoy.OrderLag(o, convoy.Published{LastSeq: 10}, now, time.Minute); l.Backlog != 53 || l.Status != convoy.LagBlocked {
		t.Fatalf("40 parked up to seq 60, the window holding seq 12: %+v", l)
	}
	o.ParkedLast = 0
	if l := convoy.OrderLag(o, convoy.Published{LastSeq: 10}, now, time.Minute); l.Backlog != 41 || l.Status != convoy.LagBlocked {
		t.Fatalf("40 parked, the highest not known: %+v, want the missing one and 40 waiting", l)
	}
	// A head written before AppliedAt was kept: its UpdatedAt stands in.
	old := convoy.NewKey("o-2")
	old.AppliedSeq, old.UpdatedAt = 1, now.Add(-10*time.Second)
	if l := convoy.OrderLag(old, convoy.Published{LastSeq: 2, SeqAllocatedAt: now.Add(-time.Hour)}, now, time.Minute); l.Status != convoy.LagCatchingUp {
		t.Fatalf("old head that moved 10 s ago: %+v", l)
	}
}
