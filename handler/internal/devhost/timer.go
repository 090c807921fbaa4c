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
// (Azure/azure-webjobs-sdk-extensions, src/WebJobs.Extensions/Extensions/Timers;
// Azure/azure-functions-host, src/WebJobs.Script/Workers/ScriptInvocationContextExtensions.cs):
//
//   - The schedule is the binding's "schedule", an NCRONTAB expression of
//     six fields, with %Setting% resolved from the app settings
//     (TimerTriggerAttributeBindingProvider → TimerSchedule.Create).
//   - TimerListener is a singleton listener ([Singleton(Mode =
//     SingletonMode.Listener)]): however many instances run, one holds the
//     listener's lock (a blob lease) and fires; the others only wait to take
//     the lock over. The emulation's lock is one owner per function, held
//     by a running instance, taken over when its instance stops. It fires
//     one occurrence at a time: the listener awaits an invocation before it
//     schedules the next, and an occurrence missed while the previous ran
//     is skipped (the next is computed from the time the call ended).
//   - runOnStartup fires once when the listener starts (on the instance that
//     holds the lock), whatever the schedule.
//   - The trigger value is TimerInfo, which the host sends as
//     JObject.FromObject(TimerInfo) (GetHttpScriptInvocationContextValue):
//     {"Schedule": {"AdjustForDST": true}, "ScheduleStatus": {"Last",
//     "Next", "LastUpdated"} or null without useMonitor, "IsPastDue": …}.
//     Its binding data is only "TimerTrigger", which the host leaves out of
//     Metadata (keys ending in "trigger"), so Metadata holds "sys" alone.
//     IsPastDue comes from the schedule monitor's record (a missed
//     occurrence across restarts); the emulation has no such record and
//     sends false.
//
// Not modelled: the schedule monitor's storage (status across restarts),
// the lock's lease renewal failing, daylight-saving adjustments (UTC only).

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

// timerLocks are the timer listeners' singleton locks: function → owner.
var timerLocks sync.Map // *Host → *timerLock

type timerLock struct {
	mu    sync.Mutex
	owner map[string]*Instance
}

func (h *Host) timerLock() *timerLock {
	l, _ := timerLocks.LoadOrStore(h, &timerLock{owner: map[string]*Instance{}})
	return l.(*timerLock)
}

// acquire takes (or keeps) the lock of function for in; false while
// another running instance holds it.
func (l *timerLock) acquire(function string, in *Instance) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if o := l.owner[function]; o != nil && o != in && o.ctx.Err() == nil {
		return false
	}
	l.owner[function] = in
	return true
}

// timer starts an instance's listener for a timer trigger.
func (in *Instance) timer(f Function) {
	h := in.host
	s, tb, err := h.timerOf(f)
	if err != nil {
		in.logf("%v: the timer does not start", err)
		return
	}
	monitor := tb.UseMonitor == nil || *tb.UseMonitor
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		var last time.Time
		fire := func(now time.Time) {
			if !h.timerLock().acquire(f.Name, in) {
				return
			}
			next, _ := s.Next(now)
			body := EncodeTimer(f.Trigger.Name, f.Name, last, next, monitor, now)
			last = now
			if _, err := in.call(in.ctx, f.Name, "/"+f.Name, body); err != nil && in.ctx.Err() == nil {
				in.logf("%s (timer) failed: %v", f.Name, err)
			}
		}
		if tb.RunOnStartup {
			fire(time.Now())
		}
		for {
			next, err := s.Next(time.Now())
			if err != nil {
				in.logf("%s: %v: the timer stops", f.Name, err)
				return
			}
			select {
			case <-in.ctx.Done():
				return
			case <-time.After(time.Until(next)):
			}
			fire(next)
		}
	}()
}

// FireTimer invokes a timer function on instance i now, bypassing the
// singleton lock (as when the lock's lease was lost and two instances
// fire at once). Tests use it to run two firings at the same time.
func (h *Host) FireTimer(ctx context.Context, function string, i int) error {
	for _, f := range h.app.Functions {
		if f.Name == function && f.Trigger.Type == "timerTrigger" {
			now := time.Now()
			_, err := h.Instances()[i].call(ctx, f.Name, "/"+f.Name, EncodeTimer(f.Trigger.Name, f.Name, time.Time{}, now.Add(time.Minute), true, now))
			return err
		}
	}
	return fmt.Errorf("no timer function %q", function)
}

// EncodeTimer is the body the host POSTs to /<function> for a timer
// occurrence (see the comment at the top of this file).
func EncodeTimer(binding, function string, last, next time.Time, monitor bool, now time.Time) []byte {
	netTime := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.0000000Z") }
	info := map[string]any{"Schedule": map[string]any{"AdjustForDST": true}, "ScheduleStatus": nil, "IsPastDue": false}
	if monitor {
		info["ScheduleStatus"] = map[string]any{"Last": netTime(last), "Next": netTime(next), "LastUpdated": netTime(now)}
	}
	body, _ := json.Marshal(invocation{Data: map[string]json.RawMessage{binding: raw(info)},
		Metadata: map[string]json.RawMessage{"sys": sysMetadata(function, now)}})
	return body
}
