// Command mutants is the mutation check of the healing path (make mutants,
// docs/testing.md "Mutation check"): each mutant of mutants.txt is one line
// of the code changed as a tired engineer might change it (or a few: a fix
// reverted whole), compiled in with
// go test -overlay (the tree is never touched, so no mutant can be left in
// it), and run against the healing simulation first, then, only if it
// survives, the healing path's unit tests. It prints what killed each one,
// and fails when one survives, or when a mutant's line is no longer in its
// file (the code moved: the list is stale) or does not build.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Mutant is one entry of the list: one mistake, made by one edit (most)
// or a few (a fix reverted whole).
type Mutant struct {
	ID, Why string
	Edits   []Edit
}

// Edit is one change a mutant makes.
type Edit struct {
	File string
	// At, if set, is a substring found once in File, and From is taken at
	// its first place after it; else From must be found once in File.
	At       string
	From, To string // a substring of one line of File, and what replaces it
	line     int    // where From is, for the table
	offset   int    // where From is, in bytes
}

// The packages whose tests run after the simulation: the healing and
// applying paths' unit tests (no server packages).
var (
	simPackage   = "./handler/internal/healsim"
	unitPackages = []string{"./handler/convoy", "./handler/heal", "./handler/replay", "./handler/operator", "./handler/internal/memstore", "./handler"}
)

func main() {
	list := flag.String("list", "handler/internal/mutants/mutants.txt", "the mutants")
	only := flag.String("only", "", "run only these mutants (comma-separated ids)")
	jobs := flag.Int("jobs", 1, "mutants run at once")
	seeds := flag.Int("seeds", 0, "seeds the simulation runs (0: its default)")
	timeout := flag.Duration("timeout", 5*time.Minute, "the go test timeout of each run (a mutant that hangs is killed by it)")
	check := flag.Bool("n", false, "only check that every mutant's original is found (the list is current)")
	flag.Parse()

	if _, err := os.Stat("go.mod"); err != nil {
		fmt.Fprintln(os.Stderr, "run it from the repository's root (make mutants)")
		os.Exit(2)
	}
	ms, err := load(".", *list)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if *only != "" {
		ms = selectIDs(ms, strings.Split(*only, ","))
	}
	if *check {
		fmt.Printf("%d mutants, every original found\n", len(ms))
		return
	}
	tmp, err := os.MkdirTemp("", "convoy-mutants-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer os.RemoveAll(tmp)

	results := make([]result, len(ms))
	work := make(chan int)
	var wg sync.WaitGroup
	for range max(*jobs, 1) {
		wg.Go(func() {
			for i := range work {
				start := time.Now()
				results[i] = run(ms[i], filepath.Join(tmp, ms[i].ID), *seeds, *timeout)
				fmt.Fprintf(os.Stderr, "%-28s %-9s %s (%s)\n", ms[i].ID, results[i].verdict, results[i].by, time.Since(start).Round(time.Second))
			}
		})
	}
	for i := range ms {
		work <- i
	}
	close(work)
	wg.Wait()

	counts := map[string]int{}
	fmt.Println("| mutant | where | killed by |")
	fmt.Println("|---|---|---|")
	for i, m := range ms {
		r := results[i]
		counts[r.verdict]++
		fmt.Printf("| `%s`: %s | `%s` | %s: %s |\n", m.ID, m.Why, m.where(), r.verdict, r.by)
	}
	fmt.Printf("\n%d mutants: %d killed by the simulation, %d by the unit tests only, %d survived, %d did not build\n",
		len(ms), counts[bySim], counts[byUnit], counts[survived], counts[broken])
	if counts[survived]+counts[broken] > 0 {
		os.Exit(1)
	}
}

// parse reads the list: blocks of
//
//	== id: what the mistake is
//	in path/to/file.go
//	at a text found once in the file (optional: From is the first after it)
//	- the original text (a substring of one line, found once in the file)
//	+ what replaces it (nothing: it is deleted)
//
// with blank lines and lines starting with # between them. A mistake of
// several edits (a fix reverted whole) has several "-"/"+" pairs, each in
// the file of the last "in" line, each after its own "at" line if any.
func parse(path string) ([]Mutant, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ms []Mutant
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	n := 0
	var file, at string // of the edit the next "-" line begins
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		bad := func(why string) error { return fmt.Errorf("%s:%d: %s", path, n, why) }
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "=="):
			id, why, ok := strings.Cut(strings.TrimSpace(line[2:]), ":")
			if !ok || strings.ContainsAny(id, " \t") || seen[id] {
				return nil, bad("want \"== id: what the mistake is\", with an id used once")
			}
			seen[id] = true
			ms = append(ms, Mutant{ID: id, Why: strings.TrimSpace(why)})
			file, at = "", ""
		case len(ms) == 0:
			return nil, bad("a line before the first \"== id: ...\"")
		case strings.HasPrefix(line, "in "):
			file = strings.TrimSpace(line[3:])
		case strings.HasPrefix(line, "at "):
			at = strings.TrimSpace(line[3:])
		case strings.HasPrefix(line, "-"):
			m := &ms[len(ms)-1]
			m.Edits = append(m.Edits, Edit{File: file, At: at, From: strings.TrimSpace(line[1:])})
			at = ""
		case strings.HasPrefix(line, "+"):
			m := &ms[len(ms)-1]
			if len(m.Edits) == 0 {
				return nil, bad("a \"+\" line before its \"-\" line")
			}
			m.Edits[len(m.Edits)-1].To = strings.TrimSpace(line[1:])
		default:
			return nil, bad("want \"in file\", \"- original\" or \"+ replacement\"")
		}
	}
	for _, m := range ms {
		if len(m.Edits) == 0 {
			return nil, fmt.Errorf("%s: mutant %s makes no edit", path, m.ID)
		}
		for _, e := range m.Edits {
			if e.File == "" || e.From == "" || e.From == e.To || strings.Contains(e.From, "\n") {
				return nil, fmt.Errorf("%s: mutant %s needs a file, an original and a different replacement for each edit", path, m.ID)
			}
		}
	}
	return ms, sc.Err()
}

// load parses the list at root/list and locates every mutant's edits in
// the files under root: the error says which originals are no longer found
// (the list is stale).
func load(root, list string) ([]Mutant, error) {
	if !filepath.IsAbs(list) {
		list = filepath.Join(root, list)
	}
	ms, err := parse(list)
	if err != nil {
		return nil, err
	}
	var stale []error
	for i := range ms {
		if err := ms[i].locate(root); err != nil {
			stale = append(stale, err)
		}
	}
	if len(stale) > 0 {
		return nil, fmt.Errorf("%w\nthe mutant list is stale: update %s", errors.Join(stale...), list)
	}
	return ms, nil
}

func selectIDs(ms []Mutant, ids []string) []Mutant {
	var out []Mutant
	for _, m := range ms {
		for _, id := range ids {
			if m.ID == strings.TrimSpace(id) {
				out = append(out, m)
			}
		}
	}
	return out
}

// locate finds each edit's From in its file under root.
func (m *Mutant) locate(root string) error {
	var errs []error
	for i := range m.Edits {
		if err := m.Edits[i].locate(root); err != nil {
			errs = append(errs, fmt.Errorf("mutant %s: %w", m.ID, err))
		}
	}
	for i, e := range m.Edits {
		for _, o := range m.Edits[:i] {
			if e.File == o.File && e.offset < o.offset+len(o.From) && o.offset < e.offset+len(e.From) {
				errs = append(errs, fmt.Errorf("mutant %s: two edits overlap in %s", m.ID, e.File))
			}
		}
	}
	return errors.Join(errs...)
}

// locate finds From in File: once in it, or first after At (once in it).
func (e *Edit) locate(root string) error {
	src, err := os.ReadFile(filepath.Join(root, e.File))
	if err != nil {
		return err
	}
	s, from := string(src), 0
	once := func(what string) error {
		switch n := strings.Count(s, what); {
		case n == 0:
			return fmt.Errorf("%q is no longer in %s", what, e.File)
		case n > 1:
			return fmt.Errorf("%q is in %s %d times: make it unique (or add an \"at\" line)", what, e.File, n)
		}
		return nil
	}
	if e.At != "" {
		if err := once(e.At); err != nil {
			return err
		}
		from = strings.Index(s, e.At)
	} else if err := once(e.From); err != nil {
		return err
	}
	i := strings.Index(s[from:], e.From)
	if i < 0 {
		return fmt.Errorf("%q is no longer in %s after %q", e.From, e.File, e.At)
	}
	e.offset = from + i
	e.line = 1 + strings.Count(s[:e.offset], "\n")
	return nil
}

// where is the place of the mutant's first edit, for the table.
func (m Mutant) where() string {
	e := m.Edits[0]
	s := fmt.Sprintf("%s:%d", e.File, e.line)
	if len(m.Edits) > 1 {
		s += fmt.Sprintf(" and %d more", len(m.Edits)-1)
	}
	return s
}

// Verdicts.
const (
	bySim    = "simulation"
	byUnit   = "unit"
	survived = "SURVIVED"
	broken   = "BROKEN"
)

type result struct{ verdict, by string }

// overlay writes the mutated files into dir and the overlay that
// compiles them in, and returns the overlay's path.
func overlay(m Mutant, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	byFile := map[string][]Edit{}
	for _, e := range m.Edits {
		byFile[e.File] = append(byFile[e.File], e)
	}
	replace := map[string]string{}
	for file, edits := range byFile {
		src, err := os.ReadFile(file)
		if err != nil {
			return "", err
		}
		abs, err := filepath.Abs(file)
		if err != nil {
			return "", err
		}
		text := string(src)
		// From the last edit back, so that each offset still holds.
		slices.SortFunc(edits, func(a, b Edit) int { return b.offset - a.offset })
		for _, e := range edits {
			if e.offset+len(e.From) > len(text) || text[e.offset:e.offset+len(e.From)] != e.From {
				return "", fmt.Errorf("%s changed during the run", file)
			}
			text = text[:e.offset] + e.To + text[e.offset+len(e.From):]
		}
		mutated := filepath.Join(dir, fmt.Sprintf("%d-%s", len(replace), filepath.Base(file)))
		if err := os.WriteFile(mutated, []byte(text), 0o644); err != nil {
			return "", err
		}
		replace[abs] = mutated
	}
	raw, _ := json.Marshal(map[string]map[string]string{"Replace": replace})
	path := filepath.Join(dir, "overlay.json")
	return path, os.WriteFile(path, raw, 0o644)
}

// run compiles m in through an overlay and runs the simulation, then the
// unit tests.
func run(m Mutant, dir string, seeds int, timeout time.Duration) result {
	overlay, err := overlay(m, dir)
	if err != nil {
		return result{broken, err.Error()}
	}
	args := []string{"test", "-overlay", overlay, "-timeout", timeout.String(), simPackage}
	if seeds > 0 {
		args = append(args, "-args", fmt.Sprintf("-seeds=%d", seeds))
	}
	out, failed := goTest(args, timeout)
	if why, ok := buildFailure(out); ok {
		return result{broken, why}
	}
	if failed {
		return result{bySim, simFailure(out)}
	}
	out, failed = goTest(append([]string{"test", "-overlay", overlay, "-short", "-timeout", timeout.String()}, unitPackages...), timeout)
	if why, ok := buildFailure(out); ok {
		return result{broken, why}
	}
	if failed {
		return result{byUnit, unitFailure(out)}
	}
	return result{survived, "neither the simulation nor the unit tests"}
}

// goTest runs go with args; failed: it exited non-zero.
func goTest(args []string, timeout time.Duration) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout+time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err != nil
}

var (
	compileError = regexp.MustCompile(`(?m)^(\S+\.go:\d+:\d+: .*)$`)
	seedFailure  = regexp.MustCompile(`seed (\d+): (.*)`)
	panicLine    = regexp.MustCompile(`(?m)^panic: (.*)$`)
	failedTest   = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)
)

// buildFailure is the first compile error, when the mutant does not build.
func buildFailure(out string) (string, bool) {
	if !strings.Contains(out, "[build failed]") && !strings.Contains(out, "[setup failed]") {
		return "", false
	}
	if m := compileError.FindStringSubmatch(out); m != nil {
		return "does not build: " + m[1], true
	}
	return "does not build", true
}

// simFailure is the failing seed and the first line of what it found.
func simFailure(out string) string {
	if m := seedFailure.FindStringSubmatch(out); m != nil {
		return fmt.Sprintf("seed %s: %s", m[1], clip(m[2]))
	}
	if m := panicLine.FindStringSubmatch(out); m != nil {
		return "panic: " + clip(m[1])
	}
	return "failed: " + clip(lastLine(out))
}

// unitFailure names the failing tests (the first few).
func unitFailure(out string) string {
	var names []string
	for _, m := range failedTest.FindAllStringSubmatch(out, -1) {
		// A subtest's parent fails with it: keep the most precise name.
		if n := len(names); n > 0 && strings.HasPrefix(m[1], names[n-1]+"/") {
			names[n-1] = m[1]
			continue
		}
		names = append(names, m[1])
	}
	if len(names) == 0 {
		if m := panicLine.FindStringSubmatch(out); m != nil {
			return "panic: " + clip(m[1])
		}
		return "failed: " + clip(lastLine(out))
	}
	if len(names) > 3 {
		names = append(names[:3], fmt.Sprintf("and %d more", len(names)-3))
	}
	return strings.Join(names, ", ")
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func clip(s string) string {
	s = strings.TrimSpace(strings.ReplaceAll(s, "|", "/"))
	if len(s) > 140 {
		return s[:140] + "…"
	}
	return s
}
