package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// The secrets corpus is generated: random, well-formed but fake credentials
// of every kind, built from their documented shape at test time, so no
// realistic literal secret sits in a source file for scanners to flag.

const (
	lowerChars  = "abcdefghijklmnopqrstuvwxyz"
	upperChars  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	digitChars  = "0123456789"
	base62Chars = upperChars + lowerChars + digitChars
	b64urlChars = base62Chars + "-_"
)

func randString(rng *rand.Rand, chars string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = chars[rng.IntN(len(chars))]
	}
	return string(b)
}

// secretCase is one generated secret in its minimal surrounding text.
type secretCase struct {
	kind   string
	text   string   // e.g. "Bearer X", "postgres://u:p@host/db"
	parts  []string // substrings that must not survive redaction
	marker string   // the expected marker
	token  bool     // a bare single-line token: also tested as a header value
	inline bool     // may sit in the middle of a sentence
}

func genSecrets(rng *rand.Rand) []secretCase {
	r62 := func(n int) string { return randString(rng, base62Chars, n) }
	rurl := func(n int) string { return randString(rng, b64urlChars, n) }
	tok := func(kind, marker, s string) secretCase {
		return secretCase{kind: kind, text: s, parts: []string{s}, marker: marker, token: true, inline: true}
	}
	pass := func() string { return r62(12) + "._~!" + r62(4) }

	var cs []secretCase
	cs = append(cs,
		tok("openai", "openai_key", "sk-"+r62(48)),
		tok("openai-project", "openai_key", "sk-proj-"+rurl(120)),
		tok("anthropic", "anthropic_key", "sk-ant-api03-"+rurl(93)+"AA"),
		tok("github-pat-fine", "github_token", "github_pat_"+r62(22)+"_"+r62(59)),
		tok("gitlab", "gitlab_token", "glpat-"+rurl(20)),
		tok("slack-bot", "slack_token", "xoxb-"+randString(rng, digitChars, 12)+"-"+randString(rng, digitChars, 13)+"-"+r62(24)),
		tok("slack-user", "slack_token", "xoxp-"+randString(rng, digitChars, 12)+"-"+randString(rng, digitChars, 12)+"-"+r62(32)),
		tok("slack-app", "slack_token", "xapp-1-A"+randString(rng, upperChars+digitChars, 10)+"-"+randString(rng, digitChars, 13)+"-"+hex.EncodeToString([]byte(r62(32)))),
		tok("google", "google_api_key", "AIza"+rurl(35)),
		tok("huggingface", "huggingface_token", "hf_"+randString(rng, upperChars+lowerChars, 34)),
		tok("aws-access-key-id", "aws_access_key_id", "AKIA"+randString(rng, upperChars+digitChars, 16)),
		tok("aws-session-key-id", "aws_access_key_id", "ASIA"+randString(rng, upperChars+digitChars, 16)),
	)
	for _, p := range []string{"ghp", "gho", "ghu", "ghs", "ghr"} {
		cs = append(cs, tok("github-"+p, "github_token", p+"_"+r62(36)))
	}
	for _, p := range []string{"sk_live_", "rk_live_", "sk_test_"} {
		cs = append(cs, tok("stripe-"+p, "stripe_key", p+r62(24)))
	}

	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	payload := base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, `{"sub":"user-%d","iat":%d}`, rng.IntN(1e6), 1700000000+rng.IntN(1e7)))
	cs = append(cs, tok("jwt", "jwt", header+"."+payload+"."+rurl(43)))

	// PEM blocks, the armour built from parts.
	for _, kind := range []string{"RSA ", "EC ", "OPENSSH ", ""} {
		armour := func(word string) string { return fmt.Sprintf("-----%s %sPRIVATE %s-----", word, kind, "KEY") }
		var lines []string
		for range 4 {
			lines = append(lines, base64.StdEncoding.EncodeToString([]byte(r62(48))))
		}
		cs = append(cs, secretCase{
			kind: "pem-" + strings.TrimSpace(kind), marker: "private_key", inline: true,
			text:  armour("BEGIN") + "\n" + strings.Join(lines, "\n") + "\n" + armour("END"),
			parts: lines,
		})
	}

	// URLs and DSNs with userinfo.
	for _, scheme := range []string{"postgres", "postgresql", "mysql", "redis", "rediss", "amqp", "amqps", "mongodb", "mongodb+srv", "https", "http"} {
		user, pw := "app"+randString(rng, lowerChars, 3), pass()
		marker := "dsn"
		if strings.HasPrefix(scheme, "http") {
			marker = "url_credentials"
		}
		cs = append(cs, secretCase{
			kind: "url-" + scheme, marker: marker, inline: true,
			text:  scheme + "://" + user + ":" + pw + "@db.example:5432/app?sslmode=require",
			parts: []string{pw, user + ":"},
		})
	}
	pw := pass()
	cs = append(cs,
		secretCase{kind: "url-redis-no-user", marker: "dsn", inline: true, text: "redis://:" + pw + "@cache.example:6379/0", parts: []string{pw}},
		secretCase{kind: "slack-webhook", marker: "slack_webhook", inline: true,
			text:  "https://hooks.slack.com/services/T" + randString(rng, upperChars+digitChars, 8) + "/B" + randString(rng, upperChars+digitChars, 8) + "/" + pw,
			parts: []string{pw}},
	)
	pw = pass()
	cs = append(cs, secretCase{kind: "mysql-go-dsn", marker: "dsn", inline: true, text: "app:" + pw + "@tcp(db.example:3306)/app?parseTime=true", parts: []string{pw}})
	pw = pass()
	cs = append(cs, secretCase{kind: "kv-dsn", marker: "key", inline: true, text: "host=db.example port=5432 user=app password=" + pw + " dbname=app", parts: []string{pw}})
	secret := randString(rng, base62Chars+"/+", 40)
	cs = append(cs, secretCase{kind: "aws-secret", marker: "aws_secret_key", inline: true, text: "aws_secret_access_key=" + secret, parts: []string{secret}})
	secret = r62(40)
	cs = append(cs, secretCase{kind: "bearer", marker: "bearer", inline: true, text: "Bearer " + secret, parts: []string{secret}})
	pw = pass()
	basic := base64.StdEncoding.EncodeToString([]byte("app:" + pw))
	cs = append(cs, secretCase{kind: "basic", marker: "basic_auth", inline: true, text: "Basic " + basic, parts: []string{basic}})
	secret = randString(rng, lowerChars, 24)
	cs = append(cs, secretCase{kind: "env-token", marker: "key", inline: true, text: "GITHUB_TOKEN=" + secret, parts: []string{secret}})
	// Header lines: only at a line start.
	secret = r62(32)
	cs = append(cs, secretCase{kind: "header-api-key", marker: "key", text: "X-Api-Key: " + secret, parts: []string{secret}})
	secret = r62(32)
	cs = append(cs, secretCase{kind: "header-cookie", marker: "key", text: "Cookie: session=" + secret + "; theme=dark", parts: []string{secret}})
	return cs
}

// secretContext embeds a case's text somewhere and redacts the result.
type secretContext struct {
	name    string
	applies func(secretCase) bool
	marker  func(secretCase) string // nil: the case's own marker
	run     func(t *testing.T, r *Redactor, c secretCase) any
}

var secretContexts = []secretContext{
	{name: "bare", run: func(t *testing.T, r *Redactor, c secretCase) any {
		out, _ := r.Value(c.text)
		return out
	}},
	{name: "prose line", run: func(t *testing.T, r *Redactor, c secretCase) any {
		out, _ := r.Value("Here is what I found in the config:\n" + c.text + "\nRotate it after the deploy.")
		return out
	}},
	{name: "prose inline", applies: func(c secretCase) bool { return c.inline }, run: func(t *testing.T, r *Redactor, c secretCase) any {
		out, _ := r.Value("Use " + c.text + " for the deploy, then rotate it.")
		return out
	}},
	{name: "header value", applies: func(c secretCase) bool { return c.token }, run: func(t *testing.T, r *Redactor, c secretCase) any {
		out, _ := r.Value("GET /v1/models HTTP/1.1\r\nAuthorization: Bearer " + c.text + "\r\nAccept: */*\r\n")
		return out
	}},
	{name: "curl header", applies: func(c secretCase) bool { return c.token }, run: func(t *testing.T, r *Redactor, c secretCase) any {
		out, _ := r.Value("curl -H 'Authorization: token " + c.text + "' https://api.example.com")
		return out
	}},
	{name: "JSON string", run: func(t *testing.T, r *Redactor, c secretCase) any {
		raw, _ := json.Marshal(map[string]any{"type": "tool_result", "content": c.text, "seq": 3})
		return redactJSON(t, r, raw)
	}},
	{name: "JSON text in a JSON string", run: func(t *testing.T, r *Redactor, c secretCase) any {
		inner, _ := json.Marshal(map[string]any{"config": map[string]any{"value": c.text}})
		raw, _ := json.Marshal(map[string]any{"content": string(inner)})
		return redactJSON(t, r, raw)
	}},
	{name: "sensitive key", marker: func(secretCase) string { return "key" }, run: func(t *testing.T, r *Redactor, c secretCase) any {
		raw, _ := json.Marshal(map[string]any{"env": map[string]any{"OPENAI_API_KEY": c.text}})
		return redactJSON(t, r, raw)
	}},
	{name: "nested arrays", run: func(t *testing.T, r *Redactor, c secretCase) any {
		out, _ := r.Value(map[string]any{"steps": []any{1.0, []any{"ok", map[string]any{"output": []any{c.text}}}}})
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
			t.Run(c.kind+"/"+ctx.name, func(t *testing.T) {
				t.Parallel()
				out := ctx.run(t, r, c)
				text := allText(out)
				for _, p := range c.parts {
					if strings.Contains(text, p) {
						t.Errorf("secret part %q survived:\n%s", p, text)
					}
				}
				want := c.marker
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
