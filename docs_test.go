package main

// The documentation checked against the repository (issue 26): every relative
// link of README.md, CHANGELOG.md and docs/*.md resolves to a file, and its
// #anchor to a heading of that file as GitHub slugs it; every command the
// pages show is one this repository has: make targets of the Makefile,
// convoy subcommands (and their --flags) of main.go and commands.go, curl
// URLs that are routes of functions/*/function.json with their methods.
// walkthrough_test.go runs the README's local walkthrough itself.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
)

// docPages are the pages the checks cover.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md", "CHANGELOG.md"}, pages...)
}

func readPage(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fence is one fenced code block of a page.
type fence struct {
	lang string
	line int // of its first content line, 1-based
	text string
}

// splitFences separates a page's fenced code blocks from its prose (the
// prose keeps its line count, with the blocks blanked).
func splitFences(page string) (prose string, fences []fence) {
	var out []string
	var cur *fence
	for i, l := range strings.Split(page, "\n") {
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "```") {
			if cur == nil {
				cur = &fence{lang: strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), line: i + 2}
			} else {
				fences = append(fences, *cur)
				cur = nil
			}
			out = append(out, "")
			continue
		}
		if cur != nil {
			cur.text += l + "\n"
			out = append(out, "")
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n"), fences
}

var (
	linkRE       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRE    = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
	inlineLinkRE = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	codeSpanRE   = regexp.MustCompile("`([^`\n]+)`")
)

// anchors are the ids GitHub gives a page's headings: the heading's text
// (link syntax reduced to its text) in lower case, every character that is
// not a letter, digit, space, hyphen or underscore removed, spaces turned
// into hyphens; a repeated id gets -1, -2, ….
func anchors(page string) map[string]bool {
	prose, _ := splitFences(page)
	seen := map[string]int{}
	ids := map[string]bool{}
	for _, m := range headingRE.FindAllStringSubmatch(prose, -1) {
		id := slug(m[1])
		if n := seen[id]; n > 0 {
			ids[fmt.Sprintf("%s-%d", id, n)] = true
		} else {
			ids[id] = true
		}
		seen[id]++
	}
	return ids
}

func slug(heading string) string {
	heading = inlineLinkRE.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Ledger document (input of `LedgerIngest` and `LedgerUpload`)": "ledger-document-input-of-ledgeringest-and-ledgerupload",
		"Try it locally: publish, look, break, heal":                   "try-it-locally-publish-look-break-heal",
		"host.json choices": "hostjson-choices",
		"Service Bus on the wire (AMQP 1.0), as the emulation serves it": "service-bus-on-the-wire-amqp-10-as-the-emulation-serves-it",
		"What Bicep creates, and why":                                    "what-bicep-creates-and-why",
		"convoy — the Sequential Convoy pattern on Azure, in Go":         "convoy--the-sequential-convoy-pattern-on-azure-in-go",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// TestDocsLinks: every relative link resolves, anchors included.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	checked := 0
	for _, page := range docPages(t) {
		prose, _ := splitFences(readPage(t, page))
		for n, line := range strings.Split(prose, "\n") {
			// A link may be split over two lines only in its text, never in its target.
			for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				file, anchor, _ := strings.Cut(target, "#")
				where := fmt.Sprintf("%s:%d: link %s", page, n+1, target)
				resolved := page
				if file != "" {
					resolved = filepath.Join(filepath.Dir(page), file)
					if _, err := os.Stat(resolved); err != nil {
						t.Errorf("%s: %s does not exist", where, resolved)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(resolved, ".md") {
					t.Errorf("%s: an anchor into a file that is not markdown", where)
					continue
				}
				if !anchors(readPage(t, resolved))[anchor] {
					t.Errorf("%s: %s has no heading with the id %q", where, resolved, anchor)
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d relative links found: the link pattern is broken", checked)
	}
	// Every page is found from the README.
	linked := map[string]bool{}
	for _, m := range linkRE.FindAllStringSubmatch(readPage(t, "README.md"), -1) {
		file, _, _ := strings.Cut(m[1], "#")
		linked[filepath.Clean(file)] = true
	}
	for _, page := range docPages(t)[1:] {
		if !linked[page] {
			t.Errorf("README.md links nowhere to %s: add it to its Documentation table", page)
		}
	}
}

// shown is one command a page shows: a line of a shell code block, or a
// code span that starts with a command this repository provides.
type shown struct {
	where string
	cmd   string
	span  bool // a code span in prose, not a line of a code block
}

var commandStart = regexp.MustCompile(`^(make|convoy|go run \.|bin/convoy|curl)(\s|$)`)

// commandsShown lists the commands of every page.
func commandsShown(t *testing.T) []shown {
	t.Helper()
	var all []shown
	for _, page := range docPages(t) {
		prose, fences := splitFences(readPage(t, page))
		for _, f := range fences {
			if f.lang != "sh" && f.lang != "bash" && f.lang != "shell" {
				continue
			}
			for i, l := range shellLines(f.text) {
				all = append(all, shown{fmt.Sprintf("%s:%d", page, f.line+i), l, false})
			}
		}
		for n, line := range strings.Split(prose, "\n") {
			for _, m := range codeSpanRE.FindAllStringSubmatch(line, -1) {
				span := strings.TrimSpace(m[1])
				if strings.Contains(span, " ") && commandStart.MatchString(span) {
					all = append(all, shown{fmt.Sprintf("%s:%d", page, n+1), span, true})
				}
			}
		}
	}
	return all
}

// shellLines are a shell block's lines without comments, blank lines and a
// "$ " prompt; a line ending in a backslash continues on the next. The
// result keeps one entry per source line (continuations joined onto the
// first), so that an index is a line offset.
func shellLines(block string) []string {
	var out []string
	pending := ""
	for _, l := range strings.Split(strings.TrimRight(block, "\n"), "\n") {
		l = strings.TrimPrefix(strings.TrimSpace(l), "$ ")
		if i := commentStart(l); i >= 0 {
			l = strings.TrimSpace(l[:i])
		}
		if strings.HasSuffix(l, "\\") {
			pending += strings.TrimSuffix(l, "\\") + " "
			out = append(out, "")
			continue
		}
		out = append(out, pending+l)
		pending = ""
	}
	return out
}

// commentStart is the index of a shell comment's # in l, or -1 (a # inside
// quotes, or within a word, starts none).
func commentStart(l string) int {
	var quote rune
	for i, r := range l {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t'):
			return i
		}
	}
	return -1
}

// makeTargets are the Makefile's targets.
func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Za-z][A-Za-z0-9_.-]*(?:\s+[A-Za-z][A-Za-z0-9_.-]*)*)\s*:([^=]|$)`).FindAllStringSubmatch(readPage(t, "Makefile"), -1) {
		for _, name := range strings.Fields(m[1]) {
			targets[name] = true
		}
	}
	return targets
}

// convoySubcommands are the commands main.go dispatches ("case" labels of
// its switch on the command word).
func convoySubcommands(t *testing.T) map[string]bool {
	t.Helper()
	subs := map[string]bool{"help": true}
	for _, m := range regexp.MustCompile(`(?m)^\s*case ((?:"[a-z-]+",?\s*)+):`).FindAllStringSubmatch(readPage(t, "main.go"), -1) {
		for _, s := range regexp.MustCompile(`"([a-z-]+)"`).FindAllStringSubmatch(m[1], -1) {
			subs[s[1]] = true
		}
	}
	return subs
}

// route is one HTTP function's route and methods.
type route struct {
	name     string
	segments []string
	methods  []string
}

func httpRoutes(t *testing.T) []route {
	t.Helper()
	files, err := filepath.Glob("functions/*/function.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no functions/*/function.json: %v", err)
	}
	var routes []route
	for _, f := range files {
		var fn struct {
			Bindings []struct {
				Type    string   `json:"type"`
				Route   string   `json:"route"`
				Methods []string `json:"methods"`
			} `json:"bindings"`
		}
		if err := json.Unmarshal([]byte(readPage(t, f)), &fn); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, b := range fn.Bindings {
			if b.Type == "httpTrigger" {
				name := filepath.Base(filepath.Dir(f))
				r := b.Route
				if r == "" {
					r = name
				}
				routes = append(routes, route{name, strings.Split(r, "/"), b.Methods})
			}
		}
	}
	return routes
}

// matchRoute finds the function serving method and path (below /api/): a
// {param} of the route matches any segment, and so does a <placeholder>
// of the page.
func matchRoute(routes []route, method, path string) (string, bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for _, r := range routes {
		if len(r.segments) != len(segs) {
			continue
		}
		ok := true
		for i, s := range r.segments {
			if !strings.HasPrefix(s, "{") && !strings.HasPrefix(segs[i], "<") && !strings.EqualFold(s, segs[i]) {
				ok = false
				break
			}
		}
		if ok && (len(r.methods) == 0 || slices.ContainsFunc(r.methods, func(m string) bool { return strings.EqualFold(m, method) })) {
			return r.name, true
		}
	}
	return "", false
}

// curlRequest reads the method and URL of a curl command line.
func curlRequest(words []string) (method, rawURL string) {
	method = "GET"
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch {
		case w == "-X" || w == "--request":
			if i+1 < len(words) {
				method = strings.ToUpper(words[i+1])
				i++
			}
		case w == "-d" || w == "--data" || w == "--data-binary" || w == "--data-raw" || w == "-F":
			if method == "GET" {
				method = "POST"
			}
			i++
		case strings.HasPrefix(w, "http://") || strings.HasPrefix(w, "https://"):
			rawURL = w
		}
	}
	return method, rawURL
}

// shellWords splits a command line into words, honouring single and double
// quotes (no expansion: $(…) stays inside its word).
func shellWords(l string) []string {
	var words []string
	var cur strings.Builder
	var quote rune
	inWord := false
	depth := 0
	for _, r := range l {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '(':
			depth++
			cur.WriteRune(r)
			inWord = true
		case r == ')':
			depth--
			cur.WriteRune(r)
		case (r == ' ' || r == '\t') && depth == 0:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// TestDocsCommands: every command shown is one the repository has.
func TestDocsCommands(t *testing.T) {
	t.Parallel()
	targets := makeTargets(t)
	subs := convoySubcommands(t)
	routes := httpRoutes(t)
	counts := map[string]int{}
	flags := map[string][]flagShown{} // per convoy subcommand shown, the flags shown with it
	for _, c := range commandsShown(t) {
		// A line may chain commands; each is checked.
		for _, part := range regexp.MustCompile(`&&|\|\||;|\|`).Split(c.cmd, -1) {
			words := shellWords(strings.TrimSpace(part))
			for len(words) > 0 && regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(words[0]) {
				words = words[1:] // VAR=value before the command
			}
			if len(words) == 0 {
				continue
			}
			switch {
			case words[0] == "make":
				counts["make"]++
				for _, w := range words[1:] {
					if strings.Contains(w, "=") || strings.HasPrefix(w, "-") {
						continue
					}
					if !targets[w] {
						t.Errorf("%s: %q: the Makefile has no target %q", c.where, c.cmd, w)
					}
				}
			case words[0] == "convoy" || words[0] == "bin/convoy" || (len(words) > 2 && words[0] == "go" && words[1] == "run" && words[2] == "."):
				counts["convoy"]++
				args := words[1:]
				if words[0] == "go" {
					args = words[3:]
				}
				if len(args) == 0 {
					continue // serve
				}
				if !subs[args[0]] {
					t.Errorf("%s: %q: convoy has no subcommand %q (main.go)", c.where, c.cmd, args[0])
					continue
				}
				for _, a := range args[1:] {
					if name, ok := strings.CutPrefix(a, "--"); ok && name != "" {
						name, _, _ = strings.Cut(name, "=")
						flags[args[0]] = append(flags[args[0]], flagShown{"--" + name, c.where})
					}
				}
				if _, ok := flags[args[0]]; !ok {
					flags[args[0]] = nil
				}
			case words[0] == "curl":
				counts["curl"]++
				method, raw := curlRequest(words[1:])
				if raw == "" && c.span {
					continue // an option shown in prose ("curl --data-binary @file")
				}
				if raw == "" {
					t.Errorf("%s: %q: no URL", c.where, c.cmd)
					continue
				}
				u, err := url.Parse(strings.ReplaceAll(strings.ReplaceAll(raw, "{", "%7B"), "}", "%7D"))
				if err != nil {
					t.Errorf("%s: %q: %v", c.where, c.cmd, err)
					continue
				}
				path, ok := strings.CutPrefix(u.EscapedPath(), "/api/")
				if !ok {
					t.Errorf("%s: %q: not a function's URL (/api/…)", c.where, c.cmd)
					continue
				}
				path, _ = url.PathUnescape(path)
				served := routes
				if strings.HasPrefix(c.where, yourRulesPage+":") {
					// The tutorial's domain, whose folders the reader writes.
					_, _, tutorial := tutorialFunctions()
					served = append(slices.Clone(routes), tutorial...)
				}
				if _, ok := matchRoute(served, method, path); !ok {
					t.Errorf("%s: %q: no function serves %s /api/%s (functions/*/function.json)", c.where, c.cmd, method, path)
				}
			}
		}
	}
	checkConvoyHelp(t, flags)
	t.Logf("commands checked: %v", counts)
	if counts["make"] < 5 || counts["convoy"] < 3 || counts["curl"] < 3 {
		t.Fatalf("too few commands found (%v): the extraction is broken", counts)
	}
}

// flagShown is a --flag a page shows with a convoy subcommand.
type flagShown struct{ flag, where string }

// checkConvoyHelp runs `convoy <sub> -h` for every subcommand the pages
// show (help starts nothing and exits 0) and finds each flag shown with it
// in that help.
func checkConvoyHelp(t *testing.T, flags map[string][]flagShown) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "convoy")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for sub, shown := range flags {
		if sub == "help" {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := exec.CommandContext(ctx, bin, sub, "-h").CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("convoy %s -h: %v (help exits 0 and starts nothing)\n%s", sub, err, out)
			continue
		}
		for _, f := range shown {
			if !regexp.MustCompile(regexp.QuoteMeta(f.flag) + `\b`).Match(out) {
				t.Errorf("%s: convoy %s %s: its help does not name %s", f.where, sub, f.flag, f.flag)
			}
		}
	}
}
