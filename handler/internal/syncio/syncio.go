// Package syncio is the one writer that several goroutines share in the
// emulation and in the tests: the emulation's log, and the output of a
// process the tests start (Azurite, make devhost).
package syncio

import (
	"bytes"
	"io"
	"sync"
)

// Writer takes writes from several goroutines at once, each whole and in
// turn. NewWriter passes them on to another writer; the zero Writer keeps
// them, and String returns what it kept.
type Writer struct {
	mu   sync.Mutex
	to   io.Writer // nil: kept in kept
	kept bytes.Buffer
}

// NewWriter returns a Writer that passes each write on to w.
func NewWriter(w io.Writer) *Writer { return &Writer{to: w} }

func (s *Writer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.to != nil {
		return s.to.Write(p)
	}
	return s.kept.Write(p)
}

// String is what the Writer kept ("" when it passes writes on).
func (s *Writer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kept.String()
}
