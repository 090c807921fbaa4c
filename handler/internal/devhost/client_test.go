package devhost

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The host's HttpClient keeps every connection to the handler alive
// (HttpClientHandler has no per-server limit): concurrent sessions each
// reuse theirs instead of opening one per invocation.
func TestInvocationsReuseConnections(t *testing.T) {
	t.Parallel()
	const sessions, perSession = 8, 25
	var opened atomic.Int64
	// Every round answers all sessions at once, so that all their
	// connections go back to the pool together (a pool that keeps only a
	// few closes the rest).
	var mu sync.Mutex
	arrived, round := 0, make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		wait := round
		if arrived++; arrived == sessions {
			close(round)
			arrived, round = 0, make(chan struct{})
		}
		mu.Unlock()
		<-wait
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	client := invocationClient(time.Minute)
	var wg sync.WaitGroup
	for range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perSession {
				resp, err := client.Post(srv.URL+"/OrderProcessor", "application/json", strings.NewReader(`{"Data":{}}`))
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	if n := opened.Load(); n > sessions {
		t.Errorf("%d invocations in %d sessions opened %d connections; want at most one per session", sessions*perSession, sessions, n)
	}
}

// An answer is read as Json.NET reads HttpScriptInvocationResult: property
// names in any case; Logs a list of strings, other scalars as their JSON text
// (JsonTextReader.ReadAsString gives "true" for true, a number as written).
func TestReadResult(t *testing.T) {
	t.Parallel()
	for answer, want := range map[string][]string{
		`{"Logs":["a","b"]}`:                       {"a", "b"},
		`{"logs":["a",5,1.5e3,true,false,null]}`:   {"a", "5", "1.5e3", "true", "false"},
		`{"Outputs":{"res":{}},"ReturnValue":[1]}`: nil,
		`{"Outputs":null,"Logs":null}`:             nil,
	} {
		r, err := readResult([]byte(answer))
		if err != nil {
			t.Errorf("%s: %v", answer, err)
		} else if !slices.Equal(r.logs, want) {
			t.Errorf("%s: logs %q, want %q", answer, r.logs, want)
		}
	}
	for _, answer := range []string{`[]`, `"x"`, `{"Logs":"x"}`, `{"Logs":[["x"]]}`, `{"Logs":[{}]}`, `{"Outputs":[1]}`, `{"Outputs":"x"}`} {
		if _, err := readResult([]byte(answer)); err == nil {
			t.Errorf("%s was read as an invocation result", answer)
		}
	}
}
