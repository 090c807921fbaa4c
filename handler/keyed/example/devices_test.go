package example_test

import (
	"math/rand/v2"
	"testing"

	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/keyed/example"
	"github.com/convoy-dev/convoy/handler/keyed/keyedtest"
)

// readings makes a device's messages: a counter that mostly rises, now and
// then restarts, and sometimes a retire before the end.
func readings(rng *rand.Rand, device string) []example.Reading {
	var rs []example.Reading
	counter := int64(0)
	for range 1 + rng.IntN(40) {
		switch rng.IntN(20) {
		case 0:
			counter = rng.Int64N(10) // a reset
		case 1:
			rs = append(rs, example.Reading{Retire: true})
			continue
		default:
			counter += rng.Int64N(100)
		}
		rs = append(rs, example.Reading{Counter: counter})
	}
	return rs
}

// fold is the oracle, written apart from Decide: consumption is the sum of
// the rises, and of the counter itself after each reset, until a retire.
func fold(rs []example.Reading) example.Device {
	var d example.Device
	for _, r := range rs {
		if d.Retired {
			continue
		}
		if r.Retire {
			d.Retired = true
			continue
		}
		if r.Counter < d.Last {
			d.Resets++
			d.Consumed += r.Counter
		} else {
			d.Consumed += r.Counter - d.Last
		}
		d.Last = r.Counter
	}
	return d
}

func TestDevicesConform(t *testing.T) {
	keyedtest.Conformance(t, example.Rules{}, readings, keyedtest.Options{
		OldStates: []keyedtest.OldState{{Version: 1, Props: keyed.Props{{Name: "Last", Value: int64(7)}, {Name: "Sum", Value: int64(7)}}}},
	})
}

func TestDevicesSimulated(t *testing.T) {
	keyedtest.Simulate(t, example.Rules{}, readings, fold, keyedtest.Options{})
}
