package jsonl

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/runstream/runstream/runevents"
)

// decode parses one line. A plain line (in the shape Record.MarshalJSON
// writes) takes the fast path of parsePlain. Any other line is decoded by
// encoding/json; with legacy set it is then brought to the form the store
// writes: compact content ("" when absent), a metadata object ({} when
// absent or not an object), microsecond times.
func decode(line []byte, legacy bool) (runevents.Record, error) {
	if !legacy {
		if rec, ok := parsePlain(line); ok {
			return rec, nil
		}
	}
	var rec runevents.Record
	if err := json.Unmarshal(line, &rec); err != nil {
		return rec, err
	}
	if legacy {
		rec.Content = compactOr(rec.Content, `""`)
		rec.Metadata = compactOr(rec.Metadata, `{}`)
		if rec.Metadata[0] != '{' {
			rec.Metadata = json.RawMessage(`{}`)
		}
		rec.CreatedAt = rec.CreatedAt.Truncate(time.Microsecond)
	}
	return rec, nil
}

func compactOr(raw json.RawMessage, def string) json.RawMessage {
	var b bytes.Buffer
	if len(raw) == 0 || json.Compact(&b, raw) != nil {
		return json.RawMessage(def)
	}
	return b.Bytes()
}

// parsePlain decodes, without reflection, a line in exactly the shape
// Record.MarshalJSON writes (keys in its order, compact values, strings
// without escapes, the created_at layout). It reports false for any other
// line; the caller then uses encoding/json. For a valid JSON line it
// accepts, the result equals what json.Unmarshal returns (fuzzed). It does
// not validate content and metadata beyond their extent: the caller
// checks the line with json.Valid, or wrote it itself.
func parsePlain(line []byte) (runevents.Record, bool) {
	var r runevents.Record
	p := plainParser{b: line}
	ok := p.literal(`{"thread_id":`) && p.str(&r.ThreadID) &&
		p.literal(`,"run_id":`) && p.str(&r.RunID) &&
		p.literal(`,"event_type":`) && p.str((*string)(&r.EventType)) &&
		p.literal(`,"category":`) && p.str((*string)(&r.Category)) &&
		p.literal(`,"content":`) && p.value(&r.Content) &&
		p.literal(`,"metadata":`) && p.value(&r.Metadata) &&
		p.literal(`,"seq":`) && p.int(&r.Seq) &&
		p.literal(`,"created_at":`) && p.time(&r.CreatedAt)
	if ok && p.literal(`,"user_id":`) {
		ok = p.str(&r.UserID) && r.UserID != ""
	}
	return r, ok && p.literal("}") && len(p.b) == 0
}

// plainParser consumes b from the front.
type plainParser struct{ b []byte }

func (p *plainParser) literal(s string) bool {
	if !bytes.HasPrefix(p.b, []byte(s)) {
		return false
	}
	p.b = p.b[len(s):]
	return true
}

// str reads a JSON string made only of characters that encoding/json
// writes unescaped (and reads back unchanged).
func (p *plainParser) str(dst *string) bool {
	if len(p.b) == 0 || p.b[0] != '"' {
		return false
	}
	for i := 1; i < len(p.b); i++ {
		switch c := p.b[i]; {
		case c == '"':
			s := p.b[1:i]
			if !utf8.Valid(s) || bytes.Contains(s, []byte("\u2028")) || bytes.Contains(s, []byte("\u2029")) {
				return false
			}
			*dst, p.b = string(s), p.b[i+1:]
			return true
		case c < 0x20, c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return false
}

// value reads a compact JSON value followed by ',' or '}', and copies it.
func (p *plainParser) value(dst *json.RawMessage) bool {
	n := valueLen(p.b)
	if n <= 0 {
		return false
	}
	*dst, p.b = bytes.Clone(p.b[:n]), p.b[n:]
	return true
}

// int reads a positive decimal integer without leading zeros.
func (p *plainParser) int(dst *int64) bool {
	n := 0
	for n < len(p.b) && p.b[n] >= '0' && p.b[n] <= '9' {
		n++
	}
	if n == 0 || p.b[0] == '0' {
		return false
	}
	v, err := strconv.ParseInt(string(p.b[:n]), 10, 64)
	if err != nil {
		return false
	}
	*dst, p.b = v, p.b[n:]
	return true
}

// time reads a created_at string in runevents.CreatedAtLayout.
func (p *plainParser) time(dst *time.Time) bool {
	n := len(`"` + runevents.CreatedAtLayout + `"`) // every element of the layout has a fixed width
	if len(p.b) < n || p.b[0] != '"' || p.b[n-1] != '"' {
		return false
	}
	t, err := time.Parse(runevents.CreatedAtLayout, string(p.b[1:n-1]))
	if err != nil {
		return false
	}
	*dst, p.b = t, p.b[n:]
	return true
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
