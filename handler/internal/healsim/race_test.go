//go:build race

package healsim

// defaultSeeds: under the race detector a seed takes about eight times as long.
const defaultSeeds = 200
