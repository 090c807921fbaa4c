package devhost_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
)

func httpPost(url string, body []byte) (int, error) {
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

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
