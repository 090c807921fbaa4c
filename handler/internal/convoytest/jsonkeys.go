package convoytest

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// DuplicateKey returns a key that appears twice in one object of the JSON
// document doc, at any depth ("" when none does): the tests' oracle for the
// parsers' refusal of duplicate keys, written with encoding/json's tokenizer
// and nothing of theirs.
func DuplicateKey(doc []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var err error
	token := func() json.Token {
		if err != nil {
			return nil
		}
		var tok json.Token
		tok, err = dec.Token()
		return tok
	}
	var value func() string
	value = func() string {
		switch token() {
		case json.Delim('['):
			for err == nil && dec.More() {
				if key := value(); key != "" {
					return key
				}
			}
		case json.Delim('{'):
			keys := map[string]bool{}
			for err == nil && dec.More() {
				key, _ := token().(string)
				if keys[key] {
					return key
				}
				keys[key] = true
				if key := value(); key != "" {
					return key
				}
			}
		default:
			return ""
		}
		token() // ] or }
		return ""
	}
	key := value()
	if err != nil {
		return "", fmt.Errorf("DuplicateKey(%q): %w", doc, err)
	}
	return key, nil
}
