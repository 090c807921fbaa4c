//go:build !race

package healsim

const defaultSeeds = 300
