package devhost_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

// get and post call a function through the front end and decode its JSON answer.
func (e *env) get(t *testing.T, path string, out any) int {
	return e.call(t, http.MethodGet, path, out)
}

func (e *env) post(t *testing.T, path string, out any) int {
	return e.call(t, http.MethodPost, path, out)
}

func (e *env) call(t *testing.T, method, path string, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, e.host.URL()+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("%s %s: not JSON: %v", method, path, err)
	}
	return resp.StatusCode
}
