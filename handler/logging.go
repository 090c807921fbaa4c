package handler

import (
	"context"
	"encoding"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// NewLogger returns the program's logger: JSON or text, and split by level as
// the Functions host reads it: stdout lines become Information, stderr lines
// Error, or Warning when they contain "warn" (WorkerProcess), all under the
// category Host.Function.Console. Warnings and errors go to stderr so that
// they keep their level in Application Insights, where the shipped
// host.json keeps Warning and above of that category and drops the rest.
func NewLogger(format, level string, stdout, stderr io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(strings.ToUpper(level)))
	opts := &slog.HandlerOptions{Level: lvl}
	mk := func(w io.Writer) slog.Handler {
		if format == "json" {
			return slog.NewJSONHandler(w, opts)
		}
		return slog.NewTextHandler(w, opts)
	}
	return slog.New(splitHandler{info: mk(stdout), errs: mk(stderr)})
}

// splitHandler sends records of level Warn and above to errs, the rest to info.
type splitHandler struct{ info, errs slog.Handler }

func (h splitHandler) pick(l slog.Level) slog.Handler {
	if l >= slog.LevelWarn {
		return h.errs
	}
	return h.info
}

func (h splitHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.pick(l).Enabled(ctx, l)
}

func (h splitHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.pick(r.Level).Handle(ctx, r)
}

func (h splitHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return splitHandler{info: h.info.WithAttrs(attrs), errs: h.errs.WithAttrs(attrs)}
}

func (h splitHandler) WithGroup(name string) slog.Handler {
	return splitHandler{info: h.info.WithGroup(name), errs: h.errs.WithGroup(name)}
}

// logLine is one line of an invocation's Logs: msg, then " key=value" for
// each of attrs (pairs of a string key and a value, or slog.Attr, as
// slog.Logger.Info takes them), written as slog's text handler writes them.
// A key or value that is empty or holds a space, '=', '"', a control or
// non-printing character or invalid UTF-8 is quoted with strconv.Quote;
// anything else is written as is, so plain ids and numbers read as before
// (sessionId=o-1, deadLettersPermanent=0) and the alert queries match them.
// So a value chosen by a sender (a MessageId, a SessionId, a ledger id) can
// add neither a line nor a field. msg is the program's own text; it is
// quoted only if it holds a character that would break the line.
func logLine(msg string, attrs ...any) string {
	b := make([]byte, 0, 128)
	if strings.ContainsFunc(msg, func(r rune) bool { return r == utf8.RuneError || r != ' ' && !unicode.IsPrint(r) }) {
		b = strconv.AppendQuote(b, msg)
	} else {
		b = append(b, msg...)
	}
	for len(attrs) > 0 {
		var a slog.Attr
		switch x := attrs[0].(type) {
		case string:
			if len(attrs) == 1 {
				a, attrs = slog.String("!BADKEY", x), nil
				break
			}
			a, attrs = slog.Any(x, attrs[1]), attrs[2:]
		case slog.Attr:
			a, attrs = x, attrs[1:]
		default:
			a, attrs = slog.Any("!BADKEY", x), attrs[1:]
		}
		b = appendAttr(b, "", a)
	}
	return string(b)
}

// appendAttr appends " key=value" as slog's text handler does (a group's
// attrs as "group.key=value"). Unlike slog, it keeps an attr of empty key
// and empty value: what is logged is what the line says.
func appendAttr(b []byte, prefix string, a slog.Attr) []byte {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		if a.Key != "" {
			prefix += a.Key + "."
		}
		for _, g := range v.Group() {
			b = appendAttr(b, prefix, g)
		}
		return b
	}
	b = append(b, ' ')
	b = appendText(b, prefix+a.Key)
	b = append(b, '=')
	switch v.Kind() {
	case slog.KindString:
		return appendText(b, v.String())
	case slog.KindTime:
		return appendText(b, v.Time().Format("2006-01-02T15:04:05.000Z07:00"))
	case slog.KindAny:
		switch x := v.Any().(type) {
		case encoding.TextMarshaler:
			text, err := x.MarshalText()
			if err != nil {
				return appendText(b, "!ERROR:"+err.Error())
			}
			return appendText(b, string(text))
		case []byte:
			return strconv.AppendQuote(b, string(x))
		default:
			return appendText(b, fmt.Sprintf("%+v", x))
		}
	default: // numbers, bools, durations: never quoted
		return append(b, v.String()...)
	}
}

// appendText appends s, quoted when slog's text handler would quote it.
func appendText(b []byte, s string) []byte {
	if needsQuoting(s) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

// needsQuoting is slog's rule (log/slog, text_handler.go): empty, or a
// space, '=', '"', an ASCII control character below 0x20, a Unicode space,
// a non-printing character or invalid UTF-8. A backslash and DEL are left
// as they are.
func needsQuoting(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c == ' ' || c == '=' || c == '"' || c < 0x20 {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
		i += size
	}
	return false
}
