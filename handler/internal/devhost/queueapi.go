package devhost

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/convoy-dev/convoy/handler/internal/devbus"
)

// queueRoutes: a read-only view of the emulated queues for a developer's
// browser, at /devhost/queues/…. Clients send and receive over AMQP (package devbus),
// with any Service Bus SDK, as in Azure.
func (h *Host) queueRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /devhost/queues/{queue}", h.queueStats)
	mux.HandleFunc("GET /devhost/queues/{queue}/deadletter", h.peekDeadLetters)
}

func (h *Host) queueFor(w http.ResponseWriter, r *http.Request) *devbus.Queue {
	q := h.queues[r.PathValue("queue")]
	if q == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no queue " + r.PathValue("queue")})
	}
	return q
}

func (h *Host) queueStats(w http.ResponseWriter, r *http.Request) {
	if q := h.queueFor(w, r); q != nil {
		writeJSON(w, http.StatusOK, q.Stats())
	}
}

// deadLetterView is a dead letter as the inspection API shows it.
type deadLetterView struct {
	SequenceNumber        int64          `json:"sequenceNumber"`
	MessageID             string         `json:"messageId"`
	SessionID             string         `json:"sessionId,omitempty"`
	ContentType           string         `json:"contentType,omitempty"`
	ApplicationProperties map[string]any `json:"applicationProperties,omitempty"`
	Body                  string         `json:"body"`
	DeliveryCount         int            `json:"deliveryCount"`
	DeadLetterReason      string         `json:"deadLetterReason,omitempty"`
	DeadLetterDescription string         `json:"deadLetterErrorDescription,omitempty"`
}

func viewDeadLetter(m devbus.Message) deadLetterView {
	return deadLetterView{SequenceNumber: m.SequenceNumber, MessageID: m.MessageID, SessionID: m.SessionID,
		ContentType: m.ContentType, ApplicationProperties: m.Properties, Body: string(m.Body), DeliveryCount: m.DeliveryCount,
		DeadLetterReason: m.DeadLetterReason, DeadLetterDescription: m.DeadLetterDescription}
}

// intParam reads an optional integer query parameter within [lo, hi];
// false (after answering 400) when it is malformed.
func intParam(w http.ResponseWriter, r *http.Request, name string, def, lo, hi int64) (int64, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("%s %q is not an integer from %d to %d", name, v, lo, hi)})
		return 0, false
	}
	return n, true
}

// maxDeadLetters bounds one peek or receive of the emulation's dead letters.
const maxDeadLetters = 1 << 20

// peekDeadLetters: GET …/deadletter[?from=S&max=N] lists dead letters from
// sequence number S on without locking them (PeekMessages).
func (h *Host) peekDeadLetters(w http.ResponseWriter, r *http.Request) {
	q := h.queueFor(w, r)
	if q == nil {
		return
	}
	from, ok := intParam(w, r, "from", 0, 0, 1<<62)
	if !ok {
		return
	}
	max, ok := intParam(w, r, "max", maxDeadLetters, 1, maxDeadLetters)
	if !ok {
		return
	}
	out := []deadLetterView{}
	for _, m := range q.PeekDeadLetters(from, int(max)) {
		out = append(out, viewDeadLetter(m))
	}
	writeJSON(w, http.StatusOK, out)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
