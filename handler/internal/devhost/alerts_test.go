package devhost_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/convoy-dev/convoy/handler/internal/devhost"
)

// The alert rules of infra/modules/alerts.bicep, run over what the
// emulation's Application Insights received. The queries are read from the
// Bicep file, not from the handler: the test evaluates the Kusto subset they
// use (a category filter, startswith alternatives, one extract with a
// threshold) the way Log Analytics would.

var (
	bicepCategory = regexp.MustCompile(`var category = '([^']+)'`)
	bicepQuery    = regexp.MustCompile(`(?s)var (\w+)Query = '''(.*?)'''`)
	kqlCategory   = regexp.MustCompile(`where tostring\(customDimensions\.Category\) == "([^"]+)"`)
	kqlStarts     = regexp.MustCompile(`message startswith "([^"]+)"`)
	kqlExtract    = regexp.MustCompile(`extend (\w+) = toint\(extract\(@"([^"]+)", 1, message\)\)\s*\|\s*where (\w+) > (\S+)`)
)

// alertRows returns, per query of alerts.bicep, how many of traces it
// matches, with {threshold} set to threshold.
func alertRows(t *testing.T, traces []devhost.Trace, threshold int) map[string]int {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "infra", "modules", "alerts.bicep"))
	if err != nil {
		t.Fatal(err)
	}
	cat := bicepCategory.FindStringSubmatch(string(src))
	queries := bicepQuery.FindAllStringSubmatch(string(src), -1)
	if cat == nil || len(queries) != 4 {
		t.Fatalf("alerts.bicep: category %v, %d queries: the test no longer reads it", cat, len(queries))
	}
	out := map[string]int{}
	for _, q := range queries {
		name := q[1]
		out[name] = 0
		kql := strings.ReplaceAll(strings.ReplaceAll(q[2], "{category}", cat[1]), "{threshold}", strconv.Itoa(threshold))
		c := kqlCategory.FindStringSubmatch(kql)
		starts := kqlStarts.FindAllStringSubmatch(kql, -1)
		if c == nil || len(starts) == 0 {
			t.Fatalf("query %s: no category or startswith the test understands:\n%s", name, kql)
		}
		var extract *regexp.Regexp
		var min int
		if m := kqlExtract.FindStringSubmatch(kql); m != nil {
			if m[1] != m[3] {
				t.Fatalf("query %s: extends %s but compares %s", name, m[1], m[3])
			}
			extract = regexp.MustCompile(m[2])
			if min, err = strconv.Atoi(m[4]); err != nil {
				t.Fatalf("query %s: threshold %q", name, m[4])
			}
		} else if strings.Contains(kql, "extract(") {
			t.Fatalf("query %s: an extract the test does not understand:\n%s", name, kql)
		}
		for _, tr := range traces {
			if tr.Category != c[1] {
				continue
			}
			hit := false
			for _, s := range starts {
				hit = hit || strings.HasPrefix(tr.Message, s[1])
			}
			if hit && extract != nil {
				m := extract.FindStringSubmatch(tr.Message)
				n, err := strconv.Atoi(func() string {
					if m == nil {
						return ""
					}
					return m[1]
				}())
				hit = err == nil && n > min // toint of no match is null: the row is dropped
			}
			if hit {
				out[name]++
			}
		}
	}
	return out
}

// TestAlertQueriesMatchWhatArrives: the metrics and auto-replay lines of a
// healthy and an unhealthy figure each fire exactly the rules they should,
// and a line written where the host would put it under another category
// (stderr: Host.Function.Console) fires none. Orders stalled, but not for two
// windows yet, fire nothing; nor does a metrics line written before the lag
// fields existed.
func TestAlertQueriesMatchWhatArrives(t *testing.T) {
	t.Parallel()
	user := devhost.CategoryUser("AutoReplay")
	const lagHealthy = " lagOrders=1234 lagOk=10 lagCatchingUp=1200 lagStalled=20 lagBlocked=4 lagStalledTwoWindows=0 oldestHeadSeconds=290 criticalTimeP50Ms=120 criticalTimeP99Ms=2300 criticalTimeMaxMs=4100"
	healthy := []devhost.Trace{
		{Category: user, Level: devhost.LevelInformation, Message: "metrics blockedOrders=0 oldestBlockedSeconds=0 parkedMessages=0 deadLetters=0 deadLettersTransient=0 deadLettersPermanent=0 autoReplayPending=0 autoReplayRetrying=0 autoReplayed=3 autoReplayEnabled=true breakerOpen=false"},
		{Category: user, Level: devhost.LevelInformation, Message: "metrics blockedOrders=0 oldestBlockedSeconds=0 parkedMessages=0 deadLetters=0 deadLettersTransient=0 deadLettersPermanent=0 autoReplayPending=0 autoReplayRetrying=0 autoReplayed=3 autoReplayEnabled=true breakerOpen=false" + lagHealthy},
	}
	for name, n := range alertRows(t, healthy, 1800) {
		if n != 0 {
			t.Errorf("healthy: rule %s fires", name)
		}
	}
	sick := []devhost.Trace{
		{Category: user, Level: devhost.LevelInformation, Message: "metrics blockedOrders=2 oldestBlockedSeconds=1801 parkedMessages=5 deadLetters=2 deadLettersTransient=1 deadLettersPermanent=1 autoReplayPending=1 autoReplayRetrying=0 autoReplayed=3 autoReplayEnabled=true breakerOpen=false"},
		{Category: user, Level: devhost.LevelWarning, Message: `auto-replay paused reason="storage or Service Bus is failing"`},
		{Category: devhost.CategoryConsole, Level: devhost.LevelWarning, Message: `time=… level=WARN msg="auto-replay failed" orderId=o-1`},
		{Category: user, Level: devhost.LevelInformation, Message: "metrics blockedOrders=0 oldestBlockedSeconds=0 parkedMessages=0 deadLetters=0 deadLettersTransient=0 deadLettersPermanent=0 autoReplayPending=0 autoReplayRetrying=0 autoReplayed=3 autoReplayEnabled=true breakerOpen=false lagOrders=1234 lagOk=10 lagCatchingUp=1200 lagStalled=20 lagBlocked=4 lagStalledTwoWindows=3 oldestHeadSeconds=912 criticalTimeP50Ms=120 criticalTimeP99Ms=2300 criticalTimeMaxMs=4100"},
		{Category: devhost.CategoryConsole, Level: devhost.LevelWarning, Message: "metrics lagStalledTwoWindows=3"},
	}
	got := alertRows(t, sick, 1800)
	for name, want := range map[string]int{"blocked": 1, "permanent": 1, "stalled": 1, "failing": 1} {
		if got[name] != want {
			t.Errorf("unhealthy: rule %s matches %d rows, want %d", name, got[name], want)
		}
	}
}
