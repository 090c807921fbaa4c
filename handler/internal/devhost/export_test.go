package devhost

import (
	"context"

	"github.com/convoy-dev/convoy/handler/internal/devbus"
)

// InvokeOn is Host.Invoke on a given instance of the function's group, for
// the tests that make two instances' handler processes work one session at
// once (Invoke always takes the first, whose handler serialises a key's calls).
func (h *Host) InvokeOn(ctx context.Context, in *Instance, function string, msgs []*devbus.Message) error {
	_, f, err := h.groupOfFunction(function)
	if err != nil {
		return err
	}
	return h.invoke(ctx, in, f, msgs)
}
