package sse

import (
	"unicode/utf8"
)

// decodeUTF8 decodes b as the WHATWG Encoding standard's "UTF-8 decode"
// does (without the BOM step, which the Reader applies once per stream):
// each maximal ill-formed subsequence becomes one U+FFFD. This differs from
// ranging over a Go string, which yields one U+FFFD per invalid byte.
//
// Decoding line parts separately gives the same result as decoding the
// whole stream first: CR, LF and ':' are ASCII, and an ASCII byte always
// ends an incomplete sequence (emitting U+FFFD) before being itself.
func decodeUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	var (
		needed, seen int
		start        int  // offset in b of the sequence being read
		lower, upper byte = 0x80, 0xBF
	)
	for i := 0; i < len(b); i++ {
		c := b[i]
		if needed == 0 {
			switch {
			case c < 0x80:
				out = append(out, c)
			case c >= 0xC2 && c <= 0xDF:
				needed, start = 1, i
			case c >= 0xE0 && c <= 0xEF:
				if c == 0xE0 {
					lower = 0xA0
				}
				if c == 0xED {
					upper = 0x9F
				}
				needed, start = 2, i
			case c >= 0xF0 && c <= 0xF4:
				if c == 0xF0 {
					lower = 0x90
				}
				if c == 0xF4 {
					upper = 0x8F
				}
				needed, start = 3, i
			default:
				out = utf8.AppendRune(out, utf8.RuneError)
			}
			continue
		}
		if c < lower || c > upper {
			// The sequence is cut short: one U+FFFD for it, then c is
			// processed again as the start of something new.
			needed, seen, lower, upper = 0, 0, 0x80, 0xBF
			out = utf8.AppendRune(out, utf8.RuneError)
			i--
			continue
		}
		lower, upper = 0x80, 0xBF
		seen++
		if seen == needed {
			// The bounds checks above make the sequence well-formed, so
			// its bytes can be copied as they are.
			out = append(out, b[start:i+1]...)
			needed, seen = 0, 0
		}
	}
	if needed != 0 {
		out = utf8.AppendRune(out, utf8.RuneError)
	}
	return string(out)
}
