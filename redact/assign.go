package redact

import (
	"net/url"
	"strings"
)

// assignments masks, inside text, values named by a sensitive key (the key
// rules of keys.go), so configuration and header dumps in tool output lose
// their secrets too:
//
//	DB_PASSWORD=hunter2, password = "x y", 'token' => 'abc'   (env files, DSNs, query strings, code)
//	"api_key": "abc", 'secret': 'abc'                         (JSON or dict text)
//	Authorization: Bearer abc                                 (HTTP headers, YAML: at a line start or after a quote)
//
// An unquoted "Name: value" in the middle of a sentence ("reset your
// password: go to settings") is prose and left alone. A known auth scheme
// word at the start of the value ("Bearer", "Basic", …) is kept.
func (r *Redactor) assignments(s string) (string, bool) {
	var b strings.Builder
	last, changed := 0, false
	for i := 0; i < len(s); {
		j := strings.IndexAny(s[i:], "=:")
		if j < 0 {
			break
		}
		sep := i + j
		i = sep + 1
		vs, ve, ok := r.assignment(s, sep)
		if !ok {
			continue
		}
		if !changed {
			b.Grow(len(s))
			changed = true
		}
		b.WriteString(s[last:vs])
		b.WriteString(marker("key"))
		last, i = ve, ve
	}
	if !changed {
		return s, false
	}
	b.WriteString(s[last:])
	return b.String(), true
}

// assignment inspects the separator at s[sep] and returns the span of the
// value to mask, if the key before it is sensitive.
func (r *Redactor) assignment(s string, sep int) (vs, ve int, ok bool) {
	next := func(k int) byte {
		if k < len(s) {
			return s[k]
		}
		return 0
	}
	keyEnd, valStart := sep, sep+1
	colon := s[sep] == ':'
	if colon {
		if n := next(sep + 1); n == '=' || n == ':' || (n == '/' && next(sep+2) == '/') || (sep > 0 && s[sep-1] == ':') {
			return 0, 0, false // ":=" (handled at '='), "::", "scheme://"
		}
	} else {
		switch n := next(sep + 1); {
		case n == '=':
			return 0, 0, false // "=="
		case n == '>':
			valStart++ // "=>"
		}
		if sep > 0 {
			switch s[sep-1] {
			case '=', '!', '<', '>':
				return 0, 0, false // comparisons
			case ':':
				keyEnd-- // ":="
			}
		}
	}

	ks, ke, quoted, ok := keyBefore(s, keyEnd)
	if !ok {
		return 0, 0, false
	}
	line := colon && !quoted
	var opening byte // the quote around a header line: curl -H 'Name: value'
	if line {
		if opening, ok = headerStart(s, ks); !ok {
			return 0, 0, false
		}
	}
	match := matchKey(unescapeKey(s[ks:ke]), r.extra)
	if match == noMatch {
		return 0, 0, false
	}

	vs, ve = valueAfter(s, valStart, line, opening, colon && quoted)
	vs = skipAuthScheme(s, vs, ve)
	val := s[vs:ve]
	switch {
	case vs >= ve, isMarker(val):
		return 0, 0, false
	case match == weakMatch && allDigits(val):
		return 0, 0, false // "output_token=12" is a count
	}
	return vs, ve, true
}

// keyBefore finds the key that ends just before s[end] (spaces and one
// closing quote, maybe backslash-escaped, allowed in between).
func keyBefore(s string, end int) (ks, ke int, quoted, ok bool) {
	k := end
	for k > 0 && (s[k-1] == ' ' || s[k-1] == '\t') {
		k--
	}
	var q byte
	escaped := false
	if k > 0 && (s[k-1] == '"' || s[k-1] == '\'') {
		q = s[k-1]
		k--
		if k > 0 && s[k-1] == '\\' {
			escaped = true
			k--
		}
	}
	ke = k
	for k > 0 && isKeyByte(s[k-1]) {
		k--
	}
	ks = k
	if ks == ke {
		return 0, 0, false, false
	}
	if q != 0 {
		if ks == 0 || s[ks-1] != q || (escaped && (ks < 2 || s[ks-2] != '\\')) {
			return 0, 0, false, false
		}
	}
	return ks, ke, q != 0, true
}

// headerStart reports whether an unquoted key at s[ks] starts a header or
// YAML line: only indentation or list markers before it on its line, or an
// opening quote right before it (curl -H 'Authorization: …'), which it
// returns.
func headerStart(s string, ks int) (opening byte, ok bool) {
	if ks > 0 && (s[ks-1] == '"' || s[ks-1] == '\'' || s[ks-1] == '`') {
		return s[ks-1], true
	}
	for k := ks - 1; k >= 0; k-- {
		switch s[k] {
		case ' ', '\t', '-', '*', '>', '#':
		case '\n', '\r':
			return 0, true
		default:
			return 0, false
		}
	}
	return 0, true
}

// valueAfter returns the value span that starts at s[p] after optional
// spaces: a quoted value's content; for header and YAML lines the rest of
// the line, or up to the opening quote's partner; else a bare token.
func valueAfter(s string, p int, line bool, opening byte, jsonBare bool) (vs, ve int) {
	for p < len(s) && (s[p] == ' ' || s[p] == '\t') {
		p++
	}
	if p >= len(s) {
		return p, p
	}
	switch {
	case s[p] == '"' || s[p] == '\'':
		return p + 1, closingQuote(s, p+1, s[p])
	case s[p] == '\\' && p+1 < len(s) && s[p+1] == '"':
		end := strings.Index(s[p+2:], `\"`)
		if end < 0 {
			return p + 2, lineEnd(s, p+2)
		}
		return p + 2, p + 2 + end
	case line:
		ve = lineEnd(s, p)
		if opening != 0 {
			ve = indexAnyOrEnd(s, p, string([]byte{'\r', '\n', opening}))
		}
		for ve > p && (s[ve-1] == ' ' || s[ve-1] == '\t') {
			ve--
		}
		return p, ve
	}
	stops := " \t\r\n&;,\"'`"
	if jsonBare {
		stops = " \t\r\n&;,\"'`}]"
	}
	// A marker's ']' is not the end of a bare JSON value.
	return p, indexAnyOrEnd(s, p+markerLen(s[p:]), stops)
}

// markerLen returns the length of the marker that starts s, or 0.
func markerLen(s string) int {
	if !strings.HasPrefix(s, markerPrefix) {
		return 0
	}
	if k := strings.IndexByte(s, ']'); k >= 0 && isMarker(s[:k+1]) {
		return k + 1
	}
	return 0
}

// indexAnyOrEnd returns the index of the first byte of s[p:] in chars, or
// len(s).
func indexAnyOrEnd(s string, p int, chars string) int {
	if k := strings.IndexAny(s[p:], chars); k >= 0 {
		return p + k
	}
	return len(s)
}

// closingQuote returns the index of the quote q that closes a string whose
// content starts at s[p], skipping backslash escapes; the end of the line
// when there is none.
func closingQuote(s string, p int, q byte) int {
	for k := p; k < len(s); k++ {
		switch s[k] {
		case '\\':
			k++
		case q:
			return k
		case '\n', '\r':
			return k
		}
	}
	return len(s)
}

func lineEnd(s string, p int) int { return indexAnyOrEnd(s, p, "\r\n") }

// authSchemes are HTTP auth scheme words kept in front of a masked header
// value, lowercase.
var authSchemes = []string{
	"bearer", "basic", "digest", "token", "negotiate", "ntlm", "apikey",
	"aws4-hmac-sha256", "dpop", "hoba", "mutual", "vapid",
}

// skipAuthScheme returns where the credentials start in s[vs:ve]: after a
// known scheme word and its spaces, or vs.
func skipAuthScheme(s string, vs, ve int) int {
	k := vs
	for k < ve && (isAlnum(s[k]) || s[k] == '-') {
		k++
	}
	if k == vs || k >= ve || (s[k] != ' ' && s[k] != '\t') {
		return vs
	}
	word := s[vs:k]
	for _, scheme := range authSchemes {
		if strings.EqualFold(word, scheme) {
			for k < ve && (s[k] == ' ' || s[k] == '\t') {
				k++
			}
			return k
		}
	}
	return vs
}

func isKeyByte(c byte) bool { return isAlnum(c) || c == '_' || c == '-' || c == '.' || c == '%' }

// unescapeKey decodes a percent-encoded key, as a URL's query parameter
// name is read by its server (pass%77ord is password); a key that is not
// valid percent-encoding stays as it is.
func unescapeKey(key string) string {
	if !strings.Contains(key, "%") {
		return key
	}
	if k, err := url.QueryUnescape(key); err == nil {
		return k
	}
	return key
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}
