package runevents

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Filters are the metadata values that reads filter on, read exactly as
// Record.MetadataString reads them (escaped keys decoded, the last of
// duplicate keys winning). Stores derive them once, on write.
type Filters struct {
	// TaskID is metadata.task_id; HasTaskID reports whether it is a JSON
	// string (null reads as "").
	TaskID    string
	HasTaskID bool
	// Middleware reports whether metadata.caller is a string starting with
	// "middleware:".
	Middleware bool
}

// FiltersOf derives the filters of a metadata object. Compact metadata,
// the form Prepare stores, is read in one pass without decoding it into a
// map; any other form is decoded.
func FiltersOf(metadata []byte) Filters {
	task, caller, ok := scanFilters(metadata)
	if !ok {
		var m map[string]json.RawMessage
		if json.Unmarshal(metadata, &m) != nil {
			return Filters{}
		}
		task, caller = jsonString(m["task_id"]), jsonString(m["caller"])
	}
	var f Filters
	if task != nil {
		f.TaskID, f.HasTaskID = *task, true
	}
	f.Middleware = caller != nil && strings.HasPrefix(*caller, MiddlewareCallerPrefix)
	return f
}

// scanFilters reads metadata.task_id and metadata.caller from a compact
// JSON object. ok is false when m is not one, so nothing can be said.
func scanFilters(m []byte) (taskID, caller *string, ok bool) {
	if len(m) < 2 || m[0] != '{' {
		return nil, nil, false
	}
	if len(m) == 2 && m[1] == '}' {
		return nil, nil, true
	}
	i := 1
	for i < len(m) && m[i] == '"' {
		keyEnd := skipString(m, i)
		if keyEnd >= len(m) || m[keyEnd] != ':' {
			return nil, nil, false
		}
		valueEnd := skipValue(m, keyEnd+1)
		if valueEnd >= len(m) || (m[valueEnd] != ',' && m[valueEnd] != '}') {
			return nil, nil, false
		}
		switch jsonKey(m[i:keyEnd]) {
		case "task_id":
			taskID = jsonString(m[keyEnd+1 : valueEnd])
		case "caller":
			caller = jsonString(m[keyEnd+1 : valueEnd])
		}
		if m[valueEnd] == '}' {
			return taskID, caller, valueEnd == len(m)-1
		}
		i = valueEnd + 1
	}
	return nil, nil, false
}

// skipString returns the index after the JSON string starting at m[i].
func skipString(m []byte, i int) int {
	for i++; i < len(m); i++ {
		switch m[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(m)
}

// skipValue returns the index of the ',' or '}' that ends the compact JSON
// value starting at m[i], or len(m).
func skipValue(m []byte, i int) int {
	depth := 0
	for i < len(m) {
		switch m[i] {
		case '"':
			i = skipString(m, i)
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
		case ',':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	return len(m)
}

// jsonKey decodes a JSON string key.
func jsonKey(raw []byte) string {
	if len(raw) >= 2 && bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// jsonString returns the string a JSON value decodes to, "" for null, and
// nil for any other value or none.
func jsonString(raw []byte) *string {
	var s string
	switch {
	case len(raw) == 0:
		return nil
	case string(raw) == "null":
	case len(raw) < 2 || raw[0] != '"':
		return nil
	case bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw):
		s = string(raw[1 : len(raw)-1])
	case json.Unmarshal(raw, &s) != nil:
		return nil
	}
	return &s
}
