package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/runstream/runstream/redact/redacttest"
)

// The secrets corpus is generated: random, well-formed but fake credentials
// of every kind, built from their documented shape at test time, so no
// realistic literal secret sits in a source file for scanners to flag.

const base62Chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

func randString(rng *rand.Rand, chars string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = chars[rng.IntN(len(chars))]
	}
	return string(b)
}

// genSecrets returns the corpus of redacttest.Secrets.
func genSecrets(rng *rand.Rand) []redacttest.Secret { return redacttest.Secrets(rng) }

// secretContext embeds a case's text somewhere and redacts the result.
type secretContext struct {
	name    string
	applies func(redacttest.Secret) bool
	marker  func(redacttest.Secret) string // nil: the case's own marker
	run     func(t *testing.T, r *Redactor, c redacttest.Secret) any
}

var secretContexts = []secretContext{
	{name: "bare", run: func(t *testing.T, r *Redactor, c redacttest.Secret) any {
		out, _ := r.Value(c.Text)
		return out
	}},
	{name: "prose line", run: func(t *testing.T, r *Redactor, c redacttest.Secret) any {
		out, _ := r.Value("Here is what I found in the config:\n" + c.Text + "\nRotate it after the deploy.")
		return out
	}},
	{name: "prose inline", applies: func(c redacttest.Secret) bool { return c.Inline }, run: func(t *testing.T, r *Redactor, c redacttest.Secret) any {
		out, _ := r.Value("Use " + c.Text + " for the deploy, then rotate it.")
		return out
	}},
	{name: "header value", applies: func(c redacttest.Secret) bool { return c.Token }, run: func(t *testing.T, r *Redactor, c redacttest.Secret) any {
		out, _ := r.Value("GET /v1/models HTTP/1.1\r\nAuthorization: Bearer " + c.Text + "\r\nAccept: */*\r\n")
		return out
	}},
	{name: "curl header", applies: func(c redacttest.Secret) bool { return c.Token }, run: func(t *testing.T, r *Redactor, c redacttest.Secret) any {
		out, _ := r.Value("curl -H 'Authorization: token " + c.Text + "' https://api.example.com")
		return out
	}},
	{name: "glued to a name", applies: func(c redacttest.Secret) bool { return c.Token }, run: func(t *testing.T, r *Redactor, c redacttest.Secret) any {
		// A field name or file name that runs into the key, as in an
		// error that quotes an unknown JSON member.
		out, _ := r.Value(`unknown field "extraSecret_` + c.Text + `"`)
		return out
	}},
	{name: "JSON string", run: func(t *testing.T, r *Redactor, c redacttest.Secret) any {
		raw, _ := json.Marshal(map[string]any{"type": "tool_result", "content": c.Text, "seq": 3})
		return redactJSON(t, r, raw)
	}},
	{name: "JSON text in a JSON string", run: func(t *testing.T, r *Redactor, c redacttest.Secret) any {
		inner, _ := json.Marshal(map[string]any{"config": map[string]any{"value": c.Text}})
		raw, _ := json.Marshal(map[string]any{"content": string(inner)})
		return redactJSON(t, r, raw)
	}},
	{name: "sensitive key", marker: func(redacttest.Secret) string { return "key" }, run: func(t *testing.T, r *Redactor, c redacttest.Secret) any {
		raw, _ := json.Marshal(map[string]any{"env": map[string]any{"OPENAI_API_KEY": c.Text}})
		return redactJSON(t, r, raw)
	}},
	{name: "nested arrays", run: func(t *testing.T, r *Redactor, c redacttest.Secret) any {
		out, _ := r.Value(map[string]any{"steps": []any{1.0, []any{"ok", map[string]any{"output": []any{c.Text}}}}})
		return out
	}},
}

func redactJSON(t *testing.T, r *Redactor, raw []byte) any {
	t.Helper()
	out, changed, err := r.JSON(raw)
	if err != nil || !changed {
		t.Fatalf("JSON(%s) = %v, %v", raw, changed, err)
	}
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("redacted JSON does not decode: %v\n%s", err, out)
	}
	return v
}

// allText joins every key and string in v.
func allText(v any) string {
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			b.WriteString(x)
			b.WriteByte(0)
		case map[string]any:
			for k, e := range x {
				b.WriteString(k)
				b.WriteByte(0)
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return b.String()
}

func TestSecretsCorpus(t *testing.T) {
	t.Parallel()
	r := New(Options{})
	cases := genSecrets(rand.New(rand.NewPCG(20260301, 7)))
	for _, c := range cases {
		for _, ctx := range secretContexts {
			if ctx.applies != nil && !ctx.applies(c) {
				continue
			}
			t.Run(c.Kind+"/"+ctx.name, func(t *testing.T) {
				t.Parallel()
				out := ctx.run(t, r, c)
				text := allText(out)
				for _, p := range c.Parts {
					if strings.Contains(text, p) {
						t.Errorf("secret part %q survived:\n%s", p, text)
					}
				}
				want := c.Marker
				if ctx.marker != nil {
					want = ctx.marker(c)
				}
				if !strings.Contains(text, marker(want)) {
					t.Errorf("marker %s missing:\n%s", marker(want), text)
				}
				if again, changed := r.Value(out); changed {
					t.Errorf("second pass changed the output:\n%v\n%v", out, again)
				}
			})
		}
	}
}

// benignStrings must pass unchanged. Some are generated so they are random
// but of a harmless shape.
func benignStrings(rng *rand.Rand) []string {
	img := make([]byte, 600)
	for i := range img {
		img[i] = byte(rng.IntN(256))
	}
	sha1 := make([]byte, 20)
	sha256 := make([]byte, 32)
	for i := range sha256 {
		sha256[i] = byte(rng.IntN(256))
	}
	copy(sha1, sha256)
	uuid := func() string {
		h := hex.EncodeToString([]byte(randString(rng, base62Chars, 16)))
		return h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:32]
	}
	return []string{
		uuid(), uuid(),
		hex.EncodeToString(sha1),
		hex.EncodeToString(sha256),
		"commit " + hex.EncodeToString(sha1) + " (HEAD -> main)",
		"sha256:" + hex.EncodeToString(sha256),
		"data:image/png;base64," + base64.StdEncoding.EncodeToString(img),
		base64.StdEncoding.EncodeToString(img[:300]),
		"The access token expires after an hour; refresh it with the refresh token.",
		"Keep the client secret out of the repository and never share your password.",
		"To reset your password: open Settings, then Security.",
		"We spent 1,532 input tokens and 87 output tokens on this step.",
		"The tokenizer splits text into tokens; token counts drive the bill.",
		"My secretary booked the meeting; the secret to good soup is patience.",
		"Bearer tokens are defined in RFC 6750; basic authentication is older.",
		"Use Bearer Authentication for the API and Basic auth for the proxy.",
		"https://example.com/docs/auth?page=2&sort=desc#tokens",
		"https://api.example.com:8443/v1/runs/run_01J9Z8X7Q2/events?after=128",
		"postgres://db.example:5432/app?sslmode=require",
		"ssh://git@github.com/runstream/runstream.git",
		"mailto:first.last@example.com",
		"first.last+tag@example.co.uk",
		"open task-list.md, then desk-lamp and risk-assessment-guidelines",
		"sk-this-is-not-a-real-key-just-a-phrase",
		"2026-03-01T12:34:56.789+08:00",
		"2026-03-01 12:34:56Z",
		"/home/dev/project/internal/secrets/password_policy.go",
		`C:\Users\dev\tokens\tokens.txt`,
		"./config/api_keys.example.yaml",
		"max_tokens=1024 temperature=0.2 top_p=0.9 output_token=12",
		"if password == \"\" { return errMissing }",
		"x := tokens + 1; y := token_count * 2",
		"Content-Type: application/json\r\nAccept: text/event-stream\r\n",
		"node.output.delta",
		"[REDACTED:key]",
		"",
	}
}

func TestBenignCorpus(t *testing.T) {
	t.Parallel()
	r := New(Options{})
	strs := benignStrings(rand.New(rand.NewPCG(20260301, 11)))
	for _, s := range strs {
		if got, changed := r.String(s); changed || got != s {
			t.Errorf("String(%q) = %q, %v; want unchanged", s, got, changed)
		}
	}

	docs := []map[string]any{
		{"type": "ai_message", "content": strings.Join(strs, "\n"), "usage": map[string]any{"input_tokens": 1532, "output_tokens": 87, "total_tokens": 1619}},
		{"items": toAny(strs), "max_tokens": 4096, "token_count": 12, "tokens": []any{"a", "b"}, "token_usage": map[string]any{"prompt_tokens": 5, "completion_tokens": 7}},
		{"tokenizer": "cl100k_base", "secretary": "Ann", "content_sha256": strs[3], "signature": "func(ctx context.Context) error"},
		{"thinking": map[string]any{"type": "enabled", "budget_tokens": 2048}, "password_policy": "min 12 characters", "has_password": true, "token": nil, "secret": ""},
		{"content": []any{map[string]any{"type": "text", "text": strs[10]}, map[string]any{"type": "tool_use", "name": "read_file", "input": map[string]any{"path": strs[25]}}}},
	}
	for i, d := range docs {
		for _, indent := range []string{"", "  "} {
			raw, err := json.MarshalIndent(d, "", indent)
			if err != nil {
				t.Fatal(err)
			}
			if indent == "" {
				raw, _ = json.Marshal(d)
			}
			out, changed, err := r.JSON(raw)
			if err != nil || changed || !bytes.Equal(out, raw) {
				t.Errorf("doc %d: JSON changed = %v, err = %v\n in %s\nout %s", i, changed, err, raw, out)
			}
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				t.Fatal(err)
			}
			if got, changed := r.Value(v); changed || reflect.ValueOf(got).Pointer() != reflect.ValueOf(v).Pointer() {
				t.Errorf("doc %d: Value changed", i)
			}
		}
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
