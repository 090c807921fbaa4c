// Package healsim is a deterministic simulation of orders' lives under
// operator actions and faults, the way FoundationDB and TigerBeetle test
// theirs: a seeded, randomised run of the real convoy.Processor, replay,
// skip, AutoReplay (heal), the blocked index and the active-orders index on memstore, with faults
// injected at every store operation (a commit cut before or after it lands,
// lost replies, a crash between the index steps, a deadline mid-drain),
// two instances on one order, cache evictions, and skips and replays racing
// applies. After quiescence it checks the invariants healing must keep
// (oracle_test.go; the Service Bus model is bus_test.go, the simulated
// clock clock_test.go). Test code only: `make test` runs a few hundred
// seeds, `make soak` as many as asked.
package healsim
