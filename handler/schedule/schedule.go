// Package schedule parses the NCRONTAB expressions of Azure Functions timer
// triggers: six fields, "{second} {minute} {hour} {day} {month} {day of
// week}", each "*", a number, a range "a-b", a step "*/n" or "a-b/n", or a
// list of those separated by commas; month and day-of-week names (Jan,
// Mon, …) are accepted, Sunday is 0 (7 too). As in NCrontab, a time matches
// when every field matches (day of month and day of week together). The
// TimeSpan form ("00:05:00") is refused: Flex Consumption does not take it.
package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Schedule is a parsed NCRONTAB expression.
type Schedule struct {
	expr   string
	fields [6]uint64 // bit i set: value i allowed
}

var fieldSpecs = [6]struct {
	name     string
	min, max int
	names    []string
}{
	{"second", 0, 59, nil},
	{"minute", 0, 59, nil},
	{"hour", 0, 23, nil},
	{"day", 1, 31, nil},
	{"month", 1, 12, []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}},
	{"day of week", 0, 7, []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}},
}

// MaxLength bounds an expression.
const MaxLength = 200

// Parse reads an NCRONTAB expression of six fields.
func Parse(expr string) (*Schedule, error) {
	if len(expr) > MaxLength {
		return nil, fmt.Errorf("schedule is longer than %d characters", MaxLength)
	}
	parts := strings.Fields(expr)
	if len(parts) != 6 {
		if strings.Count(expr, ":") == 2 {
			return nil, fmt.Errorf("schedule %q is a TimeSpan: use six NCRONTAB fields (second minute hour day month day-of-week), e.g. \"0 */5 * * * *\"", expr)
		}
		return nil, fmt.Errorf("schedule %q has %d fields, want six: second minute hour day month day-of-week, e.g. \"0 */5 * * * *\"", expr, len(parts))
	}
	s := &Schedule{expr: expr}
	for i, p := range parts {
		bits, err := parseField(p, i)
		if err != nil {
			return nil, fmt.Errorf("schedule %q, %s field: %w", expr, fieldSpecs[i].name, err)
		}
		s.fields[i] = bits
	}
	if s.fields[5]&(1<<7) != 0 { // 7 is Sunday too
		s.fields[5] |= 1
	}
	return s, nil
}

func parseField(f string, i int) (uint64, error) {
	spec := fieldSpecs[i]
	var bits uint64
	for item := range strings.SplitSeq(f, ",") {
		rng, stepText, hasStep := strings.Cut(item, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepText)
			if err != nil || n < 1 || n > spec.max+1 {
				return 0, fmt.Errorf("step %q is not a number from 1 to %d", stepText, spec.max+1)
			}
			step = n
		}
		lo, hi := spec.min, spec.max
		if rng != "*" {
			a, b, isRange := strings.Cut(rng, "-")
			var err error
			if lo, err = value(a, spec.min, spec.max, spec.names); err != nil {
				return 0, err
			}
			hi = lo
			if isRange {
				if hi, err = value(b, spec.min, spec.max, spec.names); err != nil {
					return 0, err
				}
				if hi < lo {
					return 0, fmt.Errorf("range %q ends before it starts", rng)
				}
			} else if hasStep {
				hi = spec.max
			}
		}
		for v := lo; v <= hi; v += step {
			bits |= 1 << v
		}
	}
	return bits, nil
}

func value(s string, min, max int, names []string) (int, error) {
	for i, n := range names {
		if strings.EqualFold(s, n) {
			if min == 1 {
				return i + 1, nil
			}
			return i, nil
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < min || n > max {
		return 0, fmt.Errorf("%q is not a value from %d to %d", s, min, max)
	}
	return n, nil
}

func (s *Schedule) String() string { return s.expr }

// Matches reports whether t (to the second) is an occurrence.
func (s *Schedule) Matches(t time.Time) bool {
	return s.fields[0]&(1<<t.Second()) != 0 && s.fields[1]&(1<<t.Minute()) != 0 && s.fields[2]&(1<<t.Hour()) != 0 &&
		s.fields[3]&(1<<t.Day()) != 0 && s.fields[4]&(1<<int(t.Month())) != 0 && s.fields[5]&(1<<int(t.Weekday())) != 0
}

// ErrNever: the expression matches no time within five years (31 February).
var ErrNever = errors.New("the schedule never occurs")

// Next is the first occurrence strictly after t, in t's location.
func (s *Schedule) Next(t time.Time) (time.Time, error) {
	t = t.Truncate(time.Second).Add(time.Second)
	end := t.AddDate(5, 0, 0)
	for t.Before(end) {
		switch {
		case s.fields[4]&(1<<int(t.Month())) == 0:
			t = time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, t.Location())
		case s.fields[3]&(1<<t.Day()) == 0 || s.fields[5]&(1<<int(t.Weekday())) == 0:
			t = time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, t.Location())
		case s.fields[2]&(1<<t.Hour()) == 0:
			t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour()+1, 0, 0, 0, t.Location())
		case s.fields[1]&(1<<t.Minute()) == 0:
			t = t.Truncate(time.Minute).Add(time.Minute)
		case s.fields[0]&(1<<t.Second()) == 0:
			t = t.Add(time.Second)
		default:
			return t, nil
		}
	}
	return time.Time{}, ErrNever
}
