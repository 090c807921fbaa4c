// Package domains registers the per-key rules this function app runs. Each
// runs on its own queue, processor function and table (their names derive
// from the domain's Name and Noun: settings.DomainOf, handler.FunctionsOf),
// so one domain's poison message, queue outage or backlog never holds up
// another's keys. Adding a domain is one line in All (docs/your-rules.md).
package domains

import (
	"github.com/convoy-dev/convoy/handler/accounts"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/orders"
)

// All are the registered domains, in order. The first is the default: a
// ledger entry that names no "domain" is one of its commands, and the
// operator routes that take ?domain= answer for it when none is given.
var All = []keyed.Domain{
	orders.Domain,
	accounts.Domain,
}
