package jsonl

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/runstream/runstream/runevents"
)

// metadataFilters returns metadata.task_id (when a JSON string) and whether
// metadata.caller is a JSON string starting with "middleware:", exactly as
// Record.MetadataString reads them (the last of duplicate keys wins).
// Metadata naming neither key is recognised without decoding (a key spelled
// with escapes holds a backslash); compact metadata, the form Prepare
// stores, is scanned without building a map.
func metadataFilters(meta []byte) (taskID string, middleware bool) {
	if !bytes.Contains(meta, []byte(`"task_id"`)) && !bytes.Contains(meta, []byte(`"caller"`)) &&
		!bytes.Contains(meta, []byte(`\`)) {
		return "", false
	}
	var task, caller []byte
	ok := scanObject(meta, func(key, value []byte) {
		switch string(key) {
		case "task_id":
			task = value
		case "caller":
			caller = value
		}
	})
	if !ok {
		var m map[string]json.RawMessage
		if json.Unmarshal(meta, &m) != nil {
			return "", false
		}
		task, caller = m["task_id"], m["caller"]
	}
	var s string
	if json.Unmarshal(task, &s) == nil { // a missing or non-string value fails
		taskID = s
	}
	s = ""
	if json.Unmarshal(caller, &s) == nil {
		middleware = strings.HasPrefix(s, runevents.MiddlewarePrefix)
	}
	return taskID, middleware
}

// scanObject calls fn with each top-level key and raw value of obj, a
// valid compact JSON object. It returns false, maybe after some calls,
// when obj is not in that form or a key holds an escape; the caller then
// decodes obj in full.
func scanObject(obj []byte, fn func(key, value []byte)) bool {
	if len(obj) < 2 || obj[0] != '{' {
		return false
	}
	if string(obj) == "{}" {
		return true
	}
	for i := 1; ; {
		if i >= len(obj) || obj[i] != '"' {
			return false
		}
		n := bytes.IndexByte(obj[i+1:], '"')
		if n < 0 {
			return false
		}
		key := obj[i+1 : i+1+n]
		if bytes.IndexByte(key, '\\') >= 0 {
			return false
		}
		i += n + 2
		if i >= len(obj) || obj[i] != ':' {
			return false
		}
		i++
		n = valueLen(obj[i:])
		if n <= 0 || i+n >= len(obj) {
			return false
		}
		fn(key, obj[i:i+n])
		switch i += n; obj[i] {
		case ',':
			i++
		case '}':
			return i == len(obj)-1
		default:
			return false
		}
	}
}

// valueLen returns the length of the compact JSON value that starts b and
// is followed by ',' or '}', or -1.
func valueLen(b []byte) int {
	depth, inString := 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
				if depth == 0 {
					return i + 1
				}
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 { // the end of a scalar
				return i
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',':
			if depth == 0 {
				return i
			}
		case ' ', '\t', '\n', '\r':
			return -1 // not compact
		}
	}
	return -1
}
