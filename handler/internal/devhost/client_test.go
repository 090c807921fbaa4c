package devhost

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
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
