package main

// The README's local walkthrough, done as a newcomer does it (issue 26, "Done
// when"): a fresh clone of this repository, then the commands of the
// README's "Try it locally" section, in order, taken from its code blocks so
// that the README cannot drift from what works. `make devhost` runs in the
// background until the end; every other line runs with bash in the clone.
// The test only substitutes the ports the emulation actually took for the
// ones the README shows (another run may hold 7071 or 5672; PORT= goes to
// every make line when the Makefile takes it), exports the connection
// strings the banner prints to copy where the README exports them (as the
// README tells the reader to: they carry the ports the run took), and for a
// README placeholder such as practice-poison-<time> what the latest command
// printed after that prefix, as a reader copies it. At the end it waits
// until every key the heal commands name (an order, an account: the domain
// is the route's, /api/accounts/…, or the command's --domain) has no gap,
// nothing parked and is off its domain's blocked list, and the walkthrough
// must heal a key of every registered domain. Should the README have no
// Break step, the test breaks the order its heal commands name itself, as
// the end-to-end tests do, and waits for it to be listed as blocked. It
// logs the time from the clone to the healed keys, step by step (a logged
// figure, not a timed assertion: a cold build cache alone can take a
// minute).
//
// The clone reuses the Azurite already installed in .tools/ (AZURITE_TABLE,
// which the Makefile exports, or .tools/ here) by a symlink, so that make
// does not install it again.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/convoy-dev/convoy/handler/domains"
	"github.com/convoy-dev/convoy/handler/settings"
)

// walkthroughHeading is the README section the test runs.
const walkthroughHeading = "## Try it locally: publish, look, break, heal"

// step is one code block of the walkthrough with the step it belongs to: the
// last bold word of the prose before it (**Publish**, **Break**, …).
type step struct {
	name  string
	lines []string
}

// walkthroughSteps reads the walkthrough's shell blocks from a README.
func walkthroughSteps(readme string) ([]step, error) {
	_, section, ok := strings.Cut(readme, walkthroughHeading+"\n")
	if !ok {
		return nil, fmt.Errorf("README has no section %q", walkthroughHeading)
	}
	if i := regexp.MustCompile(`(?m)^## `).FindStringIndex(section); i != nil {
		section = section[:i[0]]
	}
	prose, fences := splitFences(section)
	lines := strings.Split(prose, "\n")
	bold := regexp.MustCompile(`\*\*([A-Z][a-z]+)\*\*`)
	var steps []step
	for _, f := range fences {
		if f.lang != "sh" {
			continue
		}
		name := ""
		for _, l := range lines[:f.line-2] {
			if m := bold.FindAllStringSubmatch(l, -1); m != nil {
				name = m[len(m)-1][1]
			}
		}
		var run []string
		for _, l := range shellLines(f.text) {
			if l != "" {
				run = append(run, l)
			}
		}
		steps = append(steps, step{name, run})
	}
	return steps, nil
}

func TestDocsWalkthroughSteps(t *testing.T) {
	t.Parallel()
	steps, err := walkthroughSteps(readPage(t, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range steps {
		names[s.name] = true
	}
	if len(steps[0].lines) != 1 || !devhostLine.MatchString(steps[0].lines[0]) {
		t.Errorf("the walkthrough does not start with make devhost: %+v", steps[0])
	}
	for _, want := range []string{"Publish", "Look", "Break", "Heal"} {
		if !names[want] {
			t.Errorf("the walkthrough has no %s step with a code block: %+v", want, steps)
		}
	}
	var healed []healedKey
	for _, s := range steps {
		for _, l := range s.lines {
			if k, ok := healTargetOf(l); ok && s.name == "Heal" {
				healed = append(healed, k)
			}
		}
	}
	if missing := unhealedDomains(healed); len(missing) > 0 {
		t.Errorf("the walkthrough's Heal steps heal no key of %v (they heal %v)", missing, healed)
	}
}

// unhealedDomains are the registered domains none of healed belongs to:
// the walkthrough shows every domain broken and healed.
func unhealedDomains(healed []healedKey) []string {
	var missing []string
	for _, d := range domains.All {
		if !slices.ContainsFunc(healed, func(k healedKey) bool { return k.domain == d.Name() }) {
			missing = append(missing, d.Name())
		}
	}
	return missing
}

// devhostLine is the walkthrough's make devhost, settings before it or not.
var devhostLine = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*=\S*\s+)*make devhost(\s|$)`)

// publishLine is a convoy publish command.
var publishLine = regexp.MustCompile(`^(convoy|go run \.|bin/convoy) publish `)

// healTarget is the key a heal command names: its route's domain and id,
// or its command's --domain (none: the default domain) and id.
var healTarget = regexp.MustCompile(`/api/([a-z]+)/([A-Za-z0-9._-]+)/(?:replay|skip)|(?:convoy|go run \.) (?:replay|skip)(?: --domain[ =]([a-z]+))? ([A-Za-z0-9._-]+)`)

// healedKey is a key of a domain (its Name) the heal commands name.
type healedKey struct{ domain, id string }

func (k healedKey) String() string { return k.domain + "/" + k.id }

// healTargetOf is the key the heal command l names, if it names one.
func healTargetOf(l string) (healedKey, bool) {
	m := healTarget.FindStringSubmatch(l)
	if m == nil {
		return healedKey{}, false
	}
	k := healedKey{domain: m[1] + m[3], id: m[2] + m[4]}
	if k.domain == "" {
		k.domain = domains.All[0].Name()
	}
	return k, true
}

// idName is the name of a key's id in domain's answers ("orderId").
func idName(t *testing.T, domain string) string {
	for _, d := range domains.All {
		if d.Name() == domain {
			return d.Noun() + "Id"
		}
	}
	t.Fatalf("the walkthrough names domain %q, which is not registered", domain)
	return ""
}

func TestDocsWalkthrough(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("the walkthrough test clones the repository: git is needed")
	}
	tools := toolsDir(t)
	// Bounds, not timings: on a cold build cache beside the whole suite,
	// the clone's first make devhost compiles for minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	began := time.Now()
	clone := filepath.Join(t.TempDir(), "convoy")
	if out, err := exec.CommandContext(ctx, "git", "clone", "--quiet", ".", clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	head, _ := exec.Command("git", "-C", clone, "log", "-1", "--format=%h %s").Output()
	t.Logf("cloned %s", strings.TrimSpace(string(head)))
	if err := os.Symlink(tools, filepath.Join(clone, ".tools")); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(clone, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := walkthroughSteps(string(readme))
	if err != nil {
		t.Fatal(err)
	}

	w := &walker{t: t, ctx: ctx, dir: clone, env: freshEnv(), subst: map[string]string{}, copied: map[string]string{}}
	defer w.stop()
	broke := false
	for _, s := range steps {
		if s.name == "Break" {
			broke = true
		}
		if s.name == "Heal" && !broke {
			// No recipe in the README to break an order with: break the
			// order its heal commands name, as the end-to-end tests do (a
			// message that cannot be read), and wait until it is listed.
			for _, l := range s.lines {
				if k, ok := healTargetOf(l); ok {
					w.breakOrder(k)
					w.waitBlocked(k)
					break
				}
			}
			broke = true
		}
		for _, l := range s.lines {
			w.run(s.name, l)
		}
	}
	if missing := unhealedDomains(w.healed); len(missing) > 0 {
		t.Fatalf("the walkthrough's heal commands heal no key of %v (they heal %v)", missing, w.healed)
	}
	for _, k := range w.healed {
		w.waitHealed(k)
	}
	healed := time.Now()
	t.Logf("clone to healed blocked keys %v: %.1f s\n%s", w.healed, time.Since(began).Seconds(), strings.Join(w.timings, "\n"))
	// Healed means nothing left behind: no dead letter in any domain's
	// queue (the replayed one completed, the skipped ones settled by the
	// skip) and so no alert.
	for _, d := range domains.All {
		if left := w.peekDeadLetters(settings.DefaultQueue(d)); len(left) != 0 {
			w.fatalf("the walkthrough left %d dead letters in the %s queue: %v", len(left), settings.DefaultQueue(d), left)
		}
		w.waitNoPermanentDeadLetters(d.Name(), healed)
	}
}

// toolsDir is the .tools directory holding Azurite.
func toolsDir(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("AZURITE_TABLE")
	if bin == "" {
		bin = filepath.Join(".tools", "node_modules", ".bin", "azurite-table")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("Azurite is not installed (run `make tools`): %v", err)
	}
	dir, err := filepath.Abs(filepath.Dir(filepath.Dir(filepath.Dir(bin))))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// freshEnv is this process's environment without what a newcomer's shell
// would not have: the settings the walkthrough exports itself, and an
// enclosing make's flags.
func freshEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "MAKEFLAGS" || name == "MAKELEVEL" || name == "MFLAGS" || name == "MAKEOVERRIDES":
		case strings.HasPrefix(name, "ServiceBusConnection") || strings.HasPrefix(name, "StateStorage"):
		default:
			env = append(env, kv)
		}
	}
	return env
}

// walker runs the walkthrough's lines in the clone.
type walker struct {
	t       *testing.T
	ctx     context.Context
	dir     string
	env     []string
	subst   map[string]string // the README's address → the one the emulation took
	copied  map[string]string // the exports make devhost's banner prints to copy, by name
	host    string            // http://127.0.0.1:port of the emulated host
	devhost *exec.Cmd
	logs    *syncBuffer
	timings []string
	began   time.Time
	printed strings.Builder // what the commands printed, for placeholders
	healed  []healedKey     // the keys the heal commands name
	port    int             // PORT= given to make, when the Makefile takes it
}

var placeholderRE = regexp.MustCompile(`([A-Za-z0-9._-]+)<[A-Za-z ]+>`)

// fill replaces a placeholder of the README (practice-poison-<time>) with
// what the latest command that printed the same prefix printed after it, as
// a reader copies it from the terminal.
func (w *walker) fill(l string) string {
	return placeholderRE.ReplaceAllStringFunc(l, func(p string) string {
		prefix := placeholderRE.FindStringSubmatch(p)[1]
		all := regexp.MustCompile(regexp.QuoteMeta(prefix)+`[A-Za-z0-9._-]+`).FindAllString(w.printed.String(), -1)
		if len(all) == 0 {
			w.fatalf("%q: no earlier command printed %s…", l, prefix)
		}
		return all[len(all)-1] // the latest, as a reader copies it

	})
}

func (w *walker) substitute(l string) string {
	for from, to := range w.subst {
		l = strings.ReplaceAll(l, from, to)
	}
	return l
}

func (w *walker) run(stepName, line string) {
	w.t.Helper()
	if w.began.IsZero() {
		w.began = time.Now()
	}
	started := time.Now()
	if devhostLine.MatchString(line) {
		w.startDevhost(line)
	} else if name, value, ok := strings.Cut(strings.TrimPrefix(line, "export "), "="); ok && strings.HasPrefix(line, "export ") && !strings.ContainsAny(name, " $") {
		words := shellWords(w.substitute(value))
		if len(words) != 1 {
			w.t.Fatalf("%s: %q: export of one value expected", stepName, line)
		}
		if banner, ok := w.copied[name]; ok {
			words[0] = banner // the reader pastes the banner's line
			w.t.Logf("%s: export %s as the banner printed it: %s", stepName, name, banner)
		} else if name == "ServiceBusConnection" || name == "StateStorage" {
			w.fatalf("%s: the README exports %s, but make devhost's banner prints no export of it to copy", stepName, name)
		}
		w.env = append(w.env, name+"="+words[0])
	} else {
		line = w.fill(w.substitute(line))
		if strings.HasPrefix(line, "make ") && w.port != 0 {
			line += fmt.Sprintf(" PORT=%d", w.port)
		}
		if k, ok := healTargetOf(line); ok && stepName == "Heal" && !slices.Contains(w.healed, k) {
			w.healed = append(w.healed, k)
		}
		ctx, cancel := context.WithTimeout(w.ctx, 4*time.Minute) // a go run compiles
		defer cancel()
		// A look right after a publish may come before the key's first
		// message is applied: the reader looks again a moment later.
		var out []byte
		for tries := 1; ; tries++ {
			cmd := exec.CommandContext(ctx, "bash", "-c", line)
			cmd.Dir, cmd.Env = w.dir, w.env
			var stderr strings.Builder
			cmd.Stderr = &stderr
			var err error
			out, err = cmd.Output()
			why := lookedTooSoon(line, out)
			if err == nil && why != "" && time.Since(started) < 30*time.Second {
				time.Sleep(250 * time.Millisecond)
				continue
			}
			w.t.Logf("%s: $ %s   (run %d time(s))\n%s", stepName, line, tries, strings.TrimSpace(string(out)))
			if err != nil {
				w.fatalf("%s: %q: %v\n%s", stepName, line, err, stderr.String())
			}
			if strings.HasPrefix(line, "curl ") && !json.Valid(out) {
				w.fatalf("%s: %q did not answer JSON", stepName, line)
			}
			if why != "" {
				w.fatalf("%s: %q still answers %q after 30 s", stepName, line, why)
			}
			break
		}
		w.printed.Write(out)
		if publishLine.MatchString(line) {
			// The reader looks the ledger up by the trace id it printed.
			var answer struct{ TraceID string }
			if json.Unmarshal(out, &answer) != nil || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(answer.TraceID) {
				w.fatalf("%s: %q printed no trace id to look the ledger up by: %s", stepName, line, out)
			}
		}
	}
	if len(line) > 70 {
		line = line[:70] + "…"
	}
	w.timings = append(w.timings, fmt.Sprintf("  %5.1f s  %s", time.Since(started).Seconds(), line))
}

// lookedTooSoon is the error a curl that reads (no -X) answered, or "": a
// look at a key whose first message is not applied yet answers "has no
// state" (404); the walkthrough never means to show an error.
func lookedTooSoon(line string, out []byte) string {
	if !strings.HasPrefix(line, "curl ") || strings.Contains(line, " -X ") {
		return ""
	}
	var answer struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(out, &answer) != nil {
		return ""
	}
	return answer.Error
}

// startDevhost starts `make devhost` and waits for its banner: the address
// it serves and the Service Bus connection string it prints.
func (w *walker) startDevhost(line string) {
	w.t.Helper()
	readme := line
	if regexp.MustCompile(`(?m)^PORT\s*\??=`).MatchString(readPage(w.t, filepath.Join(w.dir, "Makefile"))) {
		w.port = freeTCPPort(w.t) // 7071 may be taken by another run
		line += fmt.Sprintf(" PORT=%d", w.port)
	}
	cmd := exec.Command("bash", "-c", line)
	cmd.Dir, cmd.Env = w.dir, w.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	w.logs = &syncBuffer{}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		w.t.Fatal(err)
	}
	cmd.Stderr = w.logs
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	w.devhost = cmd
	hostRE := regexp.MustCompile(`http://127\.0\.0\.1:\d+`)
	sbRE := regexp.MustCompile(`Endpoint=sb://(127\.0\.0\.1:\d+)[^'"\s]*`)
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		done := false
		for sc.Scan() {
			l := sc.Text()
			fmt.Fprintln(w.logs, l)
			if done {
				continue
			}
			if m := hostRE.FindString(l); m != "" && w.host == "" && !strings.Contains(l, "/devhost/") {
				w.host = m
			}
			if m := sbRE.FindStringSubmatch(l); m != nil {
				w.subst["127.0.0.1:5672"] = m[1]
			}
			if m := bannerExport.FindStringSubmatch(l); m != nil {
				w.copied[m[1]] = m[2]
			}
			if w.host != "" && w.subst["127.0.0.1:5672"] != "" && w.copied["StateStorage"] != "" && w.copied["ServiceBusConnection"] != "" {
				w.subst["http://127.0.0.1:7071"] = w.host
				done = true
				close(ready)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case <-ready:
		w.t.Logf("make devhost: %s, Service Bus on %s", w.host, w.subst["127.0.0.1:5672"])
	case <-time.After(5 * time.Minute): // it builds both binaries first
		w.fatalf("make devhost printed no banner in 5 minutes")
	}
	w.alongside(readme)
}

// alongside runs a second make devhost from the clone on another port while
// the first runs, as a reader with a second project open does, and stops it
// again: each must have storage of its own (two started within seconds once
// shared one Azurite: both banners named it, and the summary of one showed
// the other's figures), and the first must still answer after the second
// stopped. The race itself is azurite's TestReadyOnlyWhenItsOwnProcessListens.
func (w *walker) alongside(line string) {
	w.t.Helper()
	cmd := exec.Command("bash", "-c", strings.Replace(line, "make devhost", fmt.Sprintf("make devhost PORT=%d", freeTCPPort(w.t)), 1))
	cmd.Dir, cmd.Env = w.dir, w.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		w.t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	storage := make(chan string, 1)
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := bannerExport.FindStringSubmatch(sc.Text()); m != nil && m[1] == "StateStorage" {
				storage <- m[2]
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			w.t.Errorf("the second make devhost did not stop within 15 s of SIGTERM; killed")
		}
		var summary map[string]any
		if code := w.get("/api/summary", &summary); code != http.StatusOK {
			w.fatalf("the first make devhost's summary answered %d after the second stopped: %v", code, summary)
		}
	}()
	select {
	case second := <-storage:
		if second == w.copied["StateStorage"] {
			w.fatalf("two make devhost share one Azurite: both banners say StateStorage='%s'", second)
		}
		w.t.Logf("a second make devhost alongside has storage of its own: %s", second)
	case <-exited:
		w.fatalf("the second make devhost (%s) exited before its banner: %s", cmd.Args[2], stderr.String())
	case <-time.After(3 * time.Minute):
		w.fatalf("the second make devhost printed no StateStorage to copy in 3 minutes")
	}
}

// bannerExport is a line of the banner to copy: export Name='value'.
var bannerExport = regexp.MustCompile(`^\s+export ([A-Za-z_]+)='([^']*)'$`)

// stop ends make devhost and everything it started (its process group).
func (w *walker) stop() {
	if w.devhost == nil || w.devhost.Process == nil {
		return
	}
	pgid := w.devhost.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = w.devhost.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		w.t.Errorf("make devhost did not stop within 15 s of SIGTERM; killed")
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
	}
}

func (w *walker) fatalf(format string, args ...any) {
	w.t.Helper()
	if w.logs != nil {
		logs := w.logs.String()
		if len(logs) > 6000 {
			logs = "…" + logs[len(logs)-6000:]
		}
		w.t.Logf("make devhost's output:\n%s", logs)
	}
	w.t.Fatalf(format, args...)
}

// get reads a JSON answer of the emulated host.
func (w *walker) get(path string, v any) int {
	w.t.Helper()
	req, _ := http.NewRequestWithContext(w.ctx, "GET", w.host+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		w.fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode
}

// blockedEntry is the entry of k in its domain's blocked list
// ({"<domain>": [{"<noun>Id": …}]}), or nil.
func (w *walker) blockedEntry(k healedKey) map[string]any {
	var page map[string][]map[string]any
	w.get("/api/"+k.domain+"?blocked=true&pageSize=500", &page)
	id := idName(w.t, k.domain)
	for _, e := range page[k.domain] {
		if e[id] == k.id {
			return e
		}
	}
	return nil
}

// waitBlocked waits, as a reader looking at the blocked list would, until
// the key is listed with its missing message dead-lettered.
func (w *walker) waitBlocked(k healedKey) {
	w.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		e := w.blockedEntry(k)
		if e != nil {
			if m, _ := e["missing"].(map[string]any); m != nil && m["where"] == "deadLetter" {
				w.t.Logf("blocked: %v", e)
				return
			}
		}
		if time.Now().After(deadline) {
			w.fatalf("%s is not listed as blocked by a dead letter after 60 s: %v", k, e)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitHealed waits until the key has no gap and nothing parked, and is
// off its domain's blocked list.
func (w *walker) waitHealed(k healedKey) {
	w.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var v map[string]any
		code := w.get("/api/"+k.domain+"/"+k.id, &v)
		if code == 200 && v["missingSeq"] == nil && v["parked"] == 0.0 && w.blockedEntry(k) == nil {
			w.t.Logf("healed %s: %v", k, v)
			return
		}
		if time.Now().After(deadline) {
			w.fatalf("%s not healed 60 s after the heal commands: %d %v", k, code, v)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// serviceBus is a client on the emulation, with the connection string the
// walkthrough exported.
func (w *walker) serviceBus() *azservicebus.Client {
	w.t.Helper()
	conn := ""
	for _, kv := range w.env {
		if v, ok := strings.CutPrefix(kv, "ServiceBusConnection="); ok {
			conn = v
		}
	}
	client, err := azservicebus.NewClientFromConnectionString(conn, nil)
	if err != nil {
		w.fatalf("Service Bus: %v", err)
	}
	return client
}

// peekDeadLetters reads a queue's dead-letter sub-queue with the real
// client, locked or not, locking none: "messageId (session, reason)".
func (w *walker) peekDeadLetters(queue string) []string {
	w.t.Helper()
	client := w.serviceBus()
	defer client.Close(w.ctx)
	r, err := client.NewReceiverForQueue(queue, &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if err != nil {
		w.fatalf("dead letters: %v", err)
	}
	defer r.Close(w.ctx)
	var out []string
	for {
		msgs, err := r.PeekMessages(w.ctx, 100, nil)
		if err != nil {
			w.fatalf("peek the dead letters: %v", err)
		}
		if len(msgs) == 0 {
			return out
		}
		for _, m := range msgs {
			session, reason := "", ""
			if m.SessionID != nil {
				session = *m.SessionID
			}
			if m.DeadLetterReason != nil {
				reason = *m.DeadLetterReason
			}
			out = append(out, fmt.Sprintf("%s (%s, %s)", m.MessageID, session, reason))
		}
	}
}

// waitNoPermanentDeadLetters waits for the first AutoReplay run that read
// the domain's dead-letter queue after since (every minute, also with
// AutoReplayEnabled=false: it then only looks) and checks the domain's
// summary's dead letters of a permanent cause, the figure the "dead letters
// of a permanent cause" alert queries (deadLettersPermanent of the run's
// metrics line, infra/modules/alerts.bicep): 0, and none at all.
func (w *walker) waitNoPermanentDeadLetters(domain string, since time.Time) {
	w.t.Helper()
	deadline := time.Now().Add(100 * time.Second)
	for {
		var sum struct {
			FiguresAt   time.Time `json:"figuresAt"`
			DeadLetters *struct {
				Total     int `json:"total"`
				Permanent int `json:"permanent"`
			} `json:"deadLetters"`
		}
		w.get("/api/summary?domain="+domain, &sum)
		if sum.FiguresAt.After(since) {
			if sum.DeadLetters == nil || sum.DeadLetters.Permanent != 0 || sum.DeadLetters.Total != 0 {
				w.fatalf("the %s summary after the heal (figures at %s): dead letters %+v, want none, none of a permanent cause", domain, sum.FiguresAt, sum.DeadLetters)
			}
			w.t.Logf("%s summary after the heal (figures at %s): no dead letter", domain, sum.FiguresAt.Format(time.RFC3339))
			return
		}
		if time.Now().After(deadline) {
			w.fatalf("no AutoReplay run read the %s dead-letter queue in the 100 s after the heal (figures at %s)", domain, sum.FiguresAt)
		}
		time.Sleep(time.Second)
	}
}

// breakOrder sends an order whose second message cannot be read (its amount
// is a string), as TestPoisonMessage does: it is delivered ten times, then
// dead-lettered, and the third message waits parked behind it. It breaks
// orders only: a README that heals another domain's key breaks it first.
func (w *walker) breakOrder(k healedKey) {
	w.t.Helper()
	if k.id == "" || k.domain != "orders" {
		w.fatalf("no order to break: the heal commands name %s (and the README has no Break step)", k)
	}
	order := k.id
	client := w.serviceBus()
	defer client.Close(w.ctx)
	sender, err := client.NewSender("orders", nil)
	if err != nil {
		w.fatalf("break: %v", err)
	}
	defer sender.Close(w.ctx)
	for seq, tx := range []string{
		`{"orderId":"%s","op":"CreateOrder","currency":"EUR"}`,
		`{"orderId":"%s","op":"AddTransaction","txId":"t-1","amount":"a lot"}`,
		`{"orderId":"%s","op":"AddTransaction","txId":"t-2","amount":5}`,
	} {
		id, ct := fmt.Sprintf("walk:%d", seq), "application/json"
		body := fmt.Sprintf(`{"transaction":`+tx+`}`, order)
		if err := sender.SendMessage(w.ctx, &azservicebus.Message{MessageID: &id, SessionID: &order, ContentType: &ct,
			ApplicationProperties: map[string]any{"ledgerId": "walk", "seq": int64(seq + 1)}, Body: []byte(body)}, nil); err != nil {
			w.fatalf("break: send: %v", err)
		}
	}
	w.t.Logf("broke order %s: seq 2 cannot be read (no recipe in the README's Break step)", order)
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// syncBuffer collects a process's output from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
