package redact

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// maxEchoRun is the longest run of non-space bytes, and the longest
// double-quoted span, that an error answer keeps whole; a longer one (a
// caller's id, cursor or value quoted by the message) is cut to an
// ExcerptRunes excerpt.
const maxEchoRun = 64

// maxEchoBytes bounds a whole text an error answer holds: the longest of
// runstream's own messages, with the values they quote cut, is about half
// of it. It stops what the other rules leave whole: a caller's value of
// many short words that a message does not quote (a schema problem's
// path, say).
const maxEchoBytes = 320

// maxEchoItems bounds the items of an array, and the members of an object,
// that an error answer's details keep (EchoJSON): a caller's input can
// fail a schema in as many places as it has values, and the answer must
// not grow with it.
const maxEchoItems = 20

// Echo returns the text of an error as its answer may hold it: the
// secrets the default rules find replaced by their markers (Text); every
// quoted span of more than maxEchoRun bytes, spaces included, cut to an
// excerpt ending in "…" within its quotes (cutQuoted); every other run of more
// than maxEchoRun non-space bytes cut so too; and the whole cut after
// maxEchoBytes. Messages that quote a caller's value (an id, a cursor, a
// schema problem naming the value) thus give back at most a short
// redacted excerpt of it, whichever code wrote them.
func Echo(s string) string {
	s = Text(s)
	if len(s) <= maxEchoRun {
		return s
	}
	s = cutQuoted(s)
	if len(s) > maxEchoBytes {
		cut := maxEchoBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// cutQuoted cuts every quoted span of s (redacted already) longer than
// maxEchoRun to an excerpt, keeping its quotes, and every run of the text
// between the spans so too (cutRuns): a span is cut once, as a span. A
// span is double-quoted, where a quote
// escaped by a backslash (as %q writes one inside a value) does not end
// it, or single-quoted, as JSON Schema's messages quote a value: a single
// quote opens one only at the start of s or after a space or an opening
// bracket, and closes it only before the end, a space or punctuation, so
// that an apostrophe ("the run's") is no quote. An unclosed span runs to
// the end of its line.
func cutQuoted(s string) string {
	var b strings.Builder
	for {
		open := openingQuote(s)
		if open < 0 {
			b.WriteString(cutRuns(s))
			return b.String()
		}
		q := s[open]
		b.WriteString(cutRuns(s[:open]))
		b.WriteByte(q)
		s = s[open+1:]
		end := closingQuote(s, 0, '"') // the quote, or the end of the line
		if q == '\'' {
			end = closingSingleQuote(s)
		}
		if len(s[:end]) > maxEchoRun {
			b.WriteString(cutExcerpt(s[:end]))
		} else {
			b.WriteString(s[:end])
		}
		if end < len(s) && s[end] == q {
			b.WriteByte(q)
			end++
		}
		s = s[end:]
	}
}

// openingQuote returns the index of the first quote of s that opens a
// span (see cutQuoted), or -1.
func openingQuote(s string) int {
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '"':
			return i
		case s[i] == '\'' && (i == 0 || strings.IndexByte(" \t\n([{", s[i-1]) >= 0):
			return i
		}
	}
	return -1
}

// closingSingleQuote returns the index of the single quote that closes a
// span whose content starts s: one before the end, a space or
// punctuation; the end of the line when there is none.
func closingSingleQuote(s string) int {
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\n' || s[i] == '\r':
			return i
		case s[i] == '\'' && (i+1 == len(s) || strings.IndexByte(" \t\r\n,.;:!?)]}", s[i+1]) >= 0):
			return i
		}
	}
	return len(s)
}

// cutRuns cuts every run of more than maxEchoRun non-space bytes of s
// (redacted already) to an excerpt.
func cutRuns(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		space := strings.IndexAny(s, " \t\r\n")
		run := s
		if space >= 0 {
			run = s[:space]
		}
		if len(run) > maxEchoRun {
			b.WriteString(cutExcerpt(run))
		} else {
			b.WriteString(run)
		}
		s = s[len(run):]
		if space >= 0 {
			b.WriteByte(s[0])
			s = s[1:]
		}
	}
	return b.String()
}

// EchoDetails returns details with every string in it, member names
// included, passed through Echo. Details may hold typed values (a
// schema's problems, say): they are read as their JSON, so nothing in
// them escapes.
func EchoDetails(details map[string]any) map[string]any {
	if len(details) == 0 {
		return details
	}
	safe, _ := EchoJSON(details).(map[string]any)
	return safe
}

// EchoJSON returns v read as its JSON with every string in it, member
// names included, passed through Echo, and every array and object cut to
// its first maxEchoItems items (members in name order); nil when v does
// not encode.
func EchoJSON(v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var generic any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers as they were, seqs above 2^53 included
	if err := dec.Decode(&generic); err != nil {
		return nil
	}
	return echoValue(generic)
}

func echoValue(v any) any {
	switch v := v.(type) {
	case string:
		return Echo(v)
	case map[string]any:
		names := slices.Sorted(maps.Keys(v))
		out := make(map[string]any, min(len(names), maxEchoItems))
		for _, k := range names[:min(len(names), maxEchoItems)] {
			out[Echo(k)] = echoValue(v[k])
		}
		return out
	case []any:
		v = v[:min(len(v), maxEchoItems)]
		for i, item := range v {
			v[i] = echoValue(item)
		}
		return v
	}
	return v
}
