package devhost

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// routes: HTTP functions at /<prefix>/<route> (forwarded or enveloped, per
// host.json) and the read-only queue view at /devhost/queues/….
func (h *Host) routes() http.Handler {
	mux := http.NewServeMux()
	for _, f := range h.app.Functions {
		if f.Trigger.Type != "httpTrigger" {
			continue
		}
		route := "/" + h.app.routePrefix() + "/" + strings.Trim(routeTemplate(f.Trigger.Route), "/")
		for _, m := range f.Trigger.Methods {
			mux.HandleFunc(strings.ToUpper(m)+" "+route, keysNotice(f, h.httpFunction(f)))
		}
	}
	h.queueRoutes(mux)
	mux.HandleFunc("/", noFunction) // front_notes.go
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

// maxRequestBodySize is the host's limit on a request body
// (ScriptConstants.DefaultMaxRequestBodySize, set on Kestrel in Program.cs):
// 100 MB; Kestrel refuses a larger body with 413.
const maxRequestBodySize = 104857600

// acquireHTTP chooses the HTTP instance that serves a request: the running
// one with the fewest requests in flight, below the per-instance HTTP
// concurrency. When every one is at the limit the request waits for a free
// slot or a new instance (the group scales on the requests in flight and
// waiting); release gives the slot back.
func (h *Host) acquireHTTP(ctx context.Context) (*Instance, func(), error) {
	waiting := false
	defer func() {
		if waiting {
			h.httpWaiting.Add(-1)
		}
	}()
	for {
		h.httpMu.Lock()
		free := h.httpFree
		h.httpMu.Unlock()
		var best *Instance
		for _, in := range h.Group(groupHTTP) {
			n := in.inflight.Load()
			if in.up() && n < int64(h.opts.HTTPConcurrency) && (best == nil || n < best.inflight.Load()) {
				best = in
			}
		}
		if best != nil {
			if n := best.inflight.Add(1); n <= int64(h.opts.HTTPConcurrency) {
				return best, func() { best.inflight.Add(-1); h.httpNotify() }, nil
			}
			best.inflight.Add(-1)
			continue
		}
		if !waiting {
			waiting = true
			h.httpWaiting.Add(1)
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-h.ctx.Done():
			return nil, nil, errHostStopped
		case <-free:
		case <-time.After(50 * time.Millisecond): // a host recycled or stopped meanwhile
		}
	}
}

func (h *Host) httpFunction(f Function) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > maxRequestBodySize {
			http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxRequestBodySize)
		in, release, err := h.acquireHTTP(r.Context())
		if err != nil {
			http.Error(w, "no HTTP instance: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		defer release()
		port, err := in.readyPort(r.Context())
		if err != nil {
			http.Error(w, "the handler is not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		switch h.app.forwarding() {
		case forwardProxy:
			out := r.Clone(r.Context())
			out.URL.Scheme, out.URL.Host, out.RequestURI = "http", fmt.Sprintf("127.0.0.1:%d", port), ""
			out.Header.Del("Connection")
			h.send(w, in, port, out)
		case forwardLegacy:
			h.forward(w, r, in, port)
		default:
			h.envelope(w, r, in, f)
		}
	}
}

// hasBody: the host copies or wraps a request body only when Content-Length
// is above 0 (HttpRequestExtensions); a chunked upload arrives without one.
func hasBody(r *http.Request) bool { return r.ContentLength > 0 }

// forward is enableForwardingHttpRequest: the host rebuilds the request for
// the handler at the original path (HttpRequestExtensions.ToHttpRequestMessage):
// the body, with its content headers, only when Content-Length > 0 (content
// headers cannot ride on a request without content: dropped), other headers
// copied, multi-valued query parameters joined with ",".
func (h *Host) forward(w http.ResponseWriter, r *http.Request, in *Instance, port int) {
	query := url.Values{}
	for k, vs := range r.URL.Query() {
		query.Set(k, strings.Join(vs, ","))
	}
	var body io.Reader = http.NoBody
	if hasBody(r) {
		body = r.Body
	}
	target := fmt.Sprintf("http://127.0.0.1:%d%s", port, r.URL.EscapedPath())
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, target, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for k, vs := range r.Header {
		if k == "Transfer-Encoding" || (contentHeader(k) && !hasBody(r)) {
			continue
		}
		out.Header[k] = vs
	}
	out.Header.Set("X-Azure-Functions-HostVersion", hostVersion)
	out.Header.Set("X-Azure-Functions-InvocationId", uuid.NewString())
	out.Header.Set("User-Agent", "Azure-Functions-Host/"+hostVersion)
	if hasBody(r) {
		out.ContentLength = r.ContentLength
	}
	h.send(w, in, port, out)
}

// send passes a forwarded request to the handler and its answer back.
// functionTimeout applies as to any call: at the timeout the host answers
// 500 (the FunctionTimeoutException reaches ExceptionMiddleware), and if the
// call has not ended after the grace it restarts the handler, which fails
// the instance's other calls in flight. The request is not cancelled at
// the timeout (the host waits; the kill ends it). Any other failure of the
// call is a failed function: 500 as well.
func (h *Host) send(w http.ResponseWriter, in *Instance, port int, out *http.Request) {
	timeout := h.app.FunctionTimeout
	// The host's HttpClient waits functionTimeout + 1 min (invocationClient).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(out.Context()), timeout+time.Minute)
	out = out.WithContext(ctx)
	type answer struct {
		resp *http.Response
		body []byte
		err  error
	}
	done := make(chan answer, 1)
	h.invocations.Add(1)
	go func() {
		resp, err := in.client.Transport.RoundTrip(out)
		if err != nil {
			done <- answer{err: err}
			return
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- answer{resp: resp, body: body, err: err}
	}()
	var a answer
	select {
	case a = <-done:
	case <-time.After(timeout):
		h.failures.Add(1)
		in.logf("%s %s outlived functionTimeout (%s): answering 500", out.Method, out.URL.Path, timeout)
		http.Error(w, "function timed out after "+timeout.String(), http.StatusInternalServerError)
		go func() {
			defer cancel()
			select {
			case <-done:
			case <-time.After(timeoutGrace):
				in.logf("%s %s still running %s after functionTimeout: restarting the handler", out.Method, out.URL.Path, timeoutGrace)
				in.killForTimeout(port)
			}
		}()
		return
	}
	cancel()
	if a.err != nil {
		h.failures.Add(1)
		http.Error(w, "the function failed: "+a.err.Error(), http.StatusInternalServerError)
		return
	}
	for k, vs := range a.resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(a.resp.StatusCode)
	_, _ = w.Write(a.body)
}

// contentHeader: the headers .NET keeps on HttpContent, not on the request.
func contentHeader(k string) bool {
	switch http.CanonicalHeaderKey(k) {
	case "Content-Length", "Content-Type", "Content-Encoding", "Content-Language", "Content-Location",
		"Content-Md5", "Content-Range", "Content-Disposition", "Expires", "Last-Modified", "Allow":
		return true
	}
	return false
}

// envelope is an HTTP function without forwarding: the request is wrapped
// in Data.req and the answer unwrapped from Outputs.res.
func (h *Host) envelope(w http.ResponseWriter, r *http.Request, in *Instance, f Function) {
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
	for k, vs := range r.URL.Query() {
		query[k] = strings.Join(vs, ",")
	}
	req := map[string]any{"Url": "http://" + r.Host + r.URL.RequestURI(), "Method": r.Method, "Query": query,
		"Headers": r.Header, "Params": params, "Identities": []any{}}
	if hasBody(r) {
		body, _ := io.ReadAll(r.Body)
		mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if mt == "application/octet-stream" || strings.HasPrefix(mt, "multipart/") {
			req["Body"] = base64.StdEncoding.EncodeToString(body)
		} else {
			req["Body"] = string(body)
		}
	}
	md["Query"], md["Headers"] = raw(query), raw(r.Header)
	inv, _ := json.Marshal(invocation{Data: map[string]json.RawMessage{f.Trigger.Name: raw(req)}, Metadata: md})
	out, err := in.call(r.Context(), f.Name, "/"+f.Name, inv)
	if err != nil {
		http.Error(w, "function failed: "+err.Error(), http.StatusInternalServerError)
		return
	}
	var outputs map[string]struct {
		StatusCode json.Number       `json:"statusCode"`
		Body       string            `json:"body"`
		Headers    map[string]string `json:"headers"`
	}
	_ = json.Unmarshal(out.Outputs, &outputs)
	res := outputs["res"]
	for k, v := range res.Headers {
		w.Header().Set(k, v)
	}
	status, _ := strconv.Atoi(res.StatusCode.String())
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = io.Copy(w, bytes.NewReader([]byte(res.Body)))
}
