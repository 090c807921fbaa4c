package devhost

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/convoy-dev/convoy/handler/localbus"
)

// queueRoutes: the emulated queues for senders (the local:// transport of
// package localbus) and tools, at /devhost/queues/….
func (h *Host) queueRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /devhost/queues/{queue}/messages", h.sendMessages)
	mux.HandleFunc("GET /devhost/queues/{queue}", h.queueStats)
	mux.HandleFunc("GET /devhost/queues/{queue}/deadletter", h.peekDeadLetters)
	mux.HandleFunc("POST /devhost/queues/{queue}/deadletter/receive", h.receiveDeadLetters)
	mux.HandleFunc("DELETE /devhost/queues/{queue}/deadletter/{seq}", h.settleDeadLetter)
	mux.HandleFunc("POST /devhost/queues/{queue}/deadletter/{seq}/abandon", h.settleDeadLetter)
}

// MaxMessageIDLength is Service Bus's limit on a MessageId.
const MaxMessageIDLength = 128

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
		msgs[i] = Message{MessageID: m.MessageID, SessionID: m.SessionID, ContentType: m.ContentType, Properties: m.ApplicationProperties, Body: []byte(m.Body)}
	}
	accepted, dups, err := q.Send(msgs)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, localbus.SendResult{Accepted: accepted, Duplicates: dups})
}

func (h *Host) queueStats(w http.ResponseWriter, r *http.Request) {
	if q := h.queueFor(w, r); q != nil {
		writeJSON(w, http.StatusOK, q.Stats())
	}
}

func wireDeadLetter(m Message) localbus.WireDeadLetter {
	return localbus.WireDeadLetter{SequenceNumber: m.SequenceNumber, MessageID: m.MessageID, SessionID: m.SessionID,
		ContentType: m.ContentType, ApplicationProperties: m.Properties, Body: string(m.Body), DeliveryCount: m.DeliveryCount,
		DeadLetterReason: m.DeadLetterReason}
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
	out := []localbus.WireDeadLetter{}
	for _, m := range q.PeekDeadLetters(from, int(max)) {
		out = append(out, wireDeadLetter(m))
	}
	writeJSON(w, http.StatusOK, out)
}

// receiveDeadLetters: POST …/deadletter/receive?max=N locks up to N dead
// letters that no one holds (ReceiveMessages in peek-lock mode).
func (h *Host) receiveDeadLetters(w http.ResponseWriter, r *http.Request) {
	q := h.queueFor(w, r)
	if q == nil {
		return
	}
	max, ok := intParam(w, r, "max", 0, 1, maxDeadLetters)
	if !ok {
		return
	}
	if max == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "max (how many dead letters to receive) is required"})
		return
	}
	out := []localbus.WireDeadLetter{}
	for _, m := range q.ReceiveDeadLetters(int(max)) {
		wm := wireDeadLetter(m.Message)
		wm.LockToken, wm.LockedUntil = strconv.FormatInt(m.LockToken, 10), m.LockedUntil.UTC().Format(time.RFC3339Nano)
		out = append(out, wm)
	}
	writeJSON(w, http.StatusOK, out)
}

// settleDeadLetter: DELETE …/deadletter/{seq}?lockToken=T completes a
// received dead letter, POST …/deadletter/{seq}/abandon?lockToken=T releases
// it; 410 when the lock was lost (expired, or never held by that token).
func (h *Host) settleDeadLetter(w http.ResponseWriter, r *http.Request) {
	q := h.queueFor(w, r)
	if q == nil {
		return
	}
	seq, err := strconv.ParseInt(r.PathValue("seq"), 10, 64)
	if err != nil || seq < 1 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("sequence number %q is not a positive integer", r.PathValue("seq"))})
		return
	}
	token, err := strconv.ParseInt(r.URL.Query().Get("lockToken"), 10, 64)
	if err != nil || token < 1 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "lockToken (from a receive) is required: a dead letter is settled by its lock"})
		return
	}
	settle, verb := q.CompleteDeadLetter, "completed"
	if r.Method == http.MethodPost {
		settle, verb = q.AbandonDeadLetter, "abandoned"
	}
	if err := settle(seq, token); err != nil {
		writeJSON(w, http.StatusGone, map[string]string{"error": fmt.Sprintf("dead letter %d: %v", seq, err)})
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{verb: seq})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
