package devhost

import (
	"github.com/convoy-dev/convoy/handler/domains"
	"github.com/convoy-dev/convoy/handler/settings"
)

// QueueSettings are the app settings the function.json bindings read queue
// names from (%OrdersQueueName%, %AccountsQueueName%, %LedgersQueueName%),
// one per registered domain and the ledgers queue's, at their defaults, as
// local.settings.json.example and infra/ set them. The host resolves them
// from the app settings alone (a binding whose setting is missing fails),
// so whoever starts the emulation passes them.
func QueueSettings() map[string]string {
	s := map[string]string{"LedgersQueueName": settings.DefaultLedgersQueue}
	for _, d := range domains.All {
		s[settings.QueueSetting(d)] = settings.DefaultQueue(d)
	}
	return s
}

// WithQueueSettings is settings with QueueSettings under them: a value of
// settings wins.
func WithQueueSettings(settings map[string]string) map[string]string {
	out := QueueSettings()
	for k, v := range settings {
		out[k] = v
	}
	return out
}
