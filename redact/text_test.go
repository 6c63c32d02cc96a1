package redact

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestQuote(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", `""`},
		{"run_1", `"run_1"`},
		{"postgres://alice:S3cret@db", `"postgres://[REDACTED:dsn]@db"`},
		{"postgres://alice:S3cret@db.example.com:5432/app", `"postgres://[REDACTED:dsn]@db.exa…"`},
		{strings.Repeat("é", 40), `"` + strings.Repeat("é", 32) + `…"`},
		{"a\"b\n", `"a\"b\n"`},
	}
	for _, tt := range tests {
		if got := Quote(tt.in); got != tt.want {
			t.Errorf("Quote(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// TestQuoteCorpus checks that no excerpt holds any part of a secret of
// the corpus, and that excerpts are short.
func TestQuoteCorpus(t *testing.T) {
	t.Parallel()
	for _, c := range genSecrets(rand.New(rand.NewPCG(13, 13))) {
		got := Quote(c.Text)
		for _, part := range c.Parts {
			if strings.Contains(got, part) {
				t.Errorf("%s: Quote(%q) = %s holds %q", c.Kind, c.Text, got, part)
			}
		}
		if n := utf8.RuneCountInString(got); n > 2*ExcerptRunes+4 { // escapes may double it
			t.Errorf("%s: Quote = %s has %d runes", c.Kind, got, n)
		}
	}
}

func TestText(t *testing.T) {
	t.Parallel()
	if got := Text("/api/threads/postgres://alice:S3cret@db/x"); strings.Contains(got, "S3cret") {
		t.Errorf("Text kept the password: %s", got)
	}
	if got := Text("/api/threads/t1/runs"); got != "/api/threads/t1/runs" {
		t.Errorf("Text changed a clean path: %s", got)
	}
}
