// Package redacttest generates the corpus of synthetic secrets that the
// redact package must remove: random, well-formed but fake credentials of
// every kind the rules know, built from their documented shape at run
// time, so no realistic literal secret sits in a source file for scanners
// to flag. The redact tests and the end-to-end tests of the server plant
// them and check that none survives.
package redacttest

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
)

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

// Secret is one generated secret in its minimal surrounding text.
type Secret struct {
	Kind   string
	Text   string   // e.g. "Bearer X", "postgres://u:p@host/db"
	Parts  []string // substrings that must not survive redaction
	Marker string   // the expected marker
	Token  bool     // a bare single-line token: also tested as a header value
	Inline bool     // may sit in the middle of a sentence
}

// Secrets returns one Secret of every kind, drawn from rng: the same rng
// state gives the same corpus.
func Secrets(rng *rand.Rand) []Secret {
	r62 := func(n int) string { return randString(rng, base62Chars, n) }
	rurl := func(n int) string { return randString(rng, b64urlChars, n) }
	tok := func(kind, marker, s string) Secret {
		return Secret{Kind: kind, Text: s, Parts: []string{s}, Marker: marker, Token: true, Inline: true}
	}
	pass := func() string { return r62(12) + "._~!" + r62(4) }

	var cs []Secret
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
		tok("runstream", "runstream_key", "rsk_"+rurl(43)),
		tok("npm", "npm_token", "npm_"+r62(36)),
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
		cs = append(cs, Secret{
			Kind: "pem-" + strings.TrimSpace(kind), Marker: "private_key", Inline: true,
			Text:  armour("BEGIN") + "\n" + strings.Join(lines, "\n") + "\n" + armour("END"),
			Parts: lines,
		})
	}

	// URLs and DSNs with userinfo.
	for _, scheme := range []string{"postgres", "postgresql", "mysql", "redis", "rediss", "amqp", "amqps", "mongodb", "mongodb+srv", "https", "http"} {
		user, pw := "app"+randString(rng, lowerChars, 3), pass()
		marker := "dsn"
		if strings.HasPrefix(scheme, "http") {
			marker = "url_credentials"
		}
		cs = append(cs, Secret{
			Kind: "url-" + scheme, Marker: marker, Inline: true,
			Text:  scheme + "://" + user + ":" + pw + "@db.example:5432/app?sslmode=require",
			Parts: []string{pw, user + ":"},
		})
	}
	pw := pass()
	cs = append(cs,
		Secret{Kind: "url-redis-no-user", Marker: "dsn", Inline: true, Text: "redis://:" + pw + "@cache.example:6379/0", Parts: []string{pw}},
		Secret{Kind: "slack-webhook", Marker: "slack_webhook", Inline: true,
			Text:  "https://hooks.slack.com/services/T" + randString(rng, upperChars+digitChars, 8) + "/B" + randString(rng, upperChars+digitChars, 8) + "/" + pw,
			Parts: []string{pw}},
	)
	pw = pass()
	cs = append(cs, Secret{Kind: "mysql-go-dsn", Marker: "dsn", Inline: true, Text: "app:" + pw + "@tcp(db.example:3306)/app?parseTime=true", Parts: []string{pw}})
	pw = pass()
	cs = append(cs, Secret{Kind: "kv-dsn", Marker: "key", Inline: true, Text: "host=db.example port=5432 user=app password=" + pw + " dbname=app", Parts: []string{pw}})
	secret := randString(rng, base62Chars+"/+", 40)
	cs = append(cs, Secret{Kind: "aws-secret", Marker: "aws_secret_key", Inline: true, Text: "aws_secret_access_key=" + secret, Parts: []string{secret}})
	secret = r62(40)
	cs = append(cs, Secret{Kind: "bearer", Marker: "bearer", Inline: true, Text: "Bearer " + secret, Parts: []string{secret}})
	pw = pass()
	basic := base64.StdEncoding.EncodeToString([]byte("app:" + pw))
	cs = append(cs, Secret{Kind: "basic", Marker: "basic_auth", Inline: true, Text: "Basic " + basic, Parts: []string{basic}})
	secret = base64.StdEncoding.EncodeToString([]byte(r62(64)))
	cs = append(cs, Secret{Kind: "azure-storage", Marker: "key", Inline: true,
		Text:  "DefaultEndpointsProtocol=https;AccountName=app" + randString(rng, lowerChars, 4) + ";AccountKey=" + secret + ";EndpointSuffix=core.windows.net",
		Parts: []string{secret}})
	secret = randString(rng, lowerChars, 24)
	cs = append(cs, Secret{Kind: "env-token", Marker: "key", Inline: true, Text: "GITHUB_TOKEN=" + secret, Parts: []string{secret}})
	// Header lines: only at a line start.
	secret = r62(32)
	cs = append(cs, Secret{Kind: "header-api-key", Marker: "key", Text: "X-Api-Key: " + secret, Parts: []string{secret}})
	secret = r62(32)
	cs = append(cs, Secret{Kind: "header-cookie", Marker: "key", Text: "Cookie: session=" + secret + "; theme=dark", Parts: []string{secret}})
	return cs
}
