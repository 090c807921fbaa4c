package devhost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"mime"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/convoy-dev/convoy/handler/localbus"
)

// Options configure a Host.
type Options struct {
	AppDir   string            // the staged app (make stage → dist/)
	Settings map[string]string // app settings, as in local.settings.json Values
	Queues   map[string]QueueProperties
	Port     int       // front end port; 0 picks a free one
	Log      io.Writer // the emulation's and the handler's output; default discard
}

// Host emulates the Functions host for one app.
type Host struct {
	app      *App
	opts     Options
	log      *log.Logger
	queues   map[string]*Queue
	front    *http.Server
	frontURL string

	mu          sync.Mutex
	cmd         *exec.Cmd
	handlerPort int
	ready       bool          // the current handler process answers
	changed     chan struct{} // closed and replaced whenever ready or the port changes
	exited      chan struct{} // closed when the current process ends
	restarts    atomic.Int64
	invocations atomic.Int64
	failures    atomic.Int64
	fault       atomic.Pointer[func(function string, msgs []*Message) error]

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start loads the app, starts the handler and waits until it is ready, then
// starts dispatching triggers and serving the front end.
func Start(opts Options) (*Host, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	opts.Log = &syncWriter{w: opts.Log}
	frontLn, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", opts.Port))
	if err != nil {
		return nil, err
	}
	h := &Host{opts: opts, log: log.New(opts.Log, "devhost: ", log.Ltime|log.Lmicroseconds), queues: map[string]*Queue{}}
	h.frontURL = "http://" + frontLn.Addr().String()
	settings := map[string]string{}
	for k, v := range opts.Settings {
		settings[k] = v
	}
	// The handler publishes to this emulation, never to a real namespace.
	settings["ServiceBusConnection"] = "local://" + frontLn.Addr().String()
	h.opts.Settings = settings
	if h.app, err = LoadApp(opts.AppDir, settings); err != nil {
		frontLn.Close()
		return nil, err
	}
	for _, f := range h.app.Functions {
		if f.Trigger.Type != "serviceBusTrigger" {
			continue
		}
		// As Service Bus would: a session receiver on a queue without
		// sessions (or the reverse) fails.
		if q := h.queue(f.Trigger.QueueName); q.Properties().RequiresSession != f.Trigger.IsSessionsEnabled {
			frontLn.Close()
			return nil, fmt.Errorf("function %s: isSessionsEnabled is %v but queue %q has RequiresSession %v",
				f.Name, f.Trigger.IsSessionsEnabled, q.Name, q.Properties().RequiresSession)
		}
	}
	for name := range opts.Queues {
		h.queue(name)
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.changed = make(chan struct{})
	if err := h.startHandler(); err != nil {
		h.cancel()
		frontLn.Close()
		return nil, err
	}
	h.wg.Add(1)
	go h.supervise()
	wait, cancel := context.WithTimeout(h.ctx, 30*time.Second)
	defer cancel()
	if _, err := h.readyPort(wait); err != nil {
		h.Stop()
		return nil, errors.New("the handler did not answer GET / within 30 s")
	}
	h.front = &http.Server{Handler: h.routes(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = h.front.Serve(frontLn) }()
	for _, f := range h.app.Functions {
		if f.Trigger.Type == "serviceBusTrigger" {
			h.dispatch(f)
		}
	}
	h.log.Printf("ready at %s (app %s)", h.frontURL, opts.AppDir)
	return h, nil
}

func (h *Host) queue(name string) *Queue {
	if q, ok := h.queues[name]; ok {
		return q
	}
	q := NewQueue(name, h.opts.Queues[name])
	h.queues[name] = q
	return q
}

// URL is the front end's base URL (functions at /api/…, queues at /devhost/…).
func (h *Host) URL() string { return h.frontURL }

// Queue returns an emulated queue by name, or nil.
func (h *Host) Queue(name string) *Queue { return h.queues[name] }

// Restarts counts handler restarts; Invocations and Failures count calls.
func (h *Host) Restarts() int64    { return h.restarts.Load() }
func (h *Host) Invocations() int64 { return h.invocations.Load() }
func (h *Host) Failures() int64    { return h.failures.Load() }

// Stop stops dispatching, then the handler (SIGTERM), then the front end.
func (h *Host) Stop() {
	h.cancel()
	h.mu.Lock()
	cmd, exited := h.cmd, h.exited
	h.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
		}
	}
	h.wg.Wait()
	if h.front != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = h.front.Shutdown(ctx)
	}
}

// KillHandler kills the handler process with SIGKILL; the host restarts it.
func (h *Host) KillHandler() {
	h.mu.Lock()
	cmd := h.cmd
	h.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Kill()
	}
}

// startHandler starts the handler as the host does: the executable of
// host.json in the app root, with the app settings and the FUNCTIONS_* variables.
func (h *Host) startHandler() error {
	port, err := freePort()
	if err != nil {
		return err
	}
	desc := h.app.Host.CustomHandler.Description
	exe := desc.DefaultExecutablePath
	if !filepath.IsAbs(exe) {
		exe = filepath.Join(h.app.Dir, exe)
	}
	cmd := exec.Command(exe, desc.Arguments...)
	cmd.Dir = h.app.Dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range h.opts.Settings {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env,
		"FUNCTIONS_CUSTOMHANDLER_PORT="+strconv.Itoa(port), "FUNCTIONS_HTTPWORKER_PORT="+strconv.Itoa(port),
		"FUNCTIONS_CUSTOMHANDLER_WORKER_ID="+uuid.NewString(), "FUNCTIONS_APP_ROOT_PATH="+h.app.Dir,
		"FUNCTIONS_WORKER_RUNTIME=custom")
	cmd.Stdout = prefixWriter(h.opts.Log, "handler: ")
	cmd.Stderr = prefixWriter(h.opts.Log, "handler! ")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start handler %s: %w", exe, err)
	}
	exited := make(chan struct{})
	h.mu.Lock()
	h.cmd, h.handlerPort, h.exited = cmd, port, exited
	h.setReady(false)
	h.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		h.markDown(port)
		close(exited)
	}()
	go h.probe(port, exited)
	return nil
}

// setReady records whether the current handler answers; callers hold h.mu.
func (h *Host) setReady(ready bool) {
	h.ready = ready
	close(h.changed)
	h.changed = make(chan struct{})
}

// markDown: the handler on port no longer answers (it died, or refused a
// connection). New invocations wait for it instead of failing at once and
// burning deliveries, as the host stops dispatching to a dead worker.
func (h *Host) markDown(port int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.handlerPort == port && h.ready {
		h.setReady(false)
	}
}

// readyPort waits until the handler answers and returns its port.
func (h *Host) readyPort(ctx context.Context) (int, error) {
	for {
		h.mu.Lock()
		ready, port, changed := h.ready, h.handlerPort, h.changed
		h.mu.Unlock()
		if ready {
			return port, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-changed:
		}
	}
}

// probe sends GET / every 25 ms until any response, as the host does.
func (h *Host) probe(port int, exited chan struct{}) {
	client := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		select {
		case <-exited:
			return
		default:
		}
		if resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/", port)); err == nil {
			resp.Body.Close()
			h.mu.Lock()
			if h.handlerPort == port && !h.ready {
				h.setReady(true)
			}
			h.mu.Unlock()
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	h.log.Printf("handler not ready after 30 s: killing it")
	h.KillHandler()
}

// supervise restarts the handler whenever it dies, like the host.
func (h *Host) supervise() {
	defer h.wg.Done()
	for {
		h.mu.Lock()
		exited := h.exited
		h.mu.Unlock()
		select {
		case <-h.ctx.Done():
			<-exited
			return
		case <-exited:
		}
		if h.ctx.Err() != nil {
			return
		}
		h.restarts.Add(1)
		h.log.Printf("handler exited; restarting it")
		for h.ctx.Err() == nil {
			if err := h.startHandler(); err != nil {
				h.log.Printf("%v; retrying", err)
				time.Sleep(time.Second)
				continue
			}
			break
		}
	}
}

// call POSTs an invocation to the handler and validates the answer the way
// the host does: 2xx, Content-Type application/json, a JSON body. A call
// that outlives functionTimeout makes the host restart the handler.
func (h *Host) call(ctx context.Context, path string, body []byte) (map[string]json.RawMessage, error) {
	h.invocations.Add(1)
	ctx, cancel := context.WithTimeout(ctx, h.app.FunctionTimeout)
	defer cancel()
	port, err := h.readyPort(ctx)
	if err != nil {
		h.failures.Add(1)
		return nil, errors.New("the handler is not ready")
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d%s", port, path), bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("X-Azure-Functions-InvocationId", uuid.NewString())
	req.Header.Set("X-Azure-Functions-HostVersion", "4.1036.1.23224")
	req.Header.Set("User-Agent", "Azure-Functions-Host/4.1036.1.23224")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.failures.Add(1)
		if errors.Is(err, syscall.ECONNREFUSED) {
			h.markDown(port)
			h.mu.Lock()
			exited := h.exited
			h.mu.Unlock()
			go h.probe(port, exited) // ready again if it was only a hiccup
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			h.log.Printf("%s outlived functionTimeout (%s): restarting the handler", path, h.app.FunctionTimeout)
			h.KillHandler()
		}
		return nil, err
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		h.failures.Add(1)
		return nil, err
	}
	var out map[string]json.RawMessage
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		err = fmt.Errorf("status %d: %s", resp.StatusCode, clip(text))
	case mt != "application/json":
		err = fmt.Errorf("Content-Type %q is not application/json", resp.Header.Get("Content-Type"))
	case json.Unmarshal(text, &out) != nil:
		err = fmt.Errorf("the response is not a JSON object: %s", clip(text))
	}
	if err != nil {
		h.failures.Add(1)
		return nil, err
	}
	var logs []string
	_ = json.Unmarshal(out["Logs"], &logs)
	for _, line := range logs {
		h.log.Printf("%s log: %s", strings.TrimPrefix(path, "/"), line)
	}
	return out, nil
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// InjectFault makes triggered invocations fail, before reaching the
// handler, whenever f returns an error (a broken dependency, a bad
// deployment); nil clears it. Tests use it to dead-letter messages and then
// fix the cause.
func (h *Host) InjectFault(f func(function string, msgs []*Message) error) {
	if f == nil {
		h.fault.Store(nil)
		return
	}
	h.fault.Store(&f)
}

// Invoke runs a Service Bus triggered function on msgs (one message, or a
// batch for "cardinality": "many") and reports success. Tests use it to make
// two invocations of one session overlap, as after a lost session lock.
func (h *Host) Invoke(ctx context.Context, function string, msgs []*Message) error {
	for _, f := range h.app.Functions {
		if f.Name != function {
			continue
		}
		if fault := h.fault.Load(); fault != nil {
			if err := (*fault)(function, msgs); err != nil {
				h.invocations.Add(1)
				h.failures.Add(1)
				return err
			}
		}
		_, err := h.call(ctx, "/"+f.Name, EncodeInvocation(f, msgs, time.Now()))
		return err
	}
	return fmt.Errorf("no function %q", function)
}

// dispatch runs a Service Bus trigger's receivers: maxConcurrentSessions
// session receivers, one message at a time per session (one session at a
// time in batch mode); without sessions, maxConcurrentCalls receivers.
func (h *Host) dispatch(f Function) {
	q := h.queues[f.Trigger.QueueName]
	sb := h.app.Host.Extensions.ServiceBus
	settle := func(msgs []*Message, err error) bool {
		if err != nil {
			h.log.Printf("%s failed (%s, delivery %d): %v", f.Name, describeMsgs(msgs), msgs[0].DeliveryCount, err)
		}
		return err == nil
	}
	if !f.Trigger.IsSessionsEnabled {
		workers := sb.MaxConcurrentCalls
		if workers <= 0 {
			workers = 16 // the host's default is 16 per core
		}
		for range workers {
			h.wg.Add(1)
			go func() {
				defer h.wg.Done()
				for {
					m, done := q.Receive(h.ctx)
					if m == nil {
						return
					}
					done(settle([]*Message{m}, h.Invoke(h.ctx, f.Name, []*Message{m})))
				}
			}()
		}
		return
	}
	workers, batch := max(sb.MaxConcurrentSessions, 1), 1
	if sb.MaxConcurrentSessions == 0 {
		workers = 8
	}
	if f.Batch() {
		workers, batch = 1, max(sb.MaxMessageBatchSize, 1)
		if sb.MaxMessageBatchSize == 0 {
			batch = 1000
		}
	}
	for range workers {
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			for {
				lock := q.AcceptSession(h.ctx)
				if lock == nil {
					return
				}
				for {
					msgs := lock.Next(h.ctx, batch, h.app.SessionIdleTimeout)
					if len(msgs) == 0 {
						break
					}
					lock.Settle(msgs, settle(msgs, h.Invoke(h.ctx, f.Name, msgs)))
				}
				lock.Release()
			}
		}()
	}
}

func describeMsgs(msgs []*Message) string {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.MessageID
	}
	s := strings.Join(ids, ",")
	if msgs[0].SessionID != "" {
		s = "session " + msgs[0].SessionID + ": " + s
	}
	return s
}

// WaitIdle waits until every queue has had nothing waiting or in flight for
// settle, or ctx ends.
func (h *Host) WaitIdle(ctx context.Context, settle time.Duration) error {
	since := time.Time{}
	for {
		idle := true
		for _, q := range h.queues {
			idle = idle && q.Idle()
		}
		switch {
		case !idle:
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
		case time.Since(since) >= settle:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("queues not idle: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// routes: HTTP functions at /<prefix>/<route> (forwarded or enveloped, per
// host.json) and the queue API at /devhost/queues/….
func (h *Host) routes() http.Handler {
	mux := http.NewServeMux()
	for _, f := range h.app.Functions {
		if f.Trigger.Type != "httpTrigger" {
			continue
		}
		route := "/" + h.app.RoutePrefix() + "/" + strings.Trim(routeTemplate(f.Trigger.Route), "/")
		for _, m := range f.Trigger.Methods {
			mux.HandleFunc(strings.ToUpper(m)+" "+route, h.httpFunction(f))
		}
	}
	mux.HandleFunc("POST /devhost/queues/{queue}/messages", h.sendMessages)
	mux.HandleFunc("GET /devhost/queues/{queue}", h.queueStats)
	mux.HandleFunc("GET /devhost/queues/{queue}/deadletter", h.deadLetters)
	mux.HandleFunc("DELETE /devhost/queues/{queue}/deadletter/{seq}", h.completeDeadLetter)
	return mux
}

// routeTemplate turns a Functions route ("orders/{orderId:alpha}") into a
// ServeMux pattern ("orders/{orderId}").
func routeTemplate(route string) string {
	var b strings.Builder
	for i := 0; i < len(route); i++ {
		c := route[i]
		if c == ':' || c == '?' {
			for i < len(route) && route[i] != '}' {
				i++
			}
			c = '}'
		}
		b.WriteByte(c)
	}
	return b.String()
}

func (h *Host) httpFunction(f Function) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		port, err := h.readyPort(r.Context())
		if err != nil {
			http.Error(w, "the handler is not ready", http.StatusServiceUnavailable)
			return
		}
		if h.app.Forwarding() {
			target, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", port))
			httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		params := map[string]string{}
		md := map[string]json.RawMessage{"sys": sysMetadata(f.Name, time.Now())}
		for _, seg := range strings.Split(routeTemplate(f.Trigger.Route), "/") {
			if strings.HasPrefix(seg, "{") {
				name := strings.Trim(seg, "{}")
				params[name] = r.PathValue(name)
				md[name] = netString(params[name])
			}
		}
		query := map[string]string{}
		for k := range r.URL.Query() {
			query[k] = r.URL.Query().Get(k)
		}
		req := map[string]any{"Url": "http://" + r.Host + r.URL.RequestURI(), "Method": r.Method, "Query": query,
			"Headers": r.Header, "Params": params, "Identities": []any{}, "Body": string(body)}
		md["Query"], md["Headers"] = raw(query), raw(r.Header)
		inv, _ := json.Marshal(invocation{Data: map[string]json.RawMessage{f.Trigger.Name: raw(req)}, Metadata: md})
		out, err := h.call(r.Context(), "/"+f.Name, inv)
		if err != nil {
			http.Error(w, "function failed: "+err.Error(), http.StatusInternalServerError)
			return
		}
		var outputs map[string]struct {
			StatusCode json.Number       `json:"statusCode"`
			Body       string            `json:"body"`
			Headers    map[string]string `json:"headers"`
		}
		_ = json.Unmarshal(out["Outputs"], &outputs)
		res := outputs["res"]
		for k, v := range res.Headers {
			w.Header().Set(k, v)
		}
		status, _ := strconv.Atoi(res.StatusCode.String())
		if status == 0 {
			status = http.StatusOK
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, res.Body)
	}
}

func (h *Host) queueFor(w http.ResponseWriter, r *http.Request) *Queue {
	q := h.queues[r.PathValue("queue")]
	if q == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no queue " + r.PathValue("queue")})
	}
	return q
}

func (h *Host) sendMessages(w http.ResponseWriter, r *http.Request) {
	q := h.queueFor(w, r)
	if q == nil {
		return
	}
	var wire []localbus.WireMessage
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<30)).Decode(&wire); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body is not a JSON array of messages: " + err.Error()})
		return
	}
	msgs := make([]Message, len(wire))
	for i, m := range wire {
		if q.Properties().RequiresSession && m.SessionID == "" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("message %d has no SessionId; queue %s requires sessions", i, q.Name)})
			return
		}
		msgs[i] = Message{MessageID: m.MessageID, SessionID: m.SessionID, ContentType: m.ContentType, Properties: m.ApplicationProperties, Body: []byte(m.Body)}
	}
	accepted, dups := q.Send(msgs)
	writeJSON(w, http.StatusOK, localbus.SendResult{Accepted: accepted, Duplicates: dups})
}

func (h *Host) queueStats(w http.ResponseWriter, r *http.Request) {
	if q := h.queueFor(w, r); q != nil {
		writeJSON(w, http.StatusOK, q.Stats())
	}
}

func (h *Host) deadLetters(w http.ResponseWriter, r *http.Request) {
	q := h.queueFor(w, r)
	if q == nil {
		return
	}
	out := []localbus.WireDeadLetter{}
	for _, m := range q.DeadLetters() {
		out = append(out, localbus.WireDeadLetter{SequenceNumber: m.SequenceNumber, MessageID: m.MessageID, SessionID: m.SessionID,
			ContentType: m.ContentType, ApplicationProperties: m.Properties, Body: string(m.Body), DeliveryCount: m.DeliveryCount,
			DeadLetterReason: m.DeadLetterReason})
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Host) completeDeadLetter(w http.ResponseWriter, r *http.Request) {
	q := h.queueFor(w, r)
	if q == nil {
		return
	}
	seq, err := strconv.ParseInt(r.PathValue("seq"), 10, 64)
	if err != nil || !q.RemoveDeadLetter(seq) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no dead-lettered message " + r.PathValue("seq")})
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"completed": seq})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// prefixWriter prefixes each line written to w.
func prefixWriter(w io.Writer, prefix string) io.Writer { return &lineWriter{w: w, prefix: prefix} }

type lineWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		_, _ = fmt.Fprintf(l.w, "%s%s\n", l.prefix, l.buf[:i])
		l.buf = l.buf[i+1:]
	}
}

// syncWriter serialises writes from the emulation's many goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
