package handler

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/metrics"
	"github.com/convoy-dev/convoy/handler/operator"
)

// Domain is one registered domain as the server serves it: its rules and
// the ports its functions use, each on the domain's own queue and table, so
// that one domain's poison message, outage or backlog never holds up
// another's keys.
type Domain struct {
	Rules     keyed.Domain
	Processor KeyProcessor
	Keys      KeyReader
	Blocked   convoy.BlockedIndex
	Replay    operator.Replayer
	Heal      Healer // automatic replay, the summary, the blocked keys' causes (optional)
	// Allocations reads what publishing allocated to a key (the ledgers
	// table), for the lag its status shows; nil: the lag says it is unknown.
	Allocations convoy.Allocations
	// Queue names the domain's queue in the metrics' attributes; default
	// the domain's Name.
	Queue string
}

// KeyProcessor applies a domain's messages (convoy.Processor).
type KeyProcessor interface {
	Process(ctx context.Context, id string, msgs []convoy.Message) (convoy.Result, error)
	Skip(ctx context.Context, id string, seq int64) (convoy.Result, convoy.View, error)
	// Resume drains a key whose next seq is parked (a drain cut short).
	Resume(ctx context.Context, id string) (convoy.Result, error)
}

// KeyReader reads a key's stored state (convoy.Store).
type KeyReader interface {
	Load(ctx context.Context, id string) (*convoy.Key, error)
}

// Functions are a domain's function names (its folders under functions/,
// and so its invocation routes) and the routes of its HTTP functions, as
// they derive from its Name ("orders") and Noun ("order"): the one place
// that derives them. A route is the host's, as function.json spells it
// ("orders/{orderId}", below /api/).
type Functions struct {
	Name, Noun string
	// IDName names a key's id in routes, answers and log lines: "orderId".
	IDName string

	Processor string // <Noun>Processor, queue-triggered
	Status    string // <Noun>Status: GET StatusRoute
	Blocked   string // Blocked<Name>: GET BlockedRoute?blocked=true
	Replay    string // Replay<Noun> (admin): POST ReplayRoute
	Skip      string // Skip<Noun>Gap (admin), SkipGap for orders: POST SkipRoute

	StatusRoute, BlockedRoute, ReplayRoute, SkipRoute string // "orders/{orderId}", "orders", "orders/{orderId}/replay", …
}

// legacySkipDomain is the domain whose skip function kept its name from
// before there were domains: SkipGap, not SkipOrderGap.
const legacySkipDomain = "orders"

// FunctionsOf derives d's function names and routes: for orders, exactly
// the functions deployed before domains (OrderProcessor, OrderStatus,
// BlockedOrders, ReplayOrder, SkipGap on /api/orders…).
func FunctionsOf(d keyed.Domain) Functions {
	name, noun := d.Name(), d.Noun()
	id := operator.IDName(d)
	f := Functions{Name: name, Noun: noun, IDName: id,
		Processor: title(noun) + "Processor", Status: title(noun) + "Status", Blocked: "Blocked" + title(name),
		Replay: "Replay" + title(noun), Skip: "Skip" + title(noun) + "Gap",
		BlockedRoute: name, StatusRoute: name + "/{" + id + "}",
	}
	f.ReplayRoute, f.SkipRoute = f.StatusRoute+"/replay", f.StatusRoute+"/skip"
	if name == legacySkipDomain {
		f.Skip = FnSkipGap
	}
	return f
}

// echoRoute is the server's route of a host route: below /api/, its
// parameters as echo names them ("orders/{orderId}": "/api/orders/:orderId").
func echoRoute(route string) string {
	return "/api/" + strings.NewReplacer("{", ":", "}", "").Replace(route)
}

// title is s with its first letter upper-cased ("orders": "Orders").
func title(s string) string {
	if s == "" {
		return ""
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// served is a domain with what the server derived from it.
type served struct {
	Domain
	fns      Functions
	consumer *metrics.Consumer // its processor's (nil: metrics off)
}

// servedDomains derives each domain's functions; a domain registered twice,
// or two domains whose functions share a name, is a programming error.
func servedDomains(ds []Domain, m *metrics.Recorder) []*served {
	out := make([]*served, 0, len(ds))
	// The names the server's own functions and routes hold already.
	names := map[string]string{}
	for _, fn := range []string{FnLedgerIngest, FnLedgerUpload, FnReplayAll, FnAutoReplay, FnSummary, FnDashboard, "ledgers", "deadletters", "summary", "dashboard"} {
		names[fn] = "the server"
	}
	for _, d := range ds {
		f := FunctionsOf(d.Rules)
		for _, fn := range []string{f.Name, f.Processor, f.Status, f.Blocked, f.Replay, f.Skip} {
			if other, ok := names[fn]; ok {
				panic(fmt.Sprintf("handler: domain %q: the name %s is %s's already", f.Name, fn, other))
			}
			names[fn] = "domain " + f.Name
		}
		if d.Queue == "" {
			d.Queue = f.Name
		}
		out = append(out, &served{Domain: d, fns: f, consumer: m.Consumer(f.Processor, d.Queue)})
	}
	return out
}

// domainParam is the query parameter that selects a domain (HealthSummary,
// Dashboard, ReplayDeadLetters).
const domainParam = "domain"

// selected is the domain q selects with ?domain=<Name>, the first when it
// names none; an unknown name is an Invalid fault that lists the known ones.
func (s *server) selected(q url.Values) (*served, error) {
	if len(s.domains) == 0 {
		return nil, fault.Errorf(fault.Internal, "no domain is configured")
	}
	v, ok := q[domainParam]
	if !ok {
		return s.domains[0], nil
	}
	if len(v) != 1 {
		return nil, fault.Errorf(fault.Invalid, "domain is given %d times, at most once", len(v))
	}
	known := make([]string, len(s.domains))
	for i, d := range s.domains {
		if d.fns.Name == v[0] {
			return d, nil
		}
		known[i] = d.fns.Name
	}
	return nil, fault.Errorf(fault.Invalid, "domain %s is not one of the domains served: %s", keyed.Quote(v[0]), strings.Join(known, ", "))
}
