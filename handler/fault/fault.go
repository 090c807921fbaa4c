// Package fault classifies errors once, so that every transport maps them the
// same way: HTTP status codes, queue outcomes and retry decisions all come from
// the Code carried by an *Error.
package fault

import (
	"errors"
	"fmt"
)

// Code is the stable class of an error. Match it with CodeOf, never by text.
type Code string

const (
	Invalid     Code = "invalid"     // bad input; retrying cannot help
	NotFound    Code = "not_found"   // the thing asked for does not exist
	Conflict    Code = "conflict"    // the request contradicts stored state (permanent)
	TooLarge    Code = "too_large"   // input over a size limit
	Unavailable Code = "unavailable" // a dependency failed or raced; retrying may help
	Internal    Code = "internal"    // a bug
)

// Codes lists every Code (a test keeps it complete), for tables keyed by code.
var Codes = []Code{Invalid, NotFound, Conflict, TooLarge, Unavailable, Internal}

// Problem names one fault in a ledger or message: which transaction, which field, why.
type Problem struct {
	Index  int    `json:"index"`
	Field  string `json:"field,omitempty"`
	Reason string `json:"reason"`
}

// Error is an error with a stable code and, for input errors, the problems found.
type Error struct {
	Code     Code
	Message  string
	Problems []Problem
	Err      error // the cause, if any
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code and message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error with the given code whose message is msg and whose cause is err.
func Wrap(code Code, err error, msg string) *Error {
	return &Error{Code: code, Message: msg, Err: err}
}

// CodeOf returns the code of the first *Error in err's chain, Internal for any
// other non-nil error and "" for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Code
	}
	return Internal
}

// IsTransient reports whether retrying the same call later may succeed.
func IsTransient(err error) bool { return CodeOf(err) == Unavailable }

// ProblemsOf returns the problems carried by err, if any.
func ProblemsOf(err error) []Problem {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Problems
	}
	return nil
}

// MessageOf returns the one-sentence message of err's *Error, or err's text.
func MessageOf(err error) string {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Message
	}
	return err.Error()
}
