package redact

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// defaultRedactor applies the default rules for Text and Quote.
var defaultRedactor = New(Options{})

// Text returns s with the secrets the default rules find in it replaced by
// their markers (Redactor.String): for text that is kept or shown outside
// an event, such as a log line or a run row's label.
func Text(s string) string {
	out, _ := defaultRedactor.String(s)
	return out
}

// Shaped reports whether s holds text in the shape of a secret that a
// value rule knows: a private key block, a provider's key or token, a
// JWT, a URL's or a DSN's password, a Bearer or Basic credential. The
// key=value rules, which mask whatever follows a sensitive name
// ("password = ?" in a query, "token: input.token" in an expression), do
// not apply: Shaped is for text that may name credentials without
// holding one, such as a workflow definition.
func Shaped(s string) bool {
	mask := candidates(s)
	for i := range valueRules {
		if mask&(1<<i) == 0 {
			continue
		}
		if _, changed := valueRules[i].apply(s); changed {
			return true
		}
	}
	return false
}

// ExcerptRunes is the most runes of a caller's value that Quote keeps.
const ExcerptRunes = 32

// Quote returns the short excerpt of a caller's value that an error
// message may hold: Excerpt(s), quoted as %q quotes. Error messages name
// the member or the path at fault and show no more of the value than
// this.
func Quote(s string) string { return strconv.Quote(Excerpt(s)) }

// Excerpt returns s redacted by the default rules, then cut to
// ExcerptRunes runes ("…" marks the cut).
func Excerpt(s string) string { return cutExcerpt(Text(s)) }

// cutExcerpt cuts s, already redacted, to ExcerptRunes runes ("…" marks
// the cut).
func cutExcerpt(s string) string {
	if utf8.RuneCountInString(s) > ExcerptRunes {
		cut := 0
		for range ExcerptRunes {
			_, size := utf8.DecodeRuneInString(s[cut:])
			cut += size
		}
		s = s[:cut] + "…"
	}
	return s
}

// Rules returns the names of the rules whose markers a Redactor writes
// ("[REDACTED:<rule>]"): "key" and the value rules' names. Each is a
// constant of this package, never text of the redacted input.
func Rules() []string {
	names := []string{"key", "url_credentials"}
	for _, r := range valueRules {
		if !slices.Contains(names, r.name) {
			names = append(names, r.name)
		}
	}
	return names
}

// CountMarkers returns how many markers of each rule of Rules s holds.
// Markers of unknown rules are not counted.
func CountMarkers(s string) map[string]int {
	var counts map[string]int
	for {
		i := strings.Index(s, markerPrefix)
		if i < 0 {
			return counts
		}
		s = s[i+len(markerPrefix):]
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return counts
		}
		if name := s[:end]; slices.Contains(ruleNames, name) {
			if counts == nil {
				counts = map[string]int{}
			}
			counts[name]++
			s = s[end+1:]
		}
	}
}

var ruleNames = Rules()
