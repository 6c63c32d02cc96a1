package redact_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/runstream/runstream/redact"
)

// Secrets the default rules recognise: what a caller might paste, by
// mistake, where an id or a value goes.
const (
	echoDSN = "postgres://admin:hunter2@db.internal:5432/prod"
	echoKey = "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56"
)

func TestEcho(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 60000)
	for _, c := range []struct{ in, keep, drop string }{
		{"run r1 not found", "run r1 not found", ""},
		{`workflow "` + echoDSN + `" not found`, "not found", "hunter2"},
		{"unknown cursor " + echoKey, "unknown cursor", echoKey},
		{`workflow "` + long + `" not found`, `…" not found`, strings.Repeat("x", 65)},
		// Words: a quoted value of many short ones is cut within its
		// quotes; a text of many, quoted or not, is cut as a whole.
		{`workflow run "` + strings.Repeat("word ", 1000) + `" not found`, `workflow run "word word`, strings.Repeat("word ", 14)},
		{"/" + strings.Repeat("word ", 1000) + ": required", "/word word", strings.Repeat("word ", 70)},
		{`action "a \"quoted\" one" is unknown`, `action "a \"quoted\" one" is unknown`, ""},
		{`tags "` + strings.Repeat("t ", 60) + `" and "` + strings.Repeat("u", 100) + `"`, `tags "t t`, strings.Repeat("u", 33)},
		// Single quotes, as JSON Schema's messages quote a value; an
		// apostrophe is no quote, so runstream's own wording stays whole.
		{"'" + strings.Repeat("secretish ", 25) + "' does not match pattern", "' does not match pattern", strings.Repeat("secretish ", 4)},
		{"/a: '" + strings.Repeat("v w ", 40) + "', want x", "', want x", strings.Repeat("v w ", 9)},
		// A quoted span at or under the bound stays whole, quotes and all,
		// however many bytes its characters take.
		{`workflow "` + strings.Repeat("x", 64) + `" not found`, `"` + strings.Repeat("x", 64) + `" not found`, ""},
		{`workflow "` + strings.Repeat("é", 30) + `" not found`, `"` + strings.Repeat("é", 30) + `" not found`, ""},
		{`workflow "` + strings.Repeat("é", 40) + `" not found`, `…" not found`, strings.Repeat("é", 33)},
		{"the run's cursor is past the user's last event and the thread's head by far, so it waits", "the run's cursor is past the user's last event and the thread's head by far, so it waits", ""},
	} {
		got := redact.Echo(c.in)
		if !strings.Contains(got, c.keep) || (c.drop != "" && strings.Contains(got, c.drop)) {
			t.Errorf("redact.Echo(%.80q) = %.200q: want %q kept and %q gone", c.in, got, c.keep, c.drop)
		}
		if len(got) > 330 {
			t.Errorf("Echo of a %d-byte message is %d bytes", len(c.in), len(got))
		}
		if strings.Count(c.in, `"`) == 2 && strings.Count(got, `"`) != 2 {
			t.Errorf("redact.Echo(%.80q) = %.200q: a quote was lost", c.in, got)
		}
	}
	details := redact.EchoDetails(map[string]any{"problems": []struct{ Path, Message string }{{"/" + echoDSN, "'" + echoKey + "' does not match"}}, "expected_index": int64(1) << 60})
	encoded, err := json.Marshal(details)
	if err != nil {
		t.Fatal(err)
	}
	raw := string(encoded)
	if strings.Contains(raw, "hunter2") || strings.Contains(raw, echoKey) || !strings.Contains(raw, "1152921504606846976") {
		t.Errorf("EchoDetails = %s: want the secrets gone and the number whole", raw)
	}
}

// TestEchoDetailsBounded: however many items the details hold, an answer
// keeps the first 20 of each array and object.
func TestEchoDetailsBounded(t *testing.T) {
	t.Parallel()
	items := make([]string, 5000)
	members := map[string]any{}
	for i := range items {
		items[i] = strings.Repeat("p", 60)
		members[fmt.Sprintf("key_%04d", i)] = i
	}
	details := redact.EchoDetails(map[string]any{"problems": items, "members": members})
	encoded, err := json.Marshal(details)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := details["problems"].([]any)
	kept, _ := details["members"].(map[string]any)
	if len(got) != 20 || len(kept) != 20 || kept["key_0000"] == nil || kept["key_0019"] == nil || len(encoded) > 4096 {
		t.Errorf("EchoDetails kept %d items and %d members (%d bytes), want the first 20 of each", len(got), len(kept), len(encoded))
	}
}

// FuzzEcho: whatever the text, Echo's answer is at most a few bytes over
// its bound, and valid UTF-8 stays valid.
func FuzzEcho(f *testing.F) {
	for _, seed := range []string{
		`workflow "` + strings.Repeat("word ", 100) + `" not found`,
		"'" + strings.Repeat("é ", 100) + "' does not match",
		`a "b \" c" 'd' e's "unclosed`,
		strings.Repeat("x", 400),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := redact.Echo(s)
		if len(got) > 320+len("…") {
			t.Errorf("Echo of %d bytes is %d bytes", len(s), len(got))
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Errorf("Echo(%q) = %q is not valid UTF-8", s, got)
		}
	})
}
