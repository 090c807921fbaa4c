package devhost

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httputil"
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
		route := "/" + h.app.RoutePrefix() + "/" + strings.Trim(routeTemplate(f.Trigger.Route), "/")
		for _, m := range f.Trigger.Methods {
			mux.HandleFunc(strings.ToUpper(m)+" "+route, h.httpFunction(f))
		}
	}
	h.queueRoutes(mux)
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

// pick chooses the instance that serves an HTTP request: round robin over
// the instances whose host runs.
func (h *Host) pick() *Instance {
	all := h.Instances()
	for range len(all) {
		in := all[int(h.next.Add(1))%len(all)]
		if in.ctx.Err() == nil {
			return in
		}
	}
	return nil
}

func (h *Host) httpFunction(f Function) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		in := h.pick()
		if in == nil {
			http.Error(w, "every host instance has stopped", http.StatusServiceUnavailable)
			return
		}
		port, err := in.readyPort(r.Context())
		if err != nil {
			http.Error(w, "the handler is not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		switch h.app.Forwarding() {
		case ForwardProxy:
			target, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", port))
			httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
		case ForwardLegacy:
			h.forward(w, r, port)
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
func (h *Host) forward(w http.ResponseWriter, r *http.Request, port int) {
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
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, "forwarding to the handler failed: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
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
