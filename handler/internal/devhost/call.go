package devhost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/google/uuid"
)

// An invocation's round trip to the handler, judged as the host judges it.

// call POSTs an invocation to the handler and judges the answer as the host
// does: 2xx, Content-Type application/json, a JSON object. The host's
// HttpClient would wait functionTimeout + 1 min, but the host stops waiting
// at functionTimeout (+ grace) and restarts the handler, which ends the
// request; here the request carries that deadline.
// A 2xx with an empty or null body never completes: it waits out
// functionTimeout too. Logs of a successful call go to Function.<Name>.User.
func (in *Instance) call(ctx context.Context, function, path string, body []byte) (*result, error) {
	h := in.host
	h.invocations.Add(1)
	out, err := in.roundTrip(ctx, path, body)
	if err != nil {
		h.failures.Add(1)
		return nil, err
	}
	for _, line := range out.logs {
		in.trace(Trace{Category: CategoryUser(function), Level: LevelInformation, Message: line})
	}
	return out, nil
}

// result is what the emulation reads of the host's
// HttpScriptInvocationResult (its ReturnValue, any JSON, is not used): its
// properties match case-insensitively, as Json.NET reads them.
type result struct {
	Outputs json.RawMessage
	Logs    json.RawMessage

	logs []string // Logs as the host reads them
}

// readResult reads an answer as Json.NET reads it into
// HttpScriptInvocationResult: a JSON object whose Outputs, if not null, is an
// object (IDictionary<string, object>) and whose Logs, if not null, is an
// array (List<string>) of strings or other scalars, which become their JSON
// text (JsonTextReader.ReadAsString); anything else fails the call.
func readResult(text []byte) (*result, error) {
	var out result
	if err := json.Unmarshal(text, &out); err != nil {
		return nil, errors.New("it is not a JSON object")
	}
	if o := bytes.TrimSpace(out.Outputs); len(o) > 0 && string(o) != "null" && o[0] != '{' {
		return nil, fmt.Errorf("its Outputs is %s, not an object", clip(o))
	}
	if l := bytes.TrimSpace(out.Logs); len(l) > 0 && string(l) != "null" {
		var lines []json.RawMessage
		if err := json.Unmarshal(l, &lines); err != nil {
			return nil, fmt.Errorf("its Logs is %s, not an array", clip(l))
		}
		for _, line := range lines {
			switch v := bytes.TrimSpace(line); {
			case v[0] == '"':
				var s string
				_ = json.Unmarshal(v, &s)
				out.logs = append(out.logs, s)
			case v[0] == '{' || v[0] == '[':
				return nil, fmt.Errorf("its Logs hold %s, not a string", clip(v))
			case string(v) != "null":
				out.logs = append(out.logs, string(v))
			}
		}
	}
	return &out, nil
}

func (in *Instance) roundTrip(ctx context.Context, path string, body []byte) (*result, error) {
	timeout := in.host.app.FunctionTimeout
	deadline := time.Now().Add(timeout + timeoutGrace)
	port, err := in.currentPort()
	if err != nil {
		wait, cancel := context.WithTimeout(ctx, restartWait)
		port, err = in.readyPort(wait)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("no handler to invoke: %w", err)
		}
	}
	// The host stops waiting at the deadline whatever ctx does; the request
	// ends with it (and the handler is restarted).
	call, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	req, _ := http.NewRequestWithContext(call, http.MethodPost, "http://127.0.0.1:"+strconv.Itoa(port)+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("X-Azure-Functions-InvocationId", uuid.NewString())
	req.Header.Set("X-Azure-Functions-HostVersion", hostVersion)
	req.Header.Set("User-Agent", "Azure-Functions-Host/"+hostVersion)
	var status int
	var ctype string
	var text []byte
	resp, err := in.client.Do(req)
	if err == nil {
		status, ctype = resp.StatusCode, resp.Header.Get("Content-Type")
		text, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err != nil && call.Err() != nil {
		in.logf("%s outlived functionTimeout (%s) and its %s grace: restarting the handler", path, timeout, timeoutGrace)
		in.killForTimeout(port)
		return nil, fmt.Errorf("timeout after %s", timeout)
	}
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			in.markDown(port)
			in.mu.Lock()
			exited := in.exited
			in.mu.Unlock()
			go in.probe(port, exited) // ready again if it was only a hiccup
		}
		return nil, err
	}
	mt, _, _ := mime.ParseMediaType(ctype)
	trimmed := bytes.TrimSpace(text)
	switch {
	case status < 200 || status > 299:
		return nil, fmt.Errorf("status %d: %s", status, clip(text))
	case len(trimmed) == 0 || string(trimmed) == "null":
		// ReadAsAsync gives null and the invocation's result is never set.
		in.logf("%s answered %d with an empty or null body: the host waits out functionTimeout (%s), then restarts the handler", path, status, timeout)
		<-call.Done()
		in.killForTimeout(port)
		return nil, fmt.Errorf("status %d with an empty or null body: timed out after %s", status, timeout)
	case mt != "application/json" && mt != "text/json":
		return nil, fmt.Errorf("Content-Type %q is not application/json", ctype)
	}
	out, err := readResult(text)
	if err != nil {
		return nil, fmt.Errorf("the response is not an invocation result (%v): %s", err, clip(text))
	}
	return out, nil
}

const hostVersion = "4.1036.1.23224"

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}
