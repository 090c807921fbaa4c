// Package bench is the benchmark suite behind `make bench`: what one message
// costs the convoy, measured against the floor that HTTP, Table Storage or
// plain JSON decoding already costs, each figure a ratio to a baseline
// measured in the same run (absolute times on a shared machine are noise).
//
// The benchmarks live in the package's tests. Each records its figures; after
// the run, TestMain prints one line "BENCH <name> <value> <unit>" per figure,
// then a table saying what each means and whether it meets its target. There
// are no timed assertions: a missed target is reported, not failed.
package bench
