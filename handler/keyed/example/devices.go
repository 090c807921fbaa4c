// Package example is the domain docs/rules.md walks through: metering
// devices whose readings must apply in order. A reading carries the
// device's counter; one below the last is a reset (the counter restarted
// from zero), so the consumption it adds is the counter itself.
package example

import (
	"encoding/json"
	"fmt"

	"github.com/convoy-dev/convoy/handler/keyed"
)

// Device is one device's state.
type Device struct {
	Last     int64 // the last counter read
	Consumed int64 // what the readings add up to
	Resets   int64 // readings below the one before
	Retired  bool  // no reading is taken after a retire
}

// Reading is one message of a device: its counter, or a retire.
type Reading struct {
	Counter int64 `json:"counter"`
	Retire  bool  `json:"retire,omitempty"`
}

// Rules are the devices' rules: keyed.Rules[Device, Reading].
type Rules struct{}

func (Rules) Name() string { return "devices" }

// ReadCommand reads {"counter": 42} or {"retire": true}.
func (Rules) ReadCommand(device string, body []byte) (Reading, error) {
	var r Reading
	if err := json.Unmarshal(body, &r); err != nil {
		return Reading{}, fmt.Errorf("device %s: the body is not a reading: %w", device, err)
	}
	if r.Counter < 0 {
		return Reading{}, fmt.Errorf("device %s: counter %d is negative", device, r.Counter)
	}
	return r, nil
}

// Needs: a reading needs no row besides the state.
func (Rules) Needs(Device, Reading) keyed.Needs { return keyed.Needs{} }

// Decide applies one reading: deterministic, no I/O.
func (Rules) Decide(d Device, r Reading, _ keyed.Rows) (Device, keyed.Writes, error) {
	switch {
	case d.Retired:
		return d, nil, keyed.Reject("the device is retired")
	case r.Retire:
		d.Retired = true
	case r.Counter < d.Last:
		d.Resets++
		d.Consumed += r.Counter
	default:
		d.Consumed += r.Counter - d.Last
	}
	if !r.Retire {
		d.Last = r.Counter
	}
	return d, nil, nil
}

// Tag: a rejection records the counter it refused.
func (Rules) Tag(r Reading) keyed.Props { return keyed.Props{{Name: "Counter", Value: r.Counter}} }

// Version 2 renamed Sum to Consumed; Decode reads both.
func (Rules) Version() int { return 2 }

func (Rules) EncodeState(d Device) keyed.Props {
	return keyed.Props{{Name: "Last", Value: d.Last}, {Name: "Consumed", Value: d.Consumed},
		{Name: "Resets", Value: d.Resets}, {Name: "Retired", Value: d.Retired}}
}

func (Rules) DecodeState(version int, p keyed.Props) (Device, error) {
	d := Device{Last: p.Int("Last"), Consumed: p.Int("Consumed"), Resets: p.Int("Resets"), Retired: p.Bool("Retired")}
	switch version {
	case 1:
		d.Consumed = p.Int("Sum")
	case 2:
	default:
		return Device{}, fmt.Errorf("device state version %d is newer than this release", version)
	}
	return d, nil
}

// A parked reading keeps its counter and whether it retires.
func (Rules) EncodeCommand(r Reading) keyed.Props {
	return keyed.Props{{Name: "Counter", Value: r.Counter}, {Name: "Retire", Value: r.Retire}}
}

func (Rules) DecodeCommand(_ string, p keyed.Props) (Reading, error) {
	return Reading{Counter: p.Int("Counter"), Retire: p.Bool("Retire")}, nil
}

// Budget: the default (a reading writes no row).
func (Rules) Budget() keyed.Budget { return keyed.Budget{} }
