package servicebus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
)

// RetryOptions are the azservicebus client's own retries of one operation
// (azservicebus.ClientOptions.RetryOptions). The SDK's defaults (3 retries
// after 4 s, 12 s and 28 s, each delay up to 2 min) keep an operation on an
// unreachable namespace going for about 45 s, longer than a blocked list may
// take and a good part of functionTimeout. Every caller here retries anyway,
// each within its own deadline (the publisher and the processor for
// TransientRetrySeconds, AutoReplay at its next run, an operator by calling
// again), so the SDK only needs to ride out a blip: 2 retries, after about
// 0.2 s and 0.6 s (±30 % jitter, at most 1 s each), about 1 s in all.
var RetryOptions = azservicebus.RetryOptions{
	MaxRetries:    2, // 0 would mean the SDK's default of 3
	RetryDelay:    200 * time.Millisecond,
	MaxRetryDelay: time.Second,
}

// ClientOptions are the options every azservicebus.Client of the program is
// built with.
func ClientOptions() *azservicebus.ClientOptions {
	return &azservicebus.ClientOptions{RetryOptions: RetryOptions}
}

// OperationTimeout bounds one operation on the dead-letter sub-queue (a peek
// of one page, a completion, an abandon, closing a receiver) within the
// caller's own deadline. Opening the AMQP connection is part of the first
// operation, and the SDK has no timeout of its own for it: a namespace that
// accepts TCP and never answers would hold the operation until the caller's
// deadline. A healthy namespace answers each of these in well under a
// second. It is below handler.UnavailableAnswer (5 s), the target of an
// operator's call that finds Service Bus silent, by the time the rest of
// that call takes (stall_test.go): equal, the answer came in 5.0–5.8 s.
const OperationTimeout = 3 * time.Second

// bounded is ctx bounded by OperationTimeout.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, OperationTimeout)
}

// unreachable says in a few words why Service Bus could not be used when it
// did not answer in time or could not be reached (then with the network
// error), and "" for any other failure.
func unreachable(err error) string {
	var op *net.OpError
	var sbErr *azservicebus.Error
	var cond *amqp.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "Service Bus did not answer in time"
	case errors.As(err, &op):
		return fmt.Sprintf("Service Bus could not be reached (%v)", op)
	case errors.As(err, &cond):
		// Service Bus answered, with an error condition (server busy, timeout, …).
		return fmt.Sprintf("Service Bus answered %s (%s)", cond.Condition, cond.Description)
	case errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeTimeout:
		return "Service Bus answered com.microsoft:timeout (the operation timed out on the service)"
	case errors.As(err, &sbErr) && sbErr.Code == azservicebus.CodeConnectionLost:
		// The SDK's error does not unwrap to the network error; its text
		// is "(connlost): " and the network error's.
		return fmt.Sprintf("Service Bus could not be reached (%s)", strings.TrimPrefix(sbErr.Error(), "(connlost): "))
	}
	return ""
}
