package devhost

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
)

// The emulation checks no function keys, as Core Tools does locally ("When
// running locally, authorization isn't enforced for HTTP endpoints ... all
// local HTTP requests are handled as authLevel = anonymous",
// functions-run-local): every HTTP function answers with a key or without,
// whatever its authLevel. The dashboard, which asks for an admin key before
// a replay or a skip, says so on the page (keysNotice).

// KeysNotice is the line the dashboard's page gets in the emulation.
const KeysNotice = "Local emulation: function and admin keys are not checked here (as with Core Tools): " +
	"any admin key, even x, will do. In Azure, open this page with ?code=<function key> and type the admin key."

var bodyTag = regexp.MustCompile(`(?i)<body[^>]*>`)

// keysNotice wraps the Dashboard function: the page comes back with
// KeysNotice as its first paragraph (plain text: the page's
// Content-Security-Policy allows no inline style or script it does not list).
func keysNotice(f Function, next http.HandlerFunc) http.HandlerFunc {
	if f.Name != "Dashboard" {
		return next
	}
	return func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		next(rec, r)
		body := rec.Body.Bytes()
		if loc := bodyTag.FindIndex(body); loc != nil && rec.Code == http.StatusOK {
			note := []byte(`<p id="devhost-keys" role="note"><strong>` + KeysNotice + `</strong></p>`)
			body = append(append(append([]byte{}, body[:loc[1]]...), note...), body[loc[1]:]...)
		}
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(rec.Code)
		_, _ = bytes.NewReader(body).WriteTo(w)
	}
}

// noFunction answers a request no function's route and method match: 404,
// as the host answers, with the JSON error body of every other error.
func noFunction(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusNotFound)
	_ = json.NewEncoder(w).Encode(map[string]string{
		"error": "no function answers " + r.Method + " " + r.URL.Path + " (the HTTP functions' routes and methods are in functions/*/function.json)",
	})
}
