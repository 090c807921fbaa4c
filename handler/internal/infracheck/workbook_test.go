package infracheck

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/convoy-dev/convoy/handler"
	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/domains"
	"github.com/convoy-dev/convoy/handler/heal"
)

// The workbook of infra/modules/workbook.bicep charts fields of the lines
// the program writes. Its queries are read from the template (the workbook
// evaluated as Azure would serialise it, serializedData = string(workbook))
// and held to lines the program writes: the handler itself is called (an
// OrderProcessor and an AutoReplay invocation, with a fake processor and
// healer whose results produce every kind of line) and the Logs it answers
// are what the host would send to Application Insights, each under
// Function.<Name>.User. A field renamed on either side fails the check
// rather than empties a chart.

// workbookAPIVersion: Azure/bicep-types-az
// generated/applicationinsights/microsoft.insights/2023-06-01/types.md:
// Microsoft.Insights/workbooks with kind 'shared', location (required),
// properties.category/displayName/serializedData (required), sourceId,
// version ("like 'Notebook/1.0', which should match the workbook in
// serializedData"), description.
const workbookAPIVersion = "2023-06-01"

// programLine is a line the program writes into an invocation's Logs, and
// the category Application Insights receives it under.
type programLine struct{ category, message string }

// fakeProcessor answers Process with every disposition the processor logs,
// a drained message, and a blocking and an unblocking.
type fakeProcessor struct{}

func (fakeProcessor) Process(_ context.Context, _ string, msgs []convoy.Message) (convoy.Result, error) {
	var outs []convoy.Outcome
	for i, m := range msgs {
		d := []convoy.Disposition{convoy.Applied, convoy.Rejected, convoy.Parked}[i%3]
		o := convoy.Outcome{Seq: m.Seq, Disposition: d}
		if d == convoy.Rejected {
			o.Reason = "a business rule"
		}
		outs = append(outs, o)
	}
	outs = append(outs,
		convoy.Outcome{Seq: 9, Disposition: convoy.Applied, Drained: true, MessageID: "L-1:9", EnqueuedAt: time.Now().Add(-time.Second)},
		convoy.Outcome{Seq: 10, Disposition: convoy.Duplicate})
	return convoy.Result{Outcomes: outs, Blocked: true, Unblocked: true, MissingSeq: 11, Parked: 1, AppliedSeq: 9}, nil
}

func (fakeProcessor) Skip(context.Context, string, int64) (convoy.Result, convoy.View, error) {
	return convoy.Result{}, convoy.View{}, fmt.Errorf("not in this test")
}

func (fakeProcessor) Resume(context.Context, string) (convoy.Result, error) {
	return convoy.Result{}, fmt.Errorf("not in this test")
}

// fakeHealer's run replays, fails, pauses, cannot record, and has every
// figure of the summary (critical times included).
type fakeHealer struct{}

func (fakeHealer) Explain(context.Context, []convoy.BlockedOrder) ([]heal.BlockedWithCause, error) {
	return nil, nil
}

func (fakeHealer) Summarize(context.Context) (heal.Summary, error) { return fullSummary(), nil }

func (fakeHealer) RunOnce(context.Context) heal.Run {
	s := fullSummary()
	return heal.Run{
		Summary:    &s,
		Replayed:   []heal.Replay{{OrderID: "o-1", Seqs: []int64{2}, Attempt: 1, NextWait: "1m0s"}},
		Failed:     []heal.Failure{{OrderID: "o-2", Error: "storage is failing"}},
		FailedMore: 3,
		Paused:     "the breaker is open",
		Unrecorded: "storage is failing",
	}
}

// fullSummary has every figure the metrics line can carry.
func fullSummary() heal.Summary {
	now := time.Now()
	return heal.Summary{
		BlockedOrders: 2, OldestBlockedSeconds: 60, ParkedMessages: 5,
		DeadLetters: &heal.DeadLetters{Total: 3, Transient: 2, Permanent: 1},
		AutoReplay:  heal.AutoReplay{Enabled: true, Replayed: 4, Pending: 1},
		Lag: &heal.LagFigures{At: now, Orders: 10, ByStatus: map[convoy.LagStatus]int{
			convoy.LagOK: 4, convoy.LagCatchingUp: 3, convoy.LagStalled: 2, convoy.LagBlocked: 1,
		}, StalledTwoWindows: 1, OldestSurveyAt: now.Add(-time.Minute), PeriodSeconds: 60,
			CriticalTime: &heal.CriticalTimeFigures{Count: 5, P50Ms: 120, P99Ms: 2300, MaxMs: 4100}},
	}
}

// programLines calls the handler as the host would and returns the Logs of
// its answers, each under the category the host logs it under.
var programLines = sync.OnceValues(func() ([]programLine, error) {
	// Every registered domain, each with the fakes: AutoReplay writes each one's lines.
	var served []handler.Domain
	for _, dom := range domains.All {
		served = append(served, handler.Domain{Rules: dom, Processor: fakeProcessor{}, Heal: fakeHealer{}})
	}
	srv := handler.New(handler.Deps{Domains: served})
	var out []programLine
	for fn, payload := range map[string]string{
		handler.FnOrderProcessor: "servicebus-batch.json",
		handler.FnAutoReplay:     "timer-autoreplay.json",
	} {
		body, err := os.ReadFile(filepath.Join(root, "handler", "testdata", payload))
		if err != nil {
			return nil, err
		}
		req := httptest.NewRequest(http.MethodPost, "/"+fn, strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		var resp struct{ Logs []string }
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil || rec.Code != http.StatusOK {
			return nil, fmt.Errorf("%s: %d %s", fn, rec.Code, rec.Body)
		}
		for _, l := range resp.Logs {
			out = append(out, programLine{devhostCategoryUser(fn), l})
		}
	}
	return out, nil
})

// A workbook query's parts the check reads: its category, the lines it
// selects (startswith), the fields it extracts from message, the values it
// compares an extracted field with.
var (
	kqlCategoryIs = regexp.MustCompile(`where tostring\(customDimensions\.Category\) == "([^"]+)"`)
	kqlStartsWith = regexp.MustCompile(`message startswith "([^"]+)"`)
	kqlExtractAny = regexp.MustCompile(`extract\(@"([^"]*)", 1, message\)`)
	kqlFieldRegex = regexp.MustCompile(`^(\w+)=\((?:\\d\+|\\w\+)\)$`)
	kqlCompared   = regexp.MustCompile(`extract\(@"([^"]*)", 1, message\) == "([^"]*)"`)
)

// workbookQuery is one query item of the workbook.
type workbookQuery struct{ name, query, visualization string }

// loadWorkbook evaluates the workbook resource of the templates: its
// properties, and its serializedData as JSON.
func loadWorkbook(d deployFiles) (map[string]any, []workbookQuery, []string) {
	f := d.bicep["infra/modules/workbook.bicep"]
	if f == nil {
		return nil, nil, []string{"infra/modules/workbook.bicep is missing"}
	}
	var out []string
	var wb *resource
	for _, r := range f.resources() {
		if strings.HasPrefix(r.typ, "Microsoft.Insights/workbooks@") {
			wb = &r
		}
	}
	if wb == nil {
		return nil, nil, []string{"workbook.bicep: no Microsoft.Insights/workbooks resource"}
	}
	if wb.typ != "Microsoft.Insights/workbooks@"+workbookAPIVersion {
		out = append(out, fmt.Sprintf("workbook.bicep: %s, want API version %s (checked in bicep-types-az)", wb.typ, workbookAPIVersion))
	}
	for path, want := range map[string]string{"kind": "shared", "properties.category": "workbook", "properties.version": "Notebook/1.0"} {
		if got := wb.literal(strings.Split(path, ".")...); got != want {
			out = append(out, fmt.Sprintf("workbook.bicep: %s is %q, want %q", path, got, want))
		}
	}
	if src := wb.prop("properties", "sourceId"); src == nil || src.Utf8Text(f.src) != "applicationInsightsId" {
		out = append(out, "workbook.bicep: sourceId must be the Application Insights component (applicationInsightsId): the workbook opens under it")
	}
	e := newEvaluator(f, map[string]any{"environmentName": "convoy-dev", "location": "eastus2", "applicationInsightsId": "/appi", "tags": map[string]any{}})
	if v, err := e.eval(wb.prop("properties", "displayName"), nil); err != nil || v != "convoy: convoy-dev" {
		out = append(out, fmt.Sprintf("workbook.bicep: displayName %v (%v), want \"convoy: <environment>\"", v, err))
	}
	data, err := e.eval(wb.prop("properties", "serializedData"), nil)
	s, _ := data.(string)
	var doc map[string]any
	if err == nil {
		err = json.Unmarshal([]byte(s), &doc)
	}
	if err != nil {
		return nil, nil, append(out, "workbook.bicep: serializedData: "+err.Error())
	}
	if doc["version"] != "Notebook/1.0" {
		out = append(out, fmt.Sprintf("workbook.bicep: the workbook's version is %v, want Notebook/1.0", doc["version"]))
	}
	items, _ := doc["items"].([]any)
	timeRange := false
	var queries []workbookQuery
	for _, it := range items {
		item, _ := it.(map[string]any)
		content, _ := item["content"].(map[string]any)
		name, _ := item["name"].(string)
		switch item["type"] {
		case 9.0: // parameters
			params, _ := content["parameters"].([]any)
			for _, p := range params {
				p, _ := p.(map[string]any)
				v, _ := p["value"].(map[string]any)
				if p["name"] == "TimeRange" && p["type"] == 4.0 && v["durationMs"] == float64(4*time.Hour/time.Millisecond) {
					timeRange = true
				}
			}
		case 3.0: // KqlItem
			q, _ := content["query"].(string)
			vis, _ := content["visualization"].(string)
			queries = append(queries, workbookQuery{name, q, vis})
			for k, want := range map[string]any{"version": "KqlItem/1.0", "queryType": 0.0, "resourceType": "microsoft.insights/components", "timeContextFromParameter": "TimeRange"} {
				if content[k] != want {
					out = append(out, fmt.Sprintf("workbook.bicep: query %s: %s is %v, want %v", name, k, content[k], want))
				}
			}
			if !slices.Contains([]string{"timechart", "table", "tiles"}, vis) {
				out = append(out, fmt.Sprintf("workbook.bicep: query %s: visualization %q", name, vis))
			}
		}
	}
	if !timeRange {
		out = append(out, "workbook.bicep: no TimeRange parameter (type 4) of 4 hours by default")
	}
	if len(queries) == 0 {
		out = append(out, "workbook.bicep: no query")
	}
	return doc, queries, out
}

// checkWorkbookQuery holds one query to the lines the program writes: its
// category is one the program's lines arrive under; each startswith selects
// some of them; each field it extracts is a field of a line it selects, and
// the extract, run on those lines, finds a value; each value it compares an
// extracted field with is one such a line has. It returns the fields read.
func checkWorkbookQuery(q workbookQuery, lines []programLine) (fields []string, out []string) {
	cats := kqlCategoryIs.FindAllStringSubmatch(q.query, -1)
	starts := kqlStartsWith.FindAllStringSubmatch(q.query, -1)
	if len(cats) != 1 || len(starts) == 0 {
		return nil, []string{fmt.Sprintf("workbook query %s: want one category filter and a startswith, the lines it charts: %q", q.name, clip(q.query))}
	}
	var selected []string
	for _, s := range starts {
		n := 0
		for _, l := range lines {
			if l.category == cats[0][1] && strings.HasPrefix(l.message, s[1]) {
				selected = append(selected, l.message)
				n++
			}
		}
		if n == 0 {
			out = append(out, fmt.Sprintf("workbook query %s: no line the program writes under %s starts with %q", q.name, cats[0][1], s[1]))
		}
	}
	for _, m := range kqlExtractAny.FindAllStringSubmatch(q.query, -1) {
		f := kqlFieldRegex.FindStringSubmatch(m[1])
		if f == nil {
			out = append(out, fmt.Sprintf(`workbook query %s: extract(@%q): not <field>=(\d+) or <field>=(\w+), its field cannot be checked`, q.name, m[1]))
			continue
		}
		fields = append(fields, f[1])
		re := regexp.MustCompile(m[1])
		has, found := false, false
		for _, l := range selected {
			has = has || metricsFieldNames(l)[f[1]]
			found = found || re.MatchString(l)
		}
		if !has {
			out = append(out, fmt.Sprintf("workbook query %s: reads %s=, which no line it selects has (the program writes %v)", q.name, f[1], fieldUnion(selected)))
		} else if !found {
			out = append(out, fmt.Sprintf("workbook query %s: extract(@%q) finds no value in the lines the program writes", q.name, m[1]))
		}
	}
	if n := strings.Count(q.query, "extract("); n != len(kqlExtractAny.FindAllString(q.query, -1)) {
		out = append(out, fmt.Sprintf("workbook query %s: an extract that is not extract(@\"…\", 1, message): its field cannot be checked", q.name))
	}
	for _, m := range kqlCompared.FindAllStringSubmatch(q.query, -1) {
		re := regexp.MustCompile(m[1])
		if !slices.ContainsFunc(selected, func(l string) bool {
			v := re.FindStringSubmatch(l)
			return v != nil && v[1] == m[2]
		}) {
			out = append(out, fmt.Sprintf("workbook query %s: compares extract(@%q) with %q, which no line the program writes has", q.name, m[1], m[2]))
		}
	}
	return fields, out
}

// metricsFieldNames are the keys of a line's key=value fields.
func metricsFieldNames(line string) map[string]bool {
	out := map[string]bool{}
	for _, m := range metricsField.FindAllStringSubmatch(line, -1) {
		out[m[1]] = true
	}
	return out
}

func fieldUnion(lines []string) []string {
	set := map[string]bool{}
	for _, l := range lines {
		for k := range metricsFieldNames(l) {
			set[k] = true
		}
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// checkWorkbook: the workbook is deployed as Azure expects it, every query
// reads what the program writes, the charts cover the trends of issue 45,
// and the alerts' descriptions name the workbook.
func checkWorkbook(d deployFiles) []string {
	lines, err := programLines()
	if err != nil {
		return []string{"calling the handler: " + err.Error()}
	}
	_, queries, out := loadWorkbook(d)
	read := map[string]bool{}
	for _, q := range queries {
		fields, errs := checkWorkbookQuery(q, lines)
		out = append(out, errs...)
		for _, f := range fields {
			read[f] = true
		}
	}
	// The trends the workbook is for.
	for _, f := range []string{"blockedOrders", "parkedMessages", "deadLettersTransient", "deadLettersPermanent",
		"lagOk", "lagCatchingUp", "lagStalled", "lagBlocked", "criticalTimeMs", "outcome"} {
		if !read[f] {
			out = append(out, fmt.Sprintf("workbook.bicep: no chart reads %s", f))
		}
	}
	// Called with the component's id; named in each alert's description.
	res := d.bicep["infra/modules/resources.bicep"]
	if got := moduleParam(res, "workbook.bicep", "applicationInsightsId"); got != "monitoring.outputs.applicationInsightsId" {
		out = append(out, fmt.Sprintf("resources.bicep: the workbook module gets applicationInsightsId: %q, want the component's id", got))
	}
	if got := moduleParam(res, "alerts.bicep", "workbookDisplayName"); got != "workbook.outputs.displayName" {
		out = append(out, fmt.Sprintf("resources.bicep: the alerts module gets workbookDisplayName: %q, want the workbook's (workbook.outputs.displayName)", got))
	}
	out = append(out, checkAlertDescriptions(d)...)
	return out
}

// checkAlertDescriptions: every alert rule's description sends the reader
// to the workbook, by its display name, in the Application Insights resource.
func checkAlertDescriptions(d deployFiles) []string {
	rules, _, out := alertRules(d)
	for i, in := range rules {
		v, err := in.value("properties", "description")
		s, _ := v.(string)
		if err != nil || !strings.Contains(s, `workbook "convoy: convoy-dev"`) || !strings.Contains(s, "appi-convoy-dev") {
			out = append(out, fmt.Sprintf("alerts.bicep: rule %d: the description %q (%v) does not name the workbook and its Application Insights resource", i, s, err))
		}
	}
	return out
}

// TestWorkbookReadsWhatTheProgramWrites is the workbook's field test: it
// lists each chart and the fields it reads, all of them held to lines the
// program wrote in this test (checkWorkbook is also a rule of
// TestDeployRules, there with the mutations it must catch).
func TestWorkbookReadsWhatTheProgramWrites(t *testing.T) {
	d := loadDeploy(t)
	lines, err := programLines()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"order message ", "order blocked ", "order unblocked ", handler.LineMetrics + " ", handler.LineFailed, handler.LinePaused, handler.LineUnrecorded} {
		if !slices.ContainsFunc(lines, func(l programLine) bool { return strings.HasPrefix(l.message, want) }) {
			t.Errorf("the handler wrote no %q line: the fakes no longer produce every kind", want)
		}
	}
	_, queries, _ := loadWorkbook(d)
	for _, q := range queries {
		fields, _ := checkWorkbookQuery(q, lines)
		t.Logf("%s (%s): %v", q.name, q.visualization, fields)
	}
	for _, l := range lines {
		t.Logf("%s: %s", l.category, l.message)
	}
	for _, e := range checkWorkbook(d) {
		t.Error(e)
	}
}
