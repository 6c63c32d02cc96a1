// Package jsonenc appends JSON strings to byte slices without reflection,
// for the hand-written encoders of the record envelope and the workflow
// envelope, which sit on every replay's hot path.
package jsonenc

import (
	"encoding/json"

	"github.com/runstream/runstream/internal/jsonscan"
)

// AppendString appends s as a JSON string, escaped exactly as
// encoding/json escapes it. Printable ASCII without quotes, backslashes and
// the HTML characters <, > and &, the common case for ids and names, is
// copied as it is; anything else goes through encoding/json. s is a string
// or the bytes of one (a value a driver read, not copied into a string).
func AppendString[T string | []byte](b []byte, s T) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			enc, _ := json.Marshal(string(s)) // a string always marshals
			return append(b, enc...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// IsCompact reports whether data has no insignificant white space outside
// strings, so that it can be copied as it is where compact JSON is wanted.
// It does not check that data is valid JSON.
func IsCompact(data []byte) bool {
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			return false
		case '"':
			i = jsonscan.StringEnd(data, i+1)
		}
	}
	return true
}
