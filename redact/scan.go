package redact

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/runstream/runstream/internal/jsonscan"
)

// hiddenBlockTypes are the "type" values that make object act on a block.
var hiddenBlockTypes = map[string]bool{
	"thinking": true, "redacted_thinking": true, "thinking_delta": true,
	"signature_delta": true, "reasoning": true,
}

// rawMayChange reports whether Value could change the decoded form of raw,
// which must be valid JSON, without decoding it: a key that a key or
// hidden-reasoning rule acts on, a string that a value rule changes, or a
// string naming a hidden block type. It errs towards true; JSON then makes
// the full pass, which decides. This keeps the common case, no secret, to
// one copy of raw and one decode per string that holds escapes.
func (r *Redactor) rawMayChange(raw []byte) bool {
	s := string(raw) // every string below is a substring of this one copy
	var buf []byte   // reused for strings with escapes
	for i := 0; i < len(s); i++ {
		if s[i] != '"' {
			continue
		}
		end, escaped := stringEnd(s, i+1)
		str := s[i+1 : end]
		if escaped {
			buf = appendUnescaped(slices.Grow(buf[:0], len(str)), str)
			str = string(buf)
		}
		key := isKey(s, end+1)
		i = end
		if key {
			if r.keyActs(str) {
				return true
			}
		} else if hiddenBlockTypes[str] {
			return true
		} else if _, changed := r.pass(str); changed {
			return true
		}
	}
	return false
}

// keyActs reports whether object could act on key. A kept key does not
// act; its value is still scanned, which may only make JSON look closer.
func (r *Redactor) keyActs(key string) bool {
	if slices.Contains(r.keep, key) {
		return false
	}
	var buf [maxKeyTail]byte
	norm, starts := normalizeKey(key, &buf)
	switch string(norm) {
	case "thinking", "redactedthinking", "reasoningcontent":
		return true
	}
	return matchNorm(norm, starts, r.extra) != noMatch
}

// stringEnd returns the index of the quote that closes the JSON string
// whose content starts at s[p], and whether the content has escapes.
func stringEnd(s string, p int) (end int, escaped bool) {
	end = jsonscan.StringEnd(s, p)
	return end, strings.IndexByte(s[p:end], '\\') >= 0
}

// appendUnescaped appends the content of a valid JSON string, escapes
// decoded, to b. Lone surrogates become U+FFFD, as encoding/json does.
func appendUnescaped(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b = append(b, c)
			continue
		}
		i++
		switch s[i] {
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r := hexRune(s, i+1)
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if i+2 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
					r2 = hexRune(s, i+3)
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			b = utf8.AppendRune(b, r)
		default: // '"', '\\', '/'
			b = append(b, s[i])
		}
	}
	return b
}

// hexRune parses the four hex digits at s[p:], or returns U+FFFD.
func hexRune(s string, p int) rune {
	if p+4 > len(s) {
		return utf8.RuneError
	}
	n, err := strconv.ParseUint(s[p:p+4], 16, 32)
	if err != nil {
		return utf8.RuneError
	}
	return rune(n)
}

// isKey reports whether the string that ended before s[p] is an object key:
// the next byte that is not JSON whitespace is ':'.
func isKey(s string, p int) bool {
	for ; p < len(s); p++ {
		switch s[p] {
		case ' ', '\t', '\n', '\r':
		case ':':
			return true
		default:
			return false
		}
	}
	return false
}
