package handler_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/heal"
)

// fakeHealer answers with a fixed run and summary.
type fakeHealer struct{ run heal.Run }

func (f fakeHealer) Explain(_ context.Context, o []convoy.BlockedOrder) ([]heal.BlockedWithCause, error) {
	return nil, nil
}
func (f fakeHealer) Summarize(context.Context) (heal.Summary, error) {
	return heal.Summary{BlockedOrders: 2}, nil
}
func (f fakeHealer) RunOnce(context.Context) heal.Run { return f.run }

// TestAutoReplayInvocation: the timer's call succeeds even when the run
// paused or failed (a failed call's Logs are lost), and its Logs hold one
// line per replayed order, per failure listed (and one for those past
// MaxOrders, counted), the pause, the record left unwritten and the
// metrics, each starting as the alert rules expect.
func TestAutoReplayInvocation(t *testing.T) {
	run := heal.Run{Replayed: []heal.Replay{{OrderID: "o-1", Seqs: []int64{4, 5}, Attempt: 2, NextWait: "2m0s"}},
		Failed: []heal.Failure{{OrderID: "o-2", Error: "send: down"}}, FailedMore: 4990, Paused: "a replay failed",
		Unrecorded: "the record could not be written (since 2026-11-25T18:00:00Z): too large",
		Summary: &heal.Summary{BlockedOrders: 3, OldestBlockedSeconds: 99, DeadLetters: &heal.DeadLetters{Total: 4, Permanent: 1},
			Lag: &heal.LagFigures{Orders: 12, ByStatus: map[convoy.LagStatus]int{convoy.LagOK: 2, convoy.LagCatchingUp: 6, convoy.LagStalled: 3, convoy.LagBlocked: 1},
				StalledTwoWindows: 1, SurveyedThisPeriod: 7, PeriodSeconds: 240,
				At: time.Date(2026, 11, 25, 19, 0, 0, 0, time.UTC), OldestSurveyAt: time.Date(2026, 11, 25, 18, 56, 30, 0, time.UTC), OldestHeads: []heal.OldestHead{{OrderID: "o-9", HeadAgeSeconds: 912.7}, {OrderID: "o-8", HeadAgeSeconds: 30}},
				CriticalTime: &heal.CriticalTimeFigures{Count: 40, P50Ms: 120, P99Ms: 2300, MaxMs: 4100}}}}
	e := handler.New(handler.OrdersDeps(handler.Deps{}, handler.Domain{Heal: fakeHealer{run: run}}))
	body := `{"Data":{"timer":{"Schedule":{"AdjustForDST":true},"ScheduleStatus":null,"IsPastDue":false}},"Metadata":{"sys":{"MethodName":"AutoReplay"}}}`
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/AutoReplay", strings.NewReader(body)))
	var out struct{ Logs []string }
	if err := json.Unmarshal(rec.Body.Bytes(), &out); rec.Code != 200 || err != nil {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	want := []string{
		`auto-replay replayed domain=orders orderId=o-1 seqs="4 5" attempt=2 left=0 nextWait=2m0s`,
		`auto-replay failed domain=orders orderId=o-2 error="send: down"`,
		`auto-replay failed domain=orders more=4990 error="and 4990 more orders, not listed (a run lists at most AutoReplayMaxOrders)"`,
		`auto-replay paused domain=orders reason="a replay failed"`,
		`auto-replay unrecorded domain=orders reason="the record could not be written (since 2026-11-25T18:00:00Z): too large"`,
		"metrics domain=orders blockedOrders=3 oldestBlockedSeconds=99 parkedMessages=0 deadLetters=4 deadLettersTransient=0 deadLettersPermanent=1 autoReplayPending=0 autoReplayRetrying=0 autoReplayed=0 autoReplayEnabled=false breakerOpen=false" +
			" lagOrders=12 lagOk=2 lagCatchingUp=6 lagStalled=3 lagBlocked=1 lagStalledTwoWindows=1 oldestHeadSeconds=912 criticalTimeP50Ms=120 criticalTimeP99Ms=2300 criticalTimeMaxMs=4100" +
			" lagSurveyedThisPeriod=7 lagOldestSurveySeconds=210 lagPeriodSeconds=240",
	}
	if strings.Join(out.Logs, "\n") != strings.Join(want, "\n") {
		t.Fatalf("Logs:\n%s\nwant:\n%s", strings.Join(out.Logs, "\n"), strings.Join(want, "\n"))
	}
	// Nothing applied in the recent window: no critical times (0 ms would
	// read as instant).
	idle := heal.LagFigures{Orders: 1, ByStatus: map[convoy.LagStatus]int{convoy.LagOK: 1}}
	if line := handler.MetricsLine("orders", heal.Summary{Lag: &idle}); strings.Contains(line, "criticalTime") || !strings.Contains(line, "lagOrders=1") {
		t.Fatalf("metrics line with nothing applied: %s", line)
	}
}
