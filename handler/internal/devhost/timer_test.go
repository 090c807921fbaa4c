package devhost_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
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
	e := startWith(t, stage(t, nil), azurite.Options{}, func(o *devhost.Options) {
		o.MinInstances, o.MaxInstances = 2, 2
		o.Settings["AutoReplaySchedule"] = "*/1 * * * * *"
	})
	if n := len(e.host.Group("function:AutoReplay")); n != 2 {
		t.Fatalf("%d AutoReplay instances", n)
	}
	time.Sleep(3500 * time.Millisecond)
	e.mu.Lock()
	log := e.log.String()
	e.mu.Unlock()
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
