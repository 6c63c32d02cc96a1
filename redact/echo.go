package redact

import (
	"bytes"
	"encoding/json"
	"strings"
)

// maxEchoRun is the longest run of non-space bytes an error answer keeps
// whole; a longer one (a caller's id, cursor or value quoted by the
// message) is cut to an ExcerptRunes excerpt.
const maxEchoRun = 64

// Echo returns the text of an error as its answer may hold it: the
// secrets the default rules find replaced by their markers (Text),
// and every run of more than maxEchoRun non-space bytes cut to an excerpt
// ending in "…". Messages that quote a caller's value (an id, a cursor, a
// schema problem naming the value) thus give back at most a short
// redacted excerpt of it, whichever code wrote them.
func Echo(s string) string {
	s = Text(s)
	if len(s) <= maxEchoRun {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		space := strings.IndexAny(s, " \t\r\n")
		run := s
		if space >= 0 {
			run = s[:space]
		}
		if len(run) > maxEchoRun {
			b.WriteString(Excerpt(run))
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
// names included, passed through Echo (nil when v does not encode).
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
		out := make(map[string]any, len(v))
		for k, item := range v {
			out[Echo(k)] = echoValue(item)
		}
		return out
	case []any:
		for i, item := range v {
			v[i] = echoValue(item)
		}
		return v
	}
	return v
}
