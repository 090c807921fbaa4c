package devhost

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/convoy-dev/convoy/handler/localbus"
)

// queueRoutes: the emulated queues for senders (the local:// transport of
// package localbus) and tools, at /devhost/queues/….
func (h *Host) queueRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /devhost/queues/{queue}/messages", h.sendMessages)
	mux.HandleFunc("GET /devhost/queues/{queue}", h.queueStats)
	mux.HandleFunc("GET /devhost/queues/{queue}/deadletter", h.deadLetters)
	mux.HandleFunc("DELETE /devhost/queues/{queue}/deadletter/{seq}", h.completeDeadLetter)
}

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
		if q.Properties().RequiresSession && m.SessionID == "" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("message %d has no SessionId; queue %s requires sessions", i, q.Name)})
			return
		}
		msgs[i] = Message{MessageID: m.MessageID, SessionID: m.SessionID, ContentType: m.ContentType, Properties: m.ApplicationProperties, Body: []byte(m.Body)}
	}
	accepted, dups := q.Send(msgs)
	writeJSON(w, http.StatusOK, localbus.SendResult{Accepted: accepted, Duplicates: dups})
}

func (h *Host) queueStats(w http.ResponseWriter, r *http.Request) {
	if q := h.queueFor(w, r); q != nil {
		writeJSON(w, http.StatusOK, q.Stats())
	}
}

func (h *Host) deadLetters(w http.ResponseWriter, r *http.Request) {
	q := h.queueFor(w, r)
	if q == nil {
		return
	}
	out := []localbus.WireDeadLetter{}
	for _, m := range q.DeadLetters() {
		out = append(out, localbus.WireDeadLetter{SequenceNumber: m.SequenceNumber, MessageID: m.MessageID, SessionID: m.SessionID,
			ContentType: m.ContentType, ApplicationProperties: m.Properties, Body: string(m.Body), DeliveryCount: m.DeliveryCount,
			DeadLetterReason: m.DeadLetterReason})
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Host) completeDeadLetter(w http.ResponseWriter, r *http.Request) {
	q := h.queueFor(w, r)
	if q == nil {
		return
	}
	seq, err := strconv.ParseInt(r.PathValue("seq"), 10, 64)
	if err != nil || !q.RemoveDeadLetter(seq) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no dead-lettered message " + r.PathValue("seq")})
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"completed": seq})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
