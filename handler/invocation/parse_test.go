package invocation

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// The one-pass decoding of Service Bus invocations gives what the general
// two-pass decoding gives, wherever it applies.
func FuzzOnePassAsTwo(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "*.json"))
	for _, file := range files {
		data, _ := os.ReadFile(file)
		f.Add(data)
	}
	f.Add([]byte(`{"Data":{"message":"x"},"Metadata":{"messageid":"\"a\"","MessageId":"\"b\"","Other":1}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, ok := parseServiceBus(body)
		if !ok {
			return
		}
		general, err := parse(body)
		if err != nil {
			t.Fatalf("one pass decoded what two passes reject: %v", err)
		}
		if !reflect.DeepEqual(fast, general) {
			t.Fatalf("one pass %+v, two passes %+v", fast, general)
		}
	})
}
