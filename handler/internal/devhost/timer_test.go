package devhost_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler/internal/azurite"
	"github.com/convoy-dev/convoy/handler/internal/devhost"
)

// TestEncodeTimer: the timer invocation has the shape the host gives it
// (JObject.FromObject(TimerInfo) in Data under the binding's name; Metadata
// holds only sys, since "TimerTrigger" ends with "trigger").
func TestEncodeTimer(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 20, 30, 0, time.UTC)
	var inv struct {
		Data     map[string]map[string]json.RawMessage
		Metadata map[string]map[string]string
	}
	if err := json.Unmarshal(devhost.EncodeTimer("timer", "AutoReplay", now.Add(-time.Minute), now.Add(time.Minute), true, now), &inv); err != nil {
		t.Fatal(err)
	}
	info := inv.Data["timer"]
	var sched struct{ AdjustForDST bool }
	var status struct{ Last, Next, LastUpdated string }
	_ = json.Unmarshal(info["Schedule"], &sched)
	_ = json.Unmarshal(info["ScheduleStatus"], &status)
	if len(inv.Data) != 1 || !sched.AdjustForDST || string(info["Schedule"]) != `{"AdjustForDST":true}` || string(info["IsPastDue"]) != "false" ||
		!strings.HasPrefix(status.Next, "2026-11-21T10:21:30") || !strings.HasPrefix(status.Last, "2026-11-21T10:19:30") || status.LastUpdated == "" {
		t.Fatalf("Data %s", info)
	}
	if len(inv.Metadata) != 1 || inv.Metadata["sys"]["MethodName"] != "AutoReplay" {
		t.Fatalf("Metadata %v, want sys only", inv.Metadata)
	}
	json.Unmarshal(devhost.EncodeTimer("timer", "AutoReplay", now, now, false, now), &inv)
	if string(inv.Data["timer"]["ScheduleStatus"]) != "null" {
		t.Fatalf("without useMonitor ScheduleStatus is %s, want null", inv.Data["timer"]["ScheduleStatus"])
	}
}

// TestTimerSingleton: on two instances, one holds the timer's lock and
// fires, every second; the other never does.
func TestTimerSingleton(t *testing.T) {
	e := startWith(t, stage(t, nil), azurite.Options{}, func(o *devhost.Options) {
		o.MinInstances, o.MaxInstances = 2, 2
		o.Settings["AutoReplaySchedule"] = "*/1 * * * * *"
	})
	if n := len(e.host.Instances()); n != 2 {
		t.Fatalf("%d instances", n)
	}
	time.Sleep(3500 * time.Millisecond)
	e.mu.Lock()
	log := e.log.String()
	e.mu.Unlock()
	fired := map[string]int{}
	for _, m := range regexp.MustCompile(`(i\d) → AI Function\.AutoReplay\.User \[Information\]: metrics `).FindAllStringSubmatch(log, -1) {
		fired[m[1]]++
	}
	if len(fired) != 1 || fired["i0"]+fired["i1"] < 2 {
		t.Fatalf("firings by instance %v: want one instance, at least twice", fired)
	}
}
