package devhost

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/convoy-dev/convoy/handler/schedule"
)

// The timer trigger as the Functions host runs it for a custom handler
// (Azure/azure-webjobs-sdk-extensions, src/WebJobs.Extensions/Extensions/Timers:
// TimerListener, ScheduleMonitor; Azure/azure-webjobs-sdk: SingletonListener,
// SingletonOptions; Azure/azure-functions-host: ScriptInvocationContextExtensions):
//
//   - The schedule is the binding's "schedule", an NCRONTAB expression of
//     six fields, with %Setting% resolved from the app settings.
//   - The listener is a singleton ([Singleton(Mode = SingletonMode.Listener)]):
//     one instance holds its lock, a blob lease of ListenerLockPeriod (60 s,
//     renewed while held, released when the host stops); the others try to
//     take it every ListenerLockRecoveryPollingInterval (1 minute). Only
//     the holder's TimerListener starts. Both durations scale by TimeScale.
//   - On start the listener reads the schedule monitor's record (the blob
//     timers/{hostId}/{function}/status, shared by every instance and kept
//     across host restarts: here one record per function per Host) and
//     checks it (ScheduleMonitor.CheckPastDueAsync): if the recorded Next is
//     past, it invokes at once with IsPastDue true (a takeover or a restart
//     after a missed occurrence); else runOnStartup fires once; else it
//     waits for the schedule.
//   - Each invocation sends the listener's ScheduleStatus as it stood:
//     Last (the previous run's start; 0001-01-01 before the first), Next
//     (the occurrence firing now), LastUpdated (equal to Last after a run).
//     After the call it records Last = LastUpdated = the invocation time
//     (moved up to Next if it fired early), Next = the following occurrence
//     after it. The next timer is set from the time the call ended to that
//     Next: a run that overruns its next occurrence is followed at once by
//     one catch-up run (IsPastDue false), then the schedule resumes.
//   - The trigger value is TimerInfo, sent as JObject.FromObject(TimerInfo):
//     {"Schedule": {"AdjustForDST": true}, "ScheduleStatus": {…} or null
//     without useMonitor, "IsPastDue": …}; Json.NET writes the local (in
//     Azure UTC) DateTimes with "+00:00" and the fraction's trailing zeros
//     trimmed. Its binding data is only "TimerTrigger", which the host
//     leaves out of Metadata (keys ending in "trigger"): Metadata holds "sys".
//
// Not modelled: daylight-saving adjustments (UTC only), a lease lost while
// its holder runs (the emulation's hosts release it when they stop).

// SingletonOptions (azure-webjobs-sdk) for a listener lock.
const (
	listenerLockPeriod   = 60 * time.Second // ListenerLockPeriod: the lease
	listenerLockRecovery = time.Minute      // ListenerLockRecoveryPollingInterval
)

// ScheduleStatus is the schedule monitor's record of a timer function.
type ScheduleStatus struct{ Last, Next, LastUpdated time.Time }

// timerStore is the host storage the timers share: the schedule monitor's
// records and the listeners' leases, per function.
type timerStore struct {
	mu     sync.Mutex
	status map[string]ScheduleStatus
	leases map[string]timerLease
}

type timerLease struct {
	holder *Instance
	until  time.Time
}

// acquire takes (or renews) the lease of function for in; false while
// another instance holds an unexpired lease.
func (s *timerStore) acquire(function string, in *Instance, period time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leases == nil {
		s.leases = map[string]timerLease{}
	}
	if l := s.leases[function]; l.holder != nil && l.holder != in && time.Now().Before(l.until) {
		return false
	}
	s.leases[function] = timerLease{holder: in, until: time.Now().Add(period)}
	return true
}

func (s *timerStore) release(function string, in *Instance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leases[function].holder == in {
		delete(s.leases, function)
	}
}

func (s *timerStore) get(function string) (ScheduleStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.status[function]
	return st, ok
}

func (s *timerStore) put(function string, st ScheduleStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status == nil {
		s.status = map[string]ScheduleStatus{}
	}
	s.status[function] = st
}

// TimerStatus is the schedule monitor's record of a timer function, as the
// next holder of its lock would read it; false before any.
func (h *Host) TimerStatus(function string) (ScheduleStatus, bool) { return h.timers.get(function) }

// timerBinding is what a timerTrigger's function.json says beyond Binding.
type timerBinding struct {
	Schedule     string `json:"schedule"`
	RunOnStartup bool   `json:"runOnStartup"`
	UseMonitor   *bool  `json:"useMonitor"`
}

// timerOf reads f's timer binding and parses its schedule.
func (h *Host) timerOf(f Function) (*schedule.Schedule, timerBinding, error) {
	var fj struct{ Bindings []json.RawMessage }
	var tb timerBinding
	data, err := os.ReadFile(filepath.Join(h.app.Dir, f.Name, "function.json"))
	if err == nil {
		err = json.Unmarshal(data, &fj)
	}
	if err != nil {
		return nil, tb, fmt.Errorf("%s/function.json: %w", f.Name, err)
	}
	for _, b := range fj.Bindings {
		var probe struct{ Type string }
		if json.Unmarshal(b, &probe) == nil && probe.Type == "timerTrigger" {
			_ = json.Unmarshal(b, &tb)
		}
	}
	expr, err := resolve(tb.Schedule, h.opts.Settings)
	if err != nil {
		return nil, tb, fmt.Errorf("function %s: schedule: %w", f.Name, err)
	}
	s, err := schedule.Parse(expr)
	if err != nil {
		return nil, tb, fmt.Errorf("function %s: %w", f.Name, err)
	}
	return s, tb, nil
}

// checkPastDue is ScheduleMonitor.CheckPastDueAsync: it records a first
// status, or corrects one made under another schedule, and reports whether
// the recorded next occurrence has passed. It returns the listener's status
// (nil without a record: the listener then starts from none).
func (h *Host) checkPastDue(function string, s *schedule.Schedule, now time.Time) (*ScheduleStatus, bool) {
	next := func(t time.Time) time.Time { n, _ := s.Next(t); return n }
	st, ok := h.timers.get(function)
	if !ok {
		n := next(now)
		h.timers.put(function, ScheduleStatus{Next: n, LastUpdated: now})
		return nil, now.After(n)
	}
	var expected, lastUpdated time.Time
	switch {
	case !st.Last.IsZero():
		expected, lastUpdated = next(st.Last), st.Last
	case !st.LastUpdated.IsZero():
		expected, lastUpdated = next(st.LastUpdated), st.LastUpdated
	default:
		expected, lastUpdated = next(now), now
	}
	if !st.Next.Equal(expected) { // the schedule changed
		if now.After(expected) {
			expected, lastUpdated = next(now), now
		}
		st = ScheduleStatus{Next: expected, LastUpdated: lastUpdated}
		h.timers.put(function, st)
	}
	return &st, now.After(st.Next)
}

// timer starts an instance's listener for a timer trigger: the singleton
// listener first waits for the lock, then runs the TimerListener.
func (in *Instance) timer(f Function) {
	h := in.host
	s, tb, err := h.timerOf(f)
	if err != nil {
		in.logf("%v: the timer does not start", err)
		return
	}
	monitor := tb.UseMonitor == nil || *tb.UseMonitor
	run := in.runCtx()
	lease, poll := h.scale(listenerLockPeriod), h.scale(listenerLockRecovery)
	in.lwg.Add(1)
	go func() {
		defer in.lwg.Done()
		for !h.timers.acquire(f.Name, in, lease) {
			select {
			case <-run.Done():
				return
			case <-time.After(poll):
			}
		}
		defer h.timers.release(f.Name, in)
		in.logf("%s: holds the timer's listener lock", f.Name)
		go func() { // the lease is renewed while held
			for {
				select {
				case <-run.Done():
					return
				case <-time.After(lease / 3):
					h.timers.acquire(f.Name, in, lease)
				}
			}
		}()
		in.runTimer(run, f, s, tb, monitor)
	}()
}

// runTimer is TimerListener from StartAsync until the host stops.
func (in *Instance) runTimer(run context.Context, f Function, s *schedule.Schedule, tb timerBinding, monitor bool) {
	h := in.host
	now := time.Now()
	var status *ScheduleStatus
	pastDue := false
	if monitor {
		status, pastDue = h.checkPastDue(f.Name, s, now)
	}
	if status == nil {
		n, _ := s.Next(now)
		status = &ScheduleStatus{Next: n}
	}
	fire := func(at time.Time, isPastDue, onStartup bool) {
		var sent *ScheduleStatus
		if monitor {
			sent = status
		}
		body := EncodeTimer(f.Trigger.Name, f.Name, sent, isPastDue, at)
		if _, err := in.call(run, f.Name, "/"+f.Name, body); err != nil && run.Err() == nil {
			in.logf("%s (timer) failed: %v", f.Name, err)
		}
		adjusted := at
		if !isPastDue && !onStartup && status.Next.After(at) {
			adjusted = status.Next
		}
		n, _ := s.Next(adjusted)
		status = &ScheduleStatus{Last: adjusted, Next: n, LastUpdated: adjusted}
		if monitor {
			h.timers.put(f.Name, *status)
		}
	}
	switch {
	case pastDue:
		in.logf("%s: past due (next occurrence %s recorded, now %s): invoking at once", f.Name, netTime(status.Next), netTime(now))
		fire(time.Now(), true, false)
	case tb.RunOnStartup:
		fire(time.Now(), false, true)
	}
	for run.Err() == nil {
		select {
		case <-run.Done():
			return
		case <-time.After(time.Until(status.Next)):
		}
		if run.Err() != nil {
			return
		}
		fire(time.Now(), false, false)
	}
}

// FireTimer invokes a timer function on the i-th instance of its group
// now, bypassing the singleton lock (as when the lock's lease was lost and
// two instances fire at once), with the recorded status. Tests use it to
// run two firings at the same time.
func (h *Host) FireTimer(ctx context.Context, function string, i int) error {
	g, f, err := h.groupOfFunction(function)
	if err != nil || f.Trigger.Type != "timerTrigger" {
		return fmt.Errorf("no timer function %q", function)
	}
	ins := h.Group(g.name)
	if i >= len(ins) {
		return fmt.Errorf("group %s has %d instance(s)", g.name, len(ins))
	}
	now := time.Now()
	st, ok := h.timers.get(function)
	if !ok {
		n := now.Add(time.Minute)
		st = ScheduleStatus{Next: n}
	}
	_, err = ins[i].call(ctx, f.Name, "/"+f.Name, EncodeTimer(f.Trigger.Name, f.Name, &st, false, now))
	return err
}

// netTime writes a time as Json.NET writes a local DateTime where local is
// UTC: 100 ns precision, the fraction's trailing zeros trimmed, "+00:00".
func netTime(t time.Time) string {
	return t.UTC().Truncate(100 * time.Nanosecond).Format("2006-01-02T15:04:05.9999999-07:00")
}

// EncodeTimer is the body the host POSTs to /<function> for a timer
// occurrence (see the comment at the top of this file); status nil is a
// timer without useMonitor.
func EncodeTimer(binding, function string, status *ScheduleStatus, isPastDue bool, now time.Time) []byte {
	info := map[string]any{"Schedule": map[string]any{"AdjustForDST": true}, "ScheduleStatus": nil, "IsPastDue": isPastDue}
	if status != nil {
		info["ScheduleStatus"] = map[string]any{"Last": netTime(status.Last), "Next": netTime(status.Next), "LastUpdated": netTime(status.LastUpdated)}
	}
	body, _ := json.Marshal(invocation{Data: map[string]json.RawMessage{binding: raw(info)},
		Metadata: map[string]json.RawMessage{"sys": sysMetadata(function, now)}})
	return body
}
