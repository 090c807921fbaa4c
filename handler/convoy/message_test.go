package convoy_test

import (
	"encoding/json"
	"testing"

	"github.com/convoy-dev/convoy/handler/convoy"
)

func TestIntProperty(t *testing.T) {
	for _, v := range []any{int64(7), int32(7), 7, 7.0, json.Number("7"), "7"} {
		if n, ok := convoy.IntProperty(v); !ok || n != 7 {
			t.Errorf("IntProperty(%#v) = %d, %v", v, n, ok)
		}
	}
	for _, v := range []any{7.5, "seven", nil, true, json.Number("7.5")} {
		if _, ok := convoy.IntProperty(v); ok {
			t.Errorf("IntProperty(%#v) accepted", v)
		}
	}
}
