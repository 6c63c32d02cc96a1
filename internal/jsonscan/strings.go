package jsonscan

import (
	"bytes"
	"encoding/binary"
	"strings"
)

// StringEnd returns the offset of the quote that closes the JSON string
// whose content starts at d[i], or len(d) when no quote does. A quote after
// an odd run of backslashes is escaped and does not close it. It looks for
// quotes with IndexByte rather than at every byte: string content is most
// of what the ingest path scans.
func StringEnd[T string | []byte](d T, i int) int {
	for i < len(d) {
		j := indexQuote(d[i:])
		if j < 0 {
			return len(d)
		}
		j += i
		k := j // the run of backslashes before the quote is d[k:j]
		for k > i && d[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 0 {
			return j
		}
		i = j + 1
	}
	return len(d)
}

// indexQuote returns the offset of the first quote in d, or -1.
func indexQuote[T string | []byte](d T) int {
	switch d := any(d).(type) {
	case string:
		return strings.IndexByte(d, '"')
	case []byte:
		return bytes.IndexByte(d, '"')
	}
	panic("unreachable")
}

// plainEnd returns the offset of the first byte from d[i] on that string
// content cannot hold as it is (a quote, a backslash or a control
// character), or len(d). It tests eight bytes at a time.
func plainEnd(d []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(d); i += 8 {
		x := binary.LittleEndian.Uint64(d[i:])
		// A byte below 0x20, or equal to '"' or '\\' (a zero byte after the
		// xor): the classic tests never miss one; a word they flag is
		// looked at byte by byte.
		below := (x - ones*0x20) &^ x
		quote := x ^ (ones * '"')
		backslash := x ^ (ones * '\\')
		if (below|(quote-ones)&^quote|(backslash-ones)&^backslash)&highs != 0 {
			break
		}
	}
	for ; i < len(d); i++ {
		if c := d[i]; c == '"' || c == '\\' || c < 0x20 {
			return i
		}
	}
	return i
}
