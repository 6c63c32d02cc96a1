// Package jsonscan reads JSON text in one pass over its bytes, without
// decoding it into Go values: Plain says whether a request body is JSON
// of the plain kind the ingest path meets, and Members, Elements and
// String take apart JSON that Plain accepted. They only answer yes or
// no: a caller that gets no runs its exact (slower) decoder, which
// produces the error, so that the fast path never changes an answer.
package jsonscan

import (
	"bytes"
	"strconv"
	"sync"
	"unicode/utf8"
)

// namesPool keeps the name stacks of finished scans: a scan's stack
// escapes to the heap (the scanner's methods recurse), and Plain runs
// several times on every ingest request.
var namesPool = sync.Pool{New: func() any { return new([][]byte) }}

// maxPooledNames bounds the stacks namesPool keeps.
const maxPooledNames = 1024

// maxMembers bounds the members of one object Plain checks for
// duplicates (a linear search); an object with more is not plain.
const maxMembers = 64

// Plain reports whether data is one JSON value (RFC 8259) of valid UTF-8,
// optionally surrounded by white space, that is nested at most maxDepth
// arrays and objects deep, whose objects have at most 64 members, none
// named twice and none with a backslash in its name, whose numbers are
// finite float64 values, and whose strings have no \u escape of a UTF-16
// surrogate. Every value it accepts is valid JSON without duplicate
// member names; some valid ones (surrogate escapes, escaped names, big
// objects) it leaves to a slower check.
func Plain(data []byte, maxDepth int) bool {
	if !utf8.Valid(data) {
		return false
	}
	stack := namesPool.Get().(*[][]byte)
	s := scanner{data: data, maxDepth: maxDepth, names: (*stack)[:0]}
	i, ok := s.value(space(data, 0), 0)
	if names := s.names[:cap(s.names)]; len(names) <= maxPooledNames {
		clear(names) // the pool must not keep data alive
		*stack = names[:0]
		namesPool.Put(stack)
	}
	return ok && space(data, i) == len(data)
}

type scanner struct {
	data     []byte
	maxDepth int
	names    [][]byte // the names of the members of the objects being scanned
}

// value checks the value at i, at the given depth (0 at the top), and
// returns the offset after it.
func (s *scanner) value(i, depth int) (int, bool) {
	d := s.data
	if i >= len(d) {
		return i, false
	}
	switch c := d[i]; {
	case c == '"':
		return s.str(i)
	case c == '{':
		return s.object(i, depth+1)
	case c == '[':
		return s.array(i, depth+1)
	case c == 't':
		return literal(d, i, "true")
	case c == 'f':
		return literal(d, i, "false")
	case c == 'n':
		return literal(d, i, "null")
	case c == '-' || '0' <= c && c <= '9':
		return number(d, i)
	}
	return i, false
}

func (s *scanner) object(i, depth int) (int, bool) {
	if depth > s.maxDepth {
		return i, false
	}
	d := s.data
	first := len(s.names)
	defer func() { s.names = s.names[:first] }()
	i = space(d, i+1)
	if i < len(d) && d[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(d) || d[i] != '"' {
			return i, false
		}
		end, ok := s.str(i)
		if !ok {
			return i, false
		}
		name := d[i+1 : end-1]
		if bytes.IndexByte(name, '\\') >= 0 || len(s.names)-first >= maxMembers {
			return i, false
		}
		for _, seen := range s.names[first:] {
			if bytes.Equal(seen, name) {
				return i, false
			}
		}
		s.names = append(s.names, name)
		i = space(d, end)
		if i >= len(d) || d[i] != ':' {
			return i, false
		}
		if i, ok = s.value(space(d, i+1), depth); !ok {
			return i, false
		}
		i = space(d, i)
		switch {
		case i < len(d) && d[i] == ',':
			i = space(d, i+1)
		case i < len(d) && d[i] == '}':
			return i + 1, true
		default:
			return i, false
		}
	}
}

func (s *scanner) array(i, depth int) (int, bool) {
	if depth > s.maxDepth {
		return i, false
	}
	d := s.data
	i = space(d, i+1)
	if i < len(d) && d[i] == ']' {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = s.value(i, depth); !ok {
			return i, false
		}
		i = space(d, i)
		switch {
		case i < len(d) && d[i] == ',':
			i = space(d, i+1)
		case i < len(d) && d[i] == ']':
			return i + 1, true
		default:
			return i, false
		}
	}
}

// str checks the string at i (at its opening quote) and returns the
// offset after its closing quote.
func (s *scanner) str(i int) (int, bool) {
	d := s.data
	for i++; i < len(d); i++ {
		i = plainEnd(d, i)
		if i == len(d) {
			break
		}
		switch c := d[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			if i+1 >= len(d) {
				return i, false
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				r, ok := hex4(d, i+2)
				if !ok || 0xD800 <= r && r <= 0xDFFF {
					return i, false
				}
				i += 5
			default:
				return i, false
			}
		}
	}
	return i, false
}

// hex4 decodes the four hexadecimal digits at i.
func hex4(d []byte, i int) (rune, bool) {
	if i+4 > len(d) {
		return 0, false
	}
	var r rune
	for _, c := range d[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

func literal(d []byte, i int, lit string) (int, bool) {
	if !bytes.HasPrefix(d[i:], []byte(lit)) {
		return i, false
	}
	return i + len(lit), true
}

// number checks the number at i: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
// within float64's range.
func number(d []byte, i int) (int, bool) {
	start := i
	if d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		i = digits(d, i)
	default:
		return i, false
	}
	if i < len(d) && d[i] == '.' {
		if i+1 >= len(d) || !isDigit(d[i+1]) {
			return i, false
		}
		i = digits(d, i+1)
	}
	exponent := i < len(d) && (d[i] == 'e' || d[i] == 'E')
	if exponent {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || !isDigit(d[i]) {
			return i, false
		}
		i = digits(d, i)
	}
	// Without an exponent, fewer than 300 characters are below 1e300.
	if exponent || i-start >= 300 {
		if _, err := strconv.ParseFloat(string(d[start:i]), 64); err != nil {
			return i, false
		}
	}
	return i, true
}

func digits(d []byte, i int) int {
	for i < len(d) && isDigit(d[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// space returns the offset of the first byte at or after i that is not
// JSON white space.
func space(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

// Members calls f with the raw name (between its quotes, escapes kept)
// and the value's bytes of each member of the object data holds, in
// order, until f returns false. data must be valid JSON (Plain). It
// returns false when data is not an object or f returned false.
func Members(data []byte, f func(name, value []byte) bool) bool {
	i := space(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = space(data, i+1)
	for i < len(data) && data[i] == '"' {
		end := valueEnd(data, i)
		name := data[i+1 : end-1]
		start := space(data, space(data, end)+1) // past the colon
		end = valueEnd(data, start)
		if !f(name, data[start:end:end]) {
			return false
		}
		i = space(data, end)
		if data[i] == ',' {
			i = space(data, i+1)
		}
	}
	return true
}

// Elements calls f with the bytes of each element of the array data
// holds, in order, until f returns false. data must be valid JSON
// (Plain). It returns false when data is not an array or f returned
// false.
func Elements(data []byte, f func(value []byte) bool) bool {
	i := space(data, 0)
	if i >= len(data) || data[i] != '[' {
		return false
	}
	i = space(data, i+1)
	for i < len(data) && data[i] != ']' {
		end := valueEnd(data, i)
		if !f(data[i:end:end]) {
			return false
		}
		i = space(data, end)
		if data[i] == ',' {
			i = space(data, i+1)
		}
	}
	return true
}

// String returns the text of the JSON string value, which must be valid
// JSON; ok is false when value is not a string or holds an escape.
func String(value []byte) (s string, ok bool) {
	if len(value) < 2 || value[0] != '"' || bytes.IndexByte(value, '\\') >= 0 {
		return "", false
	}
	return string(value[1 : len(value)-1]), true
}

// valueEnd returns the offset after the value of the valid JSON data
// that starts at i.
func valueEnd(d []byte, i int) int {
	depth := 0
	for ; i < len(d); i++ {
		switch d[i] {
		case '"':
			i = StringEnd(d, i+1)
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1
			}
			if depth < 0 { // a scalar ended by its container
				return i
			}
		case ',', ' ', '\t', '\n', '\r', ':':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}
