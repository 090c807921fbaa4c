package main

// docs/your-rules.md done as a Go developer does it (issue 44, item 5), as
// walkthrough_test.go does the README: the page's example domain is built
// from the code the page shows, registered by the page's edit of
// handler/domains/domains.go, given its functions by `convoy functions`,
// run under the local emulation (convoy-devhost, as `make devhost` runs it)
// with the page's queue configuration, sent the page's ledger, and looked at
// with the page's commands; every parcel's answer is compared with a fold of
// the ledger written here, apart from the domain's Decide.
//
// Each code block of the page is a step, in the page's order: a new file
// (Go, a ledger) or an edit of a file of the repository (a diff), named by
// the line before it ("`path`:"); shell commands; or, for JSON without a
// path, the answer the command before it prints (the shown members must be
// the real ones). A command the test does not know fails it, so the page
// asks for nothing the test leaves out. The repository is not touched: the
// page's Go files and the edited domains.go reach the compiler through go
// build -overlay, and every other file is a copy in a temporary project,
// where the commands run.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// yourRulesPage is the page the test follows.
const yourRulesPage = "docs/your-rules.md"

// The page's example domain. What derives from its names is written here
// from issue 44's naming table (tutorialTitle, tutorialFunctions), apart
// from handler/settings and handler.FunctionsOf: the test's oracle of names.
const (
	tutorialName = "parcels"
	tutorialNoun = "parcel"
)

func tutorialTitle(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

// tutorialFunctions are the function folders `convoy functions` writes for
// the page's domain: its processor, on the queue its setting names, and its
// HTTP functions with their routes and methods, as httpRoutes reads a
// folder (TestDocsCommands may take them for the page's curl lines, which no
// folder of the repository serves).
func tutorialFunctions() (processor, queueSetting string, http []route) {
	noun, key := tutorialTitle(tutorialNoun), tutorialName+"/{"+tutorialNoun+"Id}"
	http = []route{
		{noun + "Status", strings.Split(key, "/"), []string{"get"}},
		{"Blocked" + tutorialTitle(tutorialName), []string{tutorialName}, []string{"get"}},
		{"Replay" + noun, strings.Split(key+"/replay", "/"), []string{"post"}},
		{"Skip" + noun + "Gap", strings.Split(key+"/skip", "/"), []string{"post"}},
	}
	return noun + "Processor", tutorialTitle(tutorialName) + "QueueName", http
}

// pageStep is one code block of the page.
type pageStep struct {
	line int    // its first line in the page
	lang string // its fence's language
	path string // the file it writes or edits, from the line before it; "" for none
	text string
}

func (s pageStep) String() string { return fmt.Sprintf("%s:%d", yourRulesPage, s.line) }

// stepPath is the line naming the file of the block after it.
var stepPath = regexp.MustCompile("^`([^`\\s]+)`:$")

// pageSteps reads the page's code blocks, each with the file the last
// prose line before it names (none when that line names none, or when no
// prose separates it from the block before).
func pageSteps(page string) []pageStep {
	prose, fences := splitFences(page)
	lines := strings.Split(prose, "\n")
	var steps []pageStep
	after := 0 // the first line (0-based) after the previous block
	for _, f := range fences {
		s := pageStep{line: f.line, lang: f.lang, text: f.text}
		for i := f.line - 3; i >= after; i-- { // f.line-2 is the opening fence
			if l := strings.TrimSpace(lines[i]); l != "" {
				if m := stepPath.FindStringSubmatch(l); m != nil {
					s.path = m[1]
				}
				break
			}
		}
		steps = append(steps, s)
		after = f.line + strings.Count(f.text, "\n")
	}
	return steps
}

// applyDiff applies a diff block to content. Its hunks are separated by
// lines starting with "@@"; each replaces its old lines (context " " and
// removals "-"), which must be in content exactly once as whole lines, with
// its new lines (context and additions "+").
func applyDiff(content, diff string) (out string, added, removed []string, err error) {
	var hunks [][]string
	var cur []string
	for _, l := range strings.Split(strings.TrimSuffix(diff, "\n"), "\n") {
		if strings.HasPrefix(l, "@@") {
			if cur != nil {
				hunks = append(hunks, cur)
			}
			cur = nil
			continue
		}
		cur = append(cur, l)
	}
	if cur != nil {
		hunks = append(hunks, cur)
	}
	if len(hunks) == 0 {
		return "", nil, nil, errors.New("the diff has no lines")
	}
	text := "\n" + content
	for i, h := range hunks {
		var from, to []string
		for _, l := range h {
			if l == "" {
				l = " " // an empty context line, its space trimmed by an editor
			}
			switch body := l[1:]; l[0] {
			case ' ':
				from, to = append(from, body), append(to, body)
			case '-':
				from, removed = append(from, body), append(removed, body)
			case '+':
				to, added = append(to, body), append(added, body)
			default:
				return "", nil, nil, fmt.Errorf("hunk %d: %q is no context (\" \"), removal (\"-\") or addition (\"+\")", i+1, l)
			}
		}
		old, new := "\n"+strings.Join(from, "\n")+"\n", "\n"+strings.Join(to, "\n")+"\n"
		if n := strings.Count(text, old); n != 1 {
			return "", nil, nil, fmt.Errorf("hunk %d: its lines are in the file %d times, want once:\n%s", i+1, n, strings.Trim(old, "\n"))
		}
		text = strings.Replace(text, old, new, 1)
	}
	return text[1:], added, removed, nil
}

func TestApplyDiff(t *testing.T) {
	file := "a\nb\nc\nb\nd\n"
	got, added, removed, err := applyDiff(file, " c\n-b\n+B\n+B2\n@@ second\n d\n+e\n")
	if err != nil || got != "a\nb\nc\nB\nB2\nd\ne\n" || !slices.Equal(added, []string{"B", "B2", "e"}) || !slices.Equal(removed, []string{"b"}) {
		t.Fatalf("applyDiff: %q %q %q %v", got, added, removed, err)
	}
	for _, bad := range []string{" b\n+x\n", " z\n+x\n", "x\n", " a\n b\n@@\n b\n+x\n"} {
		if _, _, _, err := applyDiff(file, bad); err == nil {
			t.Errorf("applyDiff applied %q, whose context is not in the file once or which is no diff", bad)
		}
	}
}

// TestYourRules follows docs/your-rules.md. It never skips: make unit
// leaves the root package out whole (it starts servers).
func TestYourRules(t *testing.T) {
	t.Parallel()
	azurite := filepath.Join(toolsDir(t), "node_modules", ".bin", "azurite-table") // which the emulation starts
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	repo, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	r := &tutorial{t: t, ctx: ctx, repo: repo, root: filepath.Join(t.TempDir(), "project"), goFiles: map[string]bool{},
		env: append(freshEnv(), "AZURITE_TABLE="+azurite), exports: map[string]string{}, subst: map[string]string{}, did: map[string]bool{}}
	defer r.stop()
	// The reader's repository, as far as the commands read it: the app's
	// layout (make devhost stages host.json and functions/) and the
	// emulator's queues. A file an edit touches is copied when edited.
	if err := os.MkdirAll(r.root, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"host.json", "functions", "infra/local/servicebus-emulator-config.json"} {
		if out, err := exec.Command("cp", "-r", "--parents", p, r.root).CombinedOutput(); err != nil {
			t.Fatalf("copy %s: %v\n%s", p, err, out)
		}
	}

	began := time.Now()
	for _, s := range pageSteps(readPage(t, yourRulesPage)) {
		started := time.Now()
		switch {
		case s.lang == "go" && s.path != "":
			r.writeGo(s)
		case s.lang == "diff" && s.path != "":
			r.edit(s)
		case s.lang == "json" && s.path != "":
			r.writeLedger(s)
		case s.lang == "json":
			r.answer(s)
		case s.lang == "sh":
			for _, l := range shellLines(s.text) {
				if l != "" {
					r.run(s, l)
				}
			}
		default:
			r.fatalf("%s: a %q block without a file named before it: neither a step nor an answer", s, s.lang)
		}
		what := s.path
		if what == "" {
			what = strings.TrimSpace(strings.SplitN(s.text, "\n", 2)[0])
		}
		r.timings = append(r.timings, fmt.Sprintf("  %5.1f s  %s %.60s", time.Since(started).Seconds(), s.lang, what))
	}
	for _, step := range []string{"registered", "tested", "functions", "devhost", "published", "looked"} {
		if !r.did[step] {
			r.fatalf("the page never %s", map[string]string{"registered": "registers its domain (an edit of handler/domains/domains.go)",
				"tested": "runs its domain's tests (go test)", "functions": "writes the domain's functions (go run . functions)",
				"devhost": "starts the emulation (make devhost)", "published": "publishes its ledger (go run . publish)",
				"looked": "looks at one of its keys (curl /api/" + tutorialName + "/… or go run . status --domain " + tutorialName + ")"}[step])
		}
	}
	r.checkDeployFiles()
	r.checkLayout()
	// Every parcel of the ledger, whichever the page looked at.
	want := foldParcels(r.ledger)
	for id := range want {
		r.look(r.host+"/api/"+tutorialName+"/"+id, id)
	}
	t.Logf("the page's %d parcels are what the fold says, %.1f s after the first step:\n%s", len(want), time.Since(began).Seconds(), strings.Join(r.timings, "\n"))
}

// tutorial is one reading of the page.
type tutorial struct {
	t       *testing.T
	ctx     context.Context
	repo    string          // the repository, the test's working directory
	root    string          // the reader's project: copies of the files the steps read and write
	goFiles map[string]bool // Go files of root that replace or add to the repository's (go build -overlay)
	stale   bool            // a Go file changed since the binaries in root/bin were built
	env     []string
	exports map[string]string // the lines the banner printed to copy: export Name='value'
	subst   map[string]string // the page's address → the one the emulation took
	host    string            // the emulation's front end
	devhost *exec.Cmd
	logs    *syncBuffer
	last    []byte           // what the last command printed
	ledger  []map[string]any // the entries of the page's ledger
	did     map[string]bool
	timings []string
}

func (r *tutorial) fatalf(format string, args ...any) {
	r.t.Helper()
	if r.logs != nil {
		logs := r.logs.String()
		if len(logs) > 6000 {
			logs = "…" + logs[len(logs)-6000:]
		}
		r.t.Logf("the emulation's output:\n%s", logs)
	}
	r.t.Fatalf(format, args...)
}

// read is a file as the reader has it: edited in root, else the repository's.
func (r *tutorial) read(path string) []byte {
	r.t.Helper()
	data, err := os.ReadFile(filepath.Join(r.root, path))
	if errors.Is(err, os.ErrNotExist) {
		data, err = os.ReadFile(filepath.Join(r.repo, path))
	}
	if err != nil {
		r.fatalf("%v", err)
	}
	return data
}

func (r *tutorial) write(path string, data []byte) {
	r.t.Helper()
	p := filepath.Join(r.root, path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.fatalf("%v", err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		r.fatalf("%v", err)
	}
	if strings.HasSuffix(path, ".go") {
		r.goFiles[path], r.stale = true, true
	}
}

// writeGo is a new Go file of the domain's package: formatted as gofmt
// writes it, and new to the repository.
func (r *tutorial) writeGo(s pageStep) {
	r.t.Helper()
	if !strings.HasPrefix(s.path, "handler/") {
		r.fatalf("%s: %s is not under handler/, where a domain's package lives", s, s.path)
	}
	if _, err := os.Stat(filepath.Join(r.repo, s.path)); err == nil {
		r.fatalf("%s: %s exists in the repository: the page writes a new domain's files", s, s.path)
	}
	if formatted, err := format.Source([]byte(s.text)); err != nil || !bytes.Equal(formatted, []byte(s.text)) {
		r.fatalf("%s: %s is not as gofmt writes it (%v)", s, s.path, err)
	}
	r.write(s.path, []byte(s.text))
}

// edit applies a diff of the page to the reader's copy of a file.
func (r *tutorial) edit(s pageStep) {
	r.t.Helper()
	before := string(r.read(s.path))
	after, added, removed, err := applyDiff(before, s.text)
	if err != nil {
		r.fatalf("%s: the page's edit of %s does not apply: %v", s, s.path, err)
	}
	if s.path == "handler/domains/domains.go" {
		r.checkRegistration(s, before, after, added, removed)
	}
	r.write(s.path, []byte(after))
}

// checkRegistration: the edit of domains.go registers the domain with one
// line in All, after the domains registered already, and its import, and
// does nothing else.
func (r *tutorial) checkRegistration(s pageStep, before, after string, added, removed []string) {
	r.t.Helper()
	pkg := module + "/handler/" + tutorialName
	entry := tutorialName + ".Domain"
	if len(removed) != 0 || len(added) != 2 {
		r.fatalf("%s: the edit of domains.go adds %q and removes %q: want one line in All and its import, nothing else", s, added, removed)
	}
	was, now := r.registered(before), r.registered(after)
	if !slices.Equal(now, append(was, entry)) {
		r.fatalf("%s: domains.All is %v after the edit, want %v", s, now, append(was, entry))
	}
	f, err := parser.ParseFile(token.NewFileSet(), "", after, parser.ImportsOnly)
	if err != nil || !slices.ContainsFunc(f.Imports, func(i *ast.ImportSpec) bool { return i.Path.Value == strconv.Quote(pkg) }) {
		r.fatalf("%s: domains.go does not import %s after the edit (%v)", s, pkg, err)
	}
	r.did["registered"] = true
}

// registered are the elements of domains.All in src, as written.
func (r *tutorial) registered(src string) []string {
	r.t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "", src, 0)
	if err != nil {
		r.fatalf("domains.go: %v", err)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		v, ok := n.(*ast.ValueSpec)
		if !ok || len(v.Names) != 1 || v.Names[0].Name != "All" || len(v.Values) != 1 {
			return true
		}
		if lit, ok := v.Values[0].(*ast.CompositeLit); ok {
			for _, e := range lit.Elts {
				out = append(out, src[e.Pos()-1:e.End()-1])
			}
		}
		return false
	})
	if out == nil {
		r.fatalf("domains.go has no var All = []keyed.Domain{…}")
	}
	return out
}

// writeLedger is the page's ledger: every entry one of the domain's.
func (r *tutorial) writeLedger(s pageStep) {
	r.t.Helper()
	var doc struct {
		Transactions []map[string]any `json:"transactions"`
	}
	if err := json.Unmarshal([]byte(s.text), &doc); err != nil || len(doc.Transactions) == 0 {
		r.fatalf("%s: %s is no ledger with transactions: %v", s, s.path, err)
	}
	for i, e := range doc.Transactions {
		if e["domain"] != tutorialName {
			r.fatalf("%s: entry %d of %s is not one of %s (\"domain\": %q): %v", s, i, s.path, tutorialName, tutorialName, e)
		}
	}
	r.ledger = append(r.ledger, doc.Transactions...)
	r.write(s.path, []byte(s.text))
}

// answer: the members the page shows are those the last command printed.
func (r *tutorial) answer(s pageStep) {
	r.t.Helper()
	var shown, got map[string]any
	if err := json.Unmarshal([]byte(s.text), &shown); err != nil {
		r.fatalf("%s: the answer shown is not a JSON object: %v", s, err)
	}
	if err := json.Unmarshal(r.last, &got); err != nil {
		r.fatalf("%s: an answer is shown, but the command before it printed no JSON object: %v\n%s", s, err, r.last)
	}
	for k, v := range shown {
		if !reflect.DeepEqual(got[k], v) {
			r.fatalf("%s: the page shows %q: %v; the command answered %v\n%s", s, k, v, got[k], r.last)
		}
	}
}

// run performs one command of the page, as the reader does it in the
// repository: here in the project, with the binaries built from it.
func (r *tutorial) run(s pageStep, line string) {
	r.t.Helper()
	words := shellWords(line)
	switch {
	case devhostLine.MatchString(line):
		r.startDevhost(words)
	case words[0] == "export" && len(words) == 2:
		name, _, _ := strings.Cut(words[1], "=")
		value, ok := r.exports[name]
		if !ok {
			r.fatalf("%s: the page exports %s, but the banner of make devhost printed no export of it to copy", s, name)
		}
		r.env = append(r.env, name+"="+value)
	case len(words) > 2 && words[0] == "go" && words[1] == "test":
		for _, pattern := range words[2:] {
			r.goTest(s, pattern)
		}
	case len(words) > 3 && words[0] == "go" && words[1] == "run" && words[2] == ".":
		r.convoy(s, words[3:])
	case words[0] == "curl" && len(words) == 2:
		url := words[1]
		for from, to := range r.subst {
			url = strings.ReplaceAll(url, from, to)
		}
		if id, ok := strings.CutPrefix(url, r.host+"/api/"+tutorialName+"/"); ok && r.host != "" {
			r.look(url, id)
			r.did["looked"] = true
			return
		}
		resp, body := r.get(url)
		if resp != http.StatusOK || !json.Valid(body) {
			r.fatalf("%s: %s answered %d: %s", s, line, resp, body)
		}
		r.t.Logf("GET %s\n%s", url, body)
		r.last = body
	default:
		r.fatalf("%s: %q is a command the test does not perform: the page asks for a step it leaves out", s, line)
	}
}

// overlay writes the -overlay file of the project's Go files.
func (r *tutorial) overlay() string {
	r.t.Helper()
	replace := map[string]string{}
	for p := range r.goFiles {
		replace[filepath.Join(r.repo, p)] = filepath.Join(r.root, p)
	}
	data, _ := json.Marshal(map[string]any{"Replace": replace})
	path := filepath.Join(r.root, "overlay.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		r.fatalf("%v", err)
	}
	return path
}

// goCmd runs the go command in the repository with the project's files.
func (r *tutorial) goCmd(args ...string) {
	r.t.Helper()
	args = append([]string{args[0], "-overlay", r.overlay()}, args[1:]...)
	cmd := exec.CommandContext(r.ctx, "go", args...)
	cmd.Dir = r.repo
	if out, err := cmd.CombinedOutput(); err != nil {
		r.fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// build builds bin/convoy and bin/convoy-devhost of the project, as make
// devhost does (and go run . each time it runs).
func (r *tutorial) build() {
	r.t.Helper()
	if !r.stale {
		return
	}
	r.goCmd("build", "-o", filepath.Join(r.root, "bin")+string(filepath.Separator), ".", "./handler/internal/devhost/cmd/convoy-devhost")
	r.stale = false
}

// goTest is `go test ./handler/<pkg>/`: the test binary is built from the
// project (go vet, which go test runs first, cannot read an overlay's new
// directory) and run in the package's directory of the project.
func (r *tutorial) goTest(s pageStep, pattern string) {
	r.t.Helper()
	dir := strings.Trim(strings.TrimPrefix(pattern, "./"), "/")
	if strings.Contains(dir, "...") || !strings.HasPrefix(dir, "handler/") {
		r.fatalf("%s: go test %s: the test runs one package under handler/", s, pattern)
	}
	bin := filepath.Join(r.root, "bin", filepath.Base(dir)+".test")
	r.goCmd("test", "-c", "-vet=off", "-o", bin, "./"+dir)
	cmd := exec.CommandContext(r.ctx, bin, "-test.count=1")
	cmd.Dir = filepath.Join(r.root, dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.fatalf("%s: go test %s: %v\n%s", s, pattern, err, out)
	}
	if !bytes.Contains(out, []byte("PASS")) {
		r.fatalf("%s: go test %s ran no test:\n%s", s, pattern, out)
	}
	r.did["tested"] = true
}

// convoy is `go run . ARGS`.
func (r *tutorial) convoy(s pageStep, args []string) {
	r.t.Helper()
	r.build()
	run := func() []byte {
		cmd := exec.CommandContext(r.ctx, filepath.Join(r.root, "bin", "convoy"), args...)
		cmd.Dir, cmd.Env = r.root, r.env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			r.fatalf("%s: go run . %s: %v\n%s%s", s, strings.Join(args, " "), err, out, stderr.String())
		}
		r.t.Logf("$ go run . %s\n%s", strings.Join(args, " "), bytes.TrimSpace(out))
		return out
	}
	switch args[0] {
	case "functions":
		r.checkFunctions(s, run())
	case "publish":
		r.last = run()
		var answer struct{ Outcome string }
		if json.Unmarshal(r.last, &answer) != nil || answer.Outcome == "" {
			r.fatalf("%s: go run . publish printed no outcome: %s", s, r.last)
		}
		r.did["published"] = true
	case "status":
		// Its keys once applied, as a reader runs it again until they are.
		deadline := time.Now().Add(60 * time.Second)
		for {
			r.last = run()
			err := r.compareStatus(r.last)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				r.fatalf("%s: go run . %s, 60 s after publishing: %v", s, strings.Join(args, " "), err)
			}
			time.Sleep(300 * time.Millisecond)
		}
		r.did["looked"] = true
	default:
		r.last = run()
	}
}

// checkFunctions: `convoy functions` wrote the domain's five folders and no
// other, named, triggered and routed as issue 44's table names them.
func (r *tutorial) checkFunctions(s pageStep, out []byte) {
	r.t.Helper()
	processor, setting, http := tutorialFunctions()
	want := []string{processor}
	for _, h := range http {
		want = append(want, h.name)
	}
	var wrote []string
	for _, m := range regexp.MustCompile(`wrote functions/(\w+)/function\.json \(domain (\w+)\)`).FindAllStringSubmatch(string(out), -1) {
		wrote = append(wrote, m[1])
		if !slices.Contains(want, m[1]) || m[2] != tutorialName {
			r.fatalf("%s: go run . functions wrote %s of domain %s, which is none of %s's %v", s, m[1], m[2], tutorialName, want)
		}
	}
	if len(wrote) != len(want) {
		r.fatalf("%s: go run . functions wrote %v, want %v (is the domain registered?):\n%s", s, wrote, want, out)
	}
	trigger := func(name string) map[string]any {
		var fn struct {
			Bindings []map[string]any `json:"bindings"`
		}
		if err := json.Unmarshal(r.read(filepath.Join("functions", name, "function.json")), &fn); err != nil || len(fn.Bindings) == 0 {
			r.fatalf("%s: functions/%s/function.json: %v", s, name, err)
		}
		return fn.Bindings[0]
	}
	if b := trigger(processor); b["type"] != "serviceBusTrigger" || b["queueName"] != "%"+setting+"%" || b["isSessionsEnabled"] != true {
		r.fatalf("%s: functions/%s is triggered by %v, want the queue %%%s%% with sessions", s, processor, b, setting)
	}
	for _, h := range http {
		b := trigger(h.name)
		if fmt.Sprint(b["type"], b["route"], b["methods"]) != fmt.Sprint("httpTrigger", strings.Join(h.segments, "/"), h.methods) {
			r.fatalf("%s: functions/%s is %v %v %v, want %s %v", s, h.name, b["type"], b["methods"], b["route"], strings.Join(h.segments, "/"), h.methods)
		}
	}
	r.did["functions"] = true
}

// startDevhost is `make devhost`: the Makefile's stage and run, from the
// project, on a free port (the page's 7071 may be taken).
func (r *tutorial) startDevhost(words []string) {
	r.t.Helper()
	env := r.env
	for _, w := range words {
		if w == "make" {
			break
		}
		env = append(env, w) // Name=value before make: an app setting from the environment
	}
	r.build()
	port := strconv.Itoa(freeTCPPort(r.t))
	app := filepath.Join("bin", "devhost", port)
	devhost := filepath.Join(r.root, "bin", "convoy-devhost")
	stage := exec.CommandContext(r.ctx, devhost, "stage", "-app", app, "-binary", filepath.Join("bin", "convoy"))
	stage.Dir, stage.Env = r.root, env
	if out, err := stage.CombinedOutput(); err != nil {
		r.fatalf("make devhost: stage: %v\n%s", err, out)
	}
	cmd := exec.Command(devhost, "run", "-app", app, "-port", port, "-instances", "1", "-settings", "local.settings.json")
	cmd.Dir, cmd.Env = r.root, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r.logs = &syncBuffer{}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		r.fatalf("%v", err)
	}
	cmd.Stderr = r.logs
	if err := cmd.Start(); err != nil {
		r.fatalf("make devhost: %v", err)
	}
	r.devhost = cmd
	hostRE := regexp.MustCompile(`http://127\.0\.0\.1:\d+`)
	ready, exited := make(chan struct{}), make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		var host string
		exports := map[string]string{}
		done := false
		for sc.Scan() {
			l := sc.Text()
			fmt.Fprintln(r.logs, l)
			if done {
				continue
			}
			if m := hostRE.FindString(l); m != "" && host == "" {
				host = m
			}
			if m := bannerExport.FindStringSubmatch(l); m != nil {
				exports[m[1]] = m[2]
			}
			if host != "" && exports["ServiceBusConnection"] != "" && exports["StateStorage"] != "" {
				r.host, r.exports = host, exports
				done = true
				close(ready)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		close(exited)
	}()
	select {
	case <-ready:
	case <-exited:
		r.fatalf("make devhost exited before its banner")
	case <-time.After(2 * time.Minute):
		r.fatalf("make devhost printed no banner in 2 minutes")
	}
	r.subst["http://127.0.0.1:7071"] = r.host
	r.did["devhost"] = true
}

// stop ends the emulation and what it started (its process group).
func (r *tutorial) stop() {
	if r.devhost == nil {
		return
	}
	pgid := r.devhost.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = r.devhost.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		r.t.Errorf("make devhost did not stop within 15 s of SIGTERM; killed")
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
	}
}

func (r *tutorial) get(url string) (int, []byte) {
	r.t.Helper()
	req, _ := http.NewRequestWithContext(r.ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		r.fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, body
}

// look reads a parcel's answer until it has applied what the ledger sent
// it, as a reader asks again, and compares it with the fold.
func (r *tutorial) look(url, id string) {
	r.t.Helper()
	want, ok := foldParcels(r.ledger)[id]
	if !ok {
		r.fatalf("the page looks at %s %s, which its ledger does not name", tutorialNoun, id)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, body := r.get(url)
		var got parcelState
		err := json.Unmarshal(body, &got)
		if code == http.StatusOK && err == nil && got.AppliedSeq >= want.AppliedSeq {
			if err := sameParcel(got, want); err != nil {
				r.fatalf("GET %s: %v", url, err)
			}
			r.t.Logf("GET %s\n%s", url, body)
			r.last = body
			return
		}
		if time.Now().After(deadline) {
			r.fatalf("GET %s, 60 s after publishing: %d %s", url, code, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// compareStatus: each parcel `convoy status` printed is the fold's.
func (r *tutorial) compareStatus(out []byte) error {
	want := foldParcels(r.ledger)
	dec := json.NewDecoder(bytes.NewReader(out))
	n := 0
	for dec.More() {
		var got parcelState
		if err := dec.Decode(&got); err != nil {
			return err
		}
		w, ok := want[got.ParcelID]
		if !ok {
			return fmt.Errorf("%s %q is none of the ledger's", tutorialNoun, got.ParcelID)
		}
		if err := sameParcel(got, w); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("it printed no %s: %s", tutorialNoun, out)
	}
	return nil
}

// parcelState is what the test reads of a parcel's answer.
type parcelState struct {
	ParcelID   string            `json:"parcelId"`
	Status     string            `json:"status"`
	Grams      int64             `json:"grams"`
	Hub        string            `json:"hub"`
	AppliedSeq int64             `json:"appliedSeq"`
	Parked     int               `json:"parked"`
	MissingSeq int64             `json:"missingSeq"`
	Events     []parcelEvent     `json:"events"`
	Rejected   []parcelRejection `json:"rejected"`
}

type parcelEvent struct {
	Kind string `json:"kind"`
	Hub  string `json:"hub"`
}

type parcelRejection struct {
	Seq    int64  `json:"seq"`
	Kind   string `json:"kind"`
	Reason string `json:"reason"`
}

// sameParcel compares an answer with the fold: every rejection with a
// reason, which the fold does not word.
func sameParcel(got, want parcelState) error {
	for i := range got.Rejected {
		if got.Rejected[i].Reason == "" {
			return fmt.Errorf("%s %s: rejection of seq %d has no reason", tutorialNoun, got.ParcelID, got.Rejected[i].Seq)
		}
		if i < len(want.Rejected) {
			want.Rejected[i].Reason = got.Rejected[i].Reason
		}
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("%s %s is\n  %+v\nthe fold of its ledger entries says\n  %+v", tutorialNoun, got.ParcelID, got, want)
	}
	return nil
}

// foldParcels is each parcel of the ledger's entries as they leave it, in
// ledger order (each parcel's seqs): the first event accepts it, nothing
// comes after the delivery, and an event out of place (a scan or a delivery
// before the acceptance, a second acceptance, anything after the delivery)
// is refused, consuming its seq. Written from the page's prose, apart from
// the domain's Decide.
func foldParcels(entries []map[string]any) map[string]parcelState {
	out := map[string]parcelState{}
	for _, e := range entries {
		id, _ := e["parcelId"].(string)
		kind, _ := e["kind"].(string)
		hub, _ := e["hub"].(string)
		p, ok := out[id]
		if !ok {
			p = parcelState{ParcelID: id, Status: "new", Events: []parcelEvent{}, Rejected: []parcelRejection{}}
		}
		p.AppliedSeq++
		accepted, delivered := p.Status != "new", p.Status == "delivered"
		if delivered || accepted == (kind == "accept") {
			p.Rejected = append(p.Rejected, parcelRejection{Seq: p.AppliedSeq, Kind: kind})
			out[id] = p
			continue
		}
		p.Events = append(p.Events, parcelEvent{kind, hub})
		switch kind {
		case "accept":
			grams, _ := e["grams"].(float64)
			p.Status, p.Grams = "accepted", int64(grams)
		case "scan":
			p.Hub = hub
		case "deliver":
			p.Status = "delivered"
		}
		out[id] = p
	}
	return out
}

// checkDeployFiles: the page's edits give the domain what Core Tools, the
// emulation and Bicep need, named as issue 44's table names them: its queue
// setting in local.settings.json.example, its queue in the emulator's
// configuration with the orders queue's properties, and its name after the
// others in main.bicep's domains.
func (r *tutorial) checkDeployFiles() {
	r.t.Helper()
	var local struct{ Values map[string]string }
	if err := json.Unmarshal(r.read("local.settings.json.example"), &local); err != nil {
		r.fatalf("local.settings.json.example: %v", err)
	}
	setting := tutorialTitle(tutorialName) + "QueueName"
	if got := local.Values[setting]; got != tutorialName {
		r.fatalf("local.settings.json.example sets %s to %q, want %q (the page's edit)", setting, got, tutorialName)
	}

	queues := func(data []byte) map[string]string {
		var cfg struct {
			UserConfig struct {
				Namespaces []struct {
					Queues []struct {
						Name       string
						Properties json.RawMessage
					}
				}
			}
		}
		if err := json.Unmarshal(data, &cfg); err != nil {
			r.fatalf("infra/local/servicebus-emulator-config.json: %v", err)
		}
		out := map[string]string{}
		for _, ns := range cfg.UserConfig.Namespaces {
			for _, q := range ns.Queues {
				var b bytes.Buffer
				_ = json.Compact(&b, q.Properties)
				out[q.Name] = b.String()
			}
		}
		return out
	}
	emulated := queues(r.read("infra/local/servicebus-emulator-config.json"))
	if got, ok := emulated[tutorialName]; !ok || got != emulated["orders"] {
		r.fatalf("infra/local/servicebus-emulator-config.json: queue %s: %v, with properties %s; want the orders queue's, %s", tutorialName, ok, got, emulated["orders"])
	}

	deployed := func(data []byte) []string {
		m := regexp.MustCompile(`(?s)\nparam domains array = \[(.*?)\]`).FindSubmatch(data)
		if m == nil {
			r.fatalf("infra/main.bicep has no param domains array = […]")
		}
		var names []string
		for _, n := range regexp.MustCompile(`'([^']*)'`).FindAllSubmatch(m[1], -1) {
			names = append(names, string(n[1]))
		}
		return names
	}
	was, _ := os.ReadFile(filepath.Join(r.repo, "infra", "main.bicep"))
	if got, want := deployed(r.read("infra/main.bicep")), append(deployed(was), tutorialName); !slices.Equal(got, want) {
		r.fatalf("infra/main.bicep deploys the domains %v after the page's edit, want %v", got, want)
	}
}

// checkLayout: after the page's edit of docs/architecture.md the code keeps
// to it as TestArchitecture and TestEngineImportsNoDomain hold the
// repository to it: the new package has a row allowing what it imports,
// handler/domains's row allows the package, and it is a domain package.
func (r *tutorial) checkLayout() {
	r.t.Helper()
	page := string(r.read("docs/architecture.md"))
	pkg := "handler/" + tutorialName
	allowed := map[string][]string{}
	for _, line := range strings.Split(page, "\n") {
		if m := rowPackage.FindStringSubmatch(line); m != nil {
			cells := strings.Split(strings.Trim(line, "| "), " | ")
			for _, b := range backticked.FindAllStringSubmatch(cells[len(cells)-1], -1) {
				allowed[m[1]] = append(allowed[m[1]], b[1])
			}
		}
	}
	cmd := exec.CommandContext(r.ctx, "go", "list", "-overlay", r.overlay(), "-json=ImportPath,Imports", "./"+pkg, "./handler/domains")
	cmd.Dir = r.repo
	out, err := cmd.Output()
	if err != nil {
		r.fatalf("go list %s: %v", pkg, err)
	}
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			r.fatalf("go list: %v", err)
		}
		for _, imp := range p.Imports {
			if own, ok := strings.CutPrefix(imp, module+"/"); ok && !slices.Contains(allowed[relative(p.ImportPath)], own) {
				r.fatalf("docs/architecture.md after the page's edit: %s imports %s, which its row does not allow (%v)", relative(p.ImportPath), own, allowed[relative(p.ImportPath)])
			}
		}
	}
	if !slices.Contains(namedList(r.t, page, "Domain packages"), pkg) {
		r.fatalf("docs/architecture.md after the page's edit does not list %s among the domain packages", pkg)
	}
}
