package tablestore

import (
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
)

// RetryOptions are the retries of one Table Storage request by the aztables
// client and by Batches (the same azcore retry policy). The SDK's defaults
// have no per-try timeout: a storage account (or an Azurite paused with
// SIGSTOP) that accepts the connection and never answers holds the request
// until the caller's deadline, and AutoReplay's run for its whole 60 s. So
// each try has TryTimeout, 3 s: a healthy account answers a read, a page of
// a query or an entity-group transaction in well under a second (tens of
// milliseconds), so 3 s cuts no normal request, and a try cut short is
// retried once, after about 0.2 s (at most 1 s): a hung account fails a
// request in about 6 s, classified Unavailable. Every caller retries
// anyway, each within its own deadline (the processor and the publisher for
// TransientRetrySeconds, AutoReplay at its next run, an operator by calling
// again), so the SDK only rides out a blip, as servicebus.RetryOptions.
// A commit whose try was cut after the service applied it is then a
// conflict (ETag) and its message a duplicate, as with any lost answer.
var RetryOptions = policy.RetryOptions{
	MaxRetries:    1, // 0 would mean the SDK's default of 3
	TryTimeout:    3 * time.Second,
	RetryDelay:    200 * time.Millisecond,
	MaxRetryDelay: time.Second,
}

// ClientOptions are the options of the aztables clients the program builds.
func ClientOptions() *aztables.ClientOptions {
	return &aztables.ClientOptions{ClientOptions: *BatchOptions()}
}

// BatchOptions are the options of the program's Batches, the same as the
// aztables client's.
func BatchOptions() *azcore.ClientOptions {
	return &azcore.ClientOptions{Retry: RetryOptions}
}
