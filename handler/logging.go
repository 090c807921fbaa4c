package handler

import (
	"context"
	"io"
	"log/slog"
	"strings"
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
