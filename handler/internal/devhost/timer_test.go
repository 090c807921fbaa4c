package devhost_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
)

// TestEncodeTimer: the timer invocation has the shape the host gives it,
// as the hand-written fixture handler/testdata/timer-autoreplay.json shows
// (JObject.FromObject(TimerInfo) in Data under the binding's name, times
// with "+00:00" and the fraction's trailing zeros trimmed; Metadata holds
// only sys, since "TimerTrigger" ends with "trigger"); without useMonitor
// ScheduleStatus is null.
func TestEncodeTimer(t *testing.T) {
	t.Parallel()
	fixture, err := os.ReadFile(filepath.Join(root, "handler", "testdata", "timer-autoreplay.json"))
	if err != nil {
		t.Fatal(err)
	}
	type inv struct {
		Data     map[string]json.RawMessage
		Metadata map[string]map[string]string
	}
	var want, got inv
	if err := json.Unmarshal(fixture, &want); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 21, 10, 20, 30, 0, time.UTC)
	last := time.Date(2026, 11, 21, 10, 19, 0, 12300000, time.UTC)
	status := &devhost.ScheduleStatus{Last: last, Next: now.Add(-30 * time.Second), LastUpdated: last}
	if err := json.Unmarshal(devhost.EncodeTimer("timer", "AutoReplay", status, true, now), &got); err != nil {
		t.Fatal(err)
	}
	if g, w := compact(t, got.Data["timer"]), compact(t, want.Data["timer"]); len(got.Data) != 1 || g != w {
		t.Fatalf("Data.timer\n got %s\nwant %s", g, w)
	}
	if len(got.Metadata) != 1 || got.Metadata["sys"]["MethodName"] != "AutoReplay" || got.Metadata["sys"]["UtcNow"] != want.Metadata["sys"]["UtcNow"] {
		t.Fatalf("Metadata %v, want sys only, as %v", got.Metadata, want.Metadata)
	}
	_ = json.Unmarshal(devhost.EncodeTimer("timer", "AutoReplay", nil, false, now), &got)
	if g := compact(t, got.Data["timer"]); g != `{"IsPastDue":false,"Schedule":{"AdjustForDST":true},"ScheduleStatus":null}` {
		t.Fatalf("without useMonitor Data.timer is %s", g)
	}
}

// compact re-encodes JSON with sorted keys.
func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// TestTimerSingleton: on two instances of the timer's group, one holds the
// timer's lock and fires, every second; the other never does (it would try
// to take the lock again only after a minute).
func TestTimerSingleton(t *testing.T) {
	t.Parallel()
	e := startWith(t, stage(t, nil), azurite.Options{}, func(o *devhost.Options) {
		o.MinInstances, o.MaxInstances = 2, 2
		o.Settings["AutoReplaySchedule"] = "*/1 * * * * *"
	})
	if n := len(e.host.Group("function:AutoReplay")); n != 2 {
		t.Fatalf("%d AutoReplay instances", n)
	}
	time.Sleep(3500 * time.Millisecond)
	log := e.log.String()
	fired := map[string]int{}
	for _, m := range regexp.MustCompile(`(i\d+) → AI Function\.AutoReplay\.User \[Information\]: metrics `).FindAllStringSubmatch(log, -1) {
		fired[m[1]]++
	}
	total := 0
	for _, n := range fired {
		total += n
	}
	if len(fired) != 1 || total < 2 {
		t.Fatalf("firings by instance %v: want one instance, at least twice", fired)
	}
}

// tickRun is one Tick call as the handler received it.
type tickRun struct {
	PID    int
	At     time.Time // when the handler received it
	Status struct{ Last, Next, LastUpdated string }
	Past   bool
	last   time.Time // Status parsed
	next   time.Time
}

var (
	tickLine = regexp.MustCompile(`(?m)\]: tick pid=(\d+) at=(\S+) timer=(\{.*\})$`)
	doneLine = regexp.MustCompile(`(?m)\]: tick-done pid=(\d+) at=(\S+)$`)
	// hostTime is a DateTime as Json.NET writes a local time where local is
	// UTC: "+00:00", a fraction only if not zero, without trailing zeros.
	hostTime = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{0,6}[1-9])?\+00:00$`)
)

// tickRuns reads the Tick calls from the log, checking the host's format.
func tickRuns(t *testing.T, log string) []tickRun {
	t.Helper()
	var runs []tickRun
	for _, m := range tickLine.FindAllStringSubmatch(log, -1) {
		var r tickRun
		r.PID, _ = strconv.Atoi(m[1])
		r.At, _ = time.Parse(time.RFC3339Nano, m[2])
		var info struct {
			ScheduleStatus *struct{ Last, Next, LastUpdated string }
			IsPastDue      bool
		}
		if err := json.Unmarshal([]byte(m[3]), &info); err != nil || info.ScheduleStatus == nil {
			t.Fatalf("timer %s: %v", m[3], err)
		}
		r.Status, r.Past = *info.ScheduleStatus, info.IsPastDue
		for _, s := range []string{r.Status.Last, r.Status.Next, r.Status.LastUpdated} {
			if !hostTime.MatchString(s) {
				t.Fatalf("%q is not a time as the host writes it (timer %s)", s, m[3])
			}
		}
		r.last, _ = time.Parse(time.RFC3339Nano, r.Status.Last)
		r.next, _ = time.Parse(time.RFC3339Nano, r.Status.Next)
		runs = append(runs, r)
	}
	return runs
}

func near(a, b time.Time, within time.Duration) bool { return a.Sub(b).Abs() < within }

// TestTimerStatusAsSent: the status each Tick call carries, and the
// catch-up after an overrun (TimerListener): the first run has no Last
// (0001-01-01) and Next the occurrence firing; the first run takes 2.3 s of
// a schedule of every second, so the next run follows at once, once, with
// the missed occurrence as Next and the first run's start as Last; then the
// schedule resumes (Next the next whole second after the catch-up began).
func TestTimerStatusAsSent(t *testing.T) {
	t.Parallel()
	_, log := flexHost(t, "", map[string]string{"TickSchedule": "*/1 * * * * *", "FAKE_TICK_SLOW_FIRST_MS": "2300"}, nil)
	var runs []tickRun
	waitFor(t, "four Tick runs", 10*time.Second, func() bool { runs = tickRuns(t, log.String()); return len(runs) >= 4 })
	dones := doneLine.FindAllStringSubmatch(log.String(), -1)
	firstDone, _ := time.Parse(time.RFC3339Nano, dones[0][2])
	r0, r1, r2 := runs[0], runs[1], runs[2]
	const zero = "0001-01-01T00:00:00+00:00"
	if r0.Status.Last != zero || r0.Status.LastUpdated != zero || r0.Past || !r0.next.Equal(r0.next.Truncate(time.Second)) || !near(r0.At, r0.next, 200*time.Millisecond) {
		t.Fatalf("first run at %s: %+v; want Last and LastUpdated %s, Next the whole second firing", r0.At, r0.Status, zero)
	}
	if !near(r1.At, firstDone, 200*time.Millisecond) || r1.Past || !r1.next.Equal(r0.next.Add(time.Second)) ||
		r1.Status.LastUpdated != r1.Status.Last || r1.last.Before(r0.next) || !near(r1.last, r0.At, 100*time.Millisecond) {
		t.Fatalf("after a run of 2.3 s (%s to %s), the next at %s: %+v; want it at once, Next %s (the missed occurrence), Last the first run's start",
			r0.At, firstDone, r1.At, r1.Status, r0.next.Add(time.Second))
	}
	if want := r1.At.Truncate(time.Second).Add(time.Second); !r2.next.Equal(want) || r2.At.Before(r2.next) || r2.Past || !near(r2.last, r1.At, 100*time.Millisecond) {
		t.Fatalf("catch-up at %s, then at %s: %+v; want one catch-up only, then Next %s", r1.At, r2.At, r2.Status, want)
	}
}

// TestTimerTakeover: two instances of the timer's group; the one holding
// the listener lock stops (recycled) and the other takes the lock at its
// next poll (every minute, here 3 s), reads the shared schedule record,
// finds the recorded next occurrence past and runs at once with IsPastDue,
// the stopped holder's last run as Last and the missed occurrence as Next.
func TestTimerTakeover(t *testing.T) {
	t.Parallel()
	h, log := flexHost(t, "", map[string]string{"TickSchedule": "*/1 * * * * *"}, func(o *devhost.Options) {
		o.MinInstances, o.TimeScale, o.RecycleDelay = 2, 0.05, 10*time.Minute // lease and poll 3 s; no recycle within the test
	})
	started := time.Now()
	ticks := h.Group("function:Tick")
	time.Sleep(time.Until(started.Add(3400 * time.Millisecond))) // just after the other instance's first poll
	runs := tickRuns(t, log.String())
	if len(runs) < 2 {
		t.Fatalf("%d runs in 3.4 s", len(runs))
	}
	holderPID := runs[0].PID
	var holder, other *devhost.Instance
	for _, in := range ticks {
		if in.HandlerPID() == holderPID {
			holder = in
		} else {
			other = in
		}
	}
	holder.Recycle()
	waitFor(t, "the holder's stop", 2*time.Second, func() bool { return holder.Stopped() != "" })
	stopped := time.Now()
	var mine []tickRun
	waitFor(t, "two runs by the other instance", 8*time.Second, func() bool {
		mine = nil
		runs = tickRuns(t, log.String())
		for _, r := range runs {
			if r.PID == other.HandlerPID() {
				mine = append(mine, r)
			}
		}
		return len(mine) >= 2
	})
	var lastOld tickRun
	for _, r := range runs {
		if r.PID == holderPID {
			lastOld = r
		}
	}
	first, second := mine[0], mine[1]
	if waited := first.At.Sub(stopped); waited < time.Second || waited > 4*time.Second {
		t.Fatalf("took over %s after the stop; want at the next poll (3 s apart)", waited)
	}
	if !first.Past || !first.next.Equal(lastOld.next.Add(time.Second)) || !first.next.Before(first.At) ||
		first.last.Before(lastOld.next) || !near(first.last, lastOld.At, 100*time.Millisecond) {
		t.Fatalf("the holder's last run at %s: %+v; the taker's first at %s: %+v (past due %v); want past due, Last the holder's last run, Next %s",
			lastOld.At, lastOld.Status, first.At, first.Status, first.Past, lastOld.next.Add(time.Second))
	}
	if second.Past || !near(second.last, first.At, 100*time.Millisecond) || !second.next.Equal(first.At.Truncate(time.Second).Add(time.Second)) {
		t.Fatalf("after the past-due run at %s: %+v; want the schedule resumed", first.At, second.Status)
	}
}
