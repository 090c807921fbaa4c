package infracheck

import (
	"slices"
	"strings"
	"testing"
)

// Resource loops ([for r in rules: {…}]) create one resource per element:
// the name checks evaluate each name a loop produces, never skip the loop.

func TestLoopNamesAreEvaluated(t *testing.T) {
	d := loadDeploy(t)
	names, errs := generatedNames(d, "convoy-dev")
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	got := names["Microsoft.Insights/scheduledQueryRules"]
	for _, want := range []string{"alert-convoy-dev-order-blocked", "alert-convoy-dev-dead-letters-permanent", "alert-convoy-dev-orders-stalled", "alert-convoy-dev-auto-replay-failing", "alert-convoy-dev-app-silent"} {
		if !slices.Contains(got, want) {
			t.Errorf("scheduledQueryRules names %v: %s missing (the alert rules' loop is not evaluated)", got, want)
		}
	}
}

func TestLoopIterations(t *testing.T) {
	src := []byte(`param prefix string
var rules = [
  { name: 'a', query: unknownFunction(1) }
  { name: 'b', query: unknownFunction(2) }
]
resource one 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = [for r in rules: {
  name: '${prefix}-${r.name}'
}]
resource two 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = [for (r, i) in rules: if (i > 0) {
  name: '${prefix}-${r.name}-${i}'
}]
resource three 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = [for i in range(1, 2): {
  name: '${prefix}-${i}'
}]
resource four 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = [for r in prefixes: {
  name: r
}]
`)
	f := &bicepFile{path: "loop.bicep", src: src, tree: parseBicep(src)}
	if where := syntaxError(f.tree, src); where != "" {
		t.Fatalf("syntax error at %s", where)
	}
	e := newEvaluator(f, map[string]any{"prefix": "p"})
	want := map[string]string{"one": "p-a p-b", "two": "p-a-0 p-b-1", "three": "p-1 p-2"}
	for _, r := range f.resources() {
		if r.loop == nil || r.prop("name") == nil {
			t.Fatalf("%s: loop %v, body %v", r.symbol, r.loop, r.body)
		}
		its, err := e.iterations(r.loop, nil)
		if r.symbol == "four" {
			if err == nil {
				t.Errorf("four: a loop over an unknown array expands to %v, want an error", its)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", r.symbol, err)
		}
		var got []string
		for _, it := range its {
			v, err := e.eval(r.prop("name"), it)
			if err != nil {
				t.Fatalf("%s: %v", r.symbol, err)
			}
			got = append(got, v.(string))
		}
		if strings.Join(got, " ") != want[r.symbol] {
			t.Errorf("%s: names %v, want %s", r.symbol, got, want[r.symbol])
		}
	}
}
