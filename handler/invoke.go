package handler

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/trace"

	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/invocation"
	"github.com/convoy-dev/convoy/handler/metrics"
)

// call is one invocation being handled: its payload, its logger (function,
// invocation id, then whatever the function adds) and the lines that go back
// to the host in Logs.
type call struct {
	req   *invocation.Request
	log   *slog.Logger
	attrs []any // the invocation's: function, invocation id
	logs  []string
	msgs  []*msgTrace // the messages of a traced function, with their spans (tracing.go)
	// drained are the trace contexts of parked messages this invocation
	// applied, by order id and seq (tracing.go).
	drained map[drainedKey]trace.SpanContext
	// metrics records the function's messages (nil: metrics off, or a
	// function not triggered by a queue); consumed counts the messages the
	// invocation was given.
	metrics  *metrics.Consumer
	consumed int
	// processor is the domain's functions of a processor's invocation,
	// whose messages get spans and trace fields (message_spans.go); nil
	// for other functions.
	processor *Functions
}

// logAt logs a line with the invocation's attributes first, and the trace
// fields of the message it is about last (traceAttrs). (Not a Logger.With
// per invocation: it formats them even when nothing is logged.)
func (c *call) logAt(level slog.Level, msg string, attrs ...any) {
	c.write(level, msg, c.traceAttrs(msg, attrs)...)
}

func (c *call) write(level slog.Level, msg string, attrs ...any) {
	if ctx := context.Background(); c.log.Enabled(ctx, level) {
		c.log.Log(ctx, level, msg, append(c.attrs[:len(c.attrs):len(c.attrs)], attrs...)...)
	}
}

// outcome logs one line of the invocation's outcome and returns it to the host
// in Logs too (the host writes successful calls' Logs to the function's log),
// its values quoted as slog's text handler quotes them (logLine).
func (c *call) outcome(level slog.Level, msg string, attrs ...any) {
	attrs = c.traceAttrs(msg, attrs)
	c.write(level, msg, attrs...)
	c.logs = append(c.logs, logLine(msg, attrs...))
}

// invocationFunc handles one decoded invocation; its Outputs and ReturnValue
// are returned, an error fails the invocation.
type invocationFunc func(ctx context.Context, c *call) (outputs map[string]any, err error)

// invocation adapts fn to POST /<name>: it decodes the envelope, runs fn
// within the function's deadline (deadlines) and answers as the host
// requires (application/json; non-2xx fails the invocation, so Service Bus
// abandons the message and redelivers it).
func (s *server) invocation(name string, fn invocationFunc) echo.HandlerFunc {
	return func(ec echo.Context) error {
		r := ec.Request()
		c := &call{log: s.Logger, attrs: []any{"function", name, "invocationId", r.Header.Get("X-Azure-Functions-InvocationId")},
			metrics: s.consumers[name]}
		if d, ok := s.processors[name]; ok {
			c.processor = &d.fns
		}
		var start time.Time
		if c.metrics != nil {
			start = time.Now()
		}
		ctx, cancel := s.withDeadline(r.Context(), name)
		defer cancel()
		outputs, err := s.decodeAndRun(ctx, ec, c, name, fn)
		err = s.pastDeadline(ctx, name, err)
		if c.metrics != nil {
			c.metrics.Processed(ctx, c.consumed, time.Since(start), errorType(err))
		}
		defer c.endMessageSpans(err)
		if err != nil {
			status, body := errorResponse(err)
			if status < 500 {
				// The host only tells success from failure; an invocation that
				// fails must not look like a success whatever the cause.
				status = http.StatusInternalServerError
			}
			c.logAt(slog.LevelError, "invocation failed", "class", string(fault.CodeOf(err)), "error", err)
			return ec.JSON(status, invocation.Response{Outputs: map[string]any{}, Logs: c.logs, Error: body.Error})
		}
		if outputs == nil {
			outputs = map[string]any{}
		}
		return ec.JSON(http.StatusOK, invocation.Response{Outputs: outputs, Logs: c.logs})
	}
}

// errorType is err's error.type in the metrics: its class, "" for none.
func errorType(err error) string {
	if err == nil {
		return ""
	}
	return string(fault.CodeOf(err))
}

func (s *server) decodeAndRun(ctx context.Context, ec echo.Context, c *call, name string, fn invocationFunc) (map[string]any, error) {
	body, err := s.readBody(ec)
	if err != nil {
		return nil, err
	}
	if c.req, err = invocation.Parse(body); err != nil {
		return nil, fault.Wrap(fault.Invalid, err, "unreadable invocation")
	}
	c.startMessageSpans(ctx)
	return fn(ctx, c)
}
