package contracts

import (
	"encoding/json"

	"github.com/runstream/runstream/internal/jsonscan"
)

// maxDecodeDepth is the nesting encoding/json decodes at most; deeper
// documents go to its decoder, which refuses them.
const maxDecodeDepth = 10000

// plainValue decodes a document jsonscan.Plain accepted into the values
// jsonschema.UnmarshalJSON produces for it: map[string]any, []any (empty,
// not nil, for []), string, json.Number, bool and nil. Plain documents
// have no duplicate or escaped member names.
func plainValue(data []byte) any {
	data = trimSpace(data)
	switch data[0] {
	case '{':
		m := map[string]any{}
		jsonscan.Members(data, func(name, value []byte) bool {
			m[string(name)] = plainValue(value)
			return true
		})
		return m
	case '[':
		a := []any{}
		jsonscan.Elements(data, func(value []byte) bool {
			a = append(a, plainValue(value))
			return true
		})
		return a
	case '"':
		if s, ok := jsonscan.String(data); ok {
			return s
		}
		var s string
		json.Unmarshal(data, &s) // valid: Plain accepted it
		return s
	case 't':
		return true
	case 'f':
		return false
	case 'n':
		return nil
	}
	return json.Number(data)
}

func trimSpace(d []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for len(d) > 0 && isSpace(d[0]) {
		d = d[1:]
	}
	for len(d) > 0 && isSpace(d[len(d)-1]) {
		d = d[:len(d)-1]
	}
	return d
}
