package redact_test

import (
	"encoding/json"
	"strings"
	"testing"

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
