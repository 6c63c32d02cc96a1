package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/redact"
)

// Secrets resolves the secret references of definitions,
// {{ secrets.NAME }}, when a node runs: a definition names a secret, the
// server holds its value.
type Secrets interface {
	// Lookup returns the value of the secret name, and whether there is
	// one.
	Lookup(name string) (string, bool)
}

// EnvSecrets resolves NAME from the environment variable Prefix+NAME
// (runstream serve uses the prefix RUNSTREAM_SECRET_). An empty variable
// is no secret.
type EnvSecrets struct {
	Prefix string
	// Getenv reads a variable. Defaults to os.Getenv.
	Getenv func(string) string
}

// Lookup implements Secrets.
func (s EnvSecrets) Lookup(name string) (string, bool) {
	getenv := s.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	v := getenv(s.Prefix + name)
	return v, v != ""
}

// MapSecrets resolves secrets from a map, as read by ReadSecretsFile.
type MapSecrets map[string]string

// Lookup implements Secrets.
func (s MapSecrets) Lookup(name string) (string, bool) {
	v, ok := s[name]
	return v, ok && v != ""
}

// ChainSecrets resolves a secret from the first of its members that has
// it.
type ChainSecrets []Secrets

// Lookup implements Secrets.
func (c ChainSecrets) Lookup(name string) (string, bool) {
	for _, s := range c {
		if s == nil {
			continue
		}
		if v, ok := s.Lookup(name); ok {
			return v, true
		}
	}
	return "", false
}

// ReadSecretsFile reads a secrets file: a JSON object of secret names to
// string values. Its error never quotes a value.
func ReadSecretsFile(path string) (MapSecrets, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read secrets file: %w", err)
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, errors.New("read secrets file: it must be a JSON object of names to string values")
	}
	for name := range m {
		if !secretNamePattern.MatchString(name) {
			return nil, fmt.Errorf("read secrets file: %q is not a secret name (letters, digits and _)", shorten(name))
		}
	}
	return MapSecrets(m), nil
}

var (
	secretNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	// secretRef matches a secret reference in a template.
	secretRef = regexp.MustCompile(`\{\{\s*secrets\.([A-Za-z_][A-Za-z0-9_]{0,127})\s*\}\}`)
	// templateExpr matches any {{ … }} of a template.
	templateExpr = regexp.MustCompile(`\{\{.*?\}\}`)
)

// secretTemplate is a template whose {{ secrets.NAME }} references are
// resolved from the server's Secrets when it is rendered; its other
// {{ … }} are expressions over the node's Env.
type secretTemplate struct {
	parts []secretPart
}

type secretPart struct {
	tmpl   *Template // nil for a secret reference
	secret string
}

// compileSecretTemplate compiles a template that may reference secrets.
func compileSecretTemplate(src string) (*secretTemplate, error) {
	st := &secretTemplate{}
	for src != "" {
		loc := secretRef.FindStringSubmatchIndex(src)
		end := len(src)
		if loc != nil {
			end = loc[0]
		}
		if end > 0 {
			t, err := CompileTemplate(src[:end])
			if err != nil {
				return nil, err
			}
			st.parts = append(st.parts, secretPart{tmpl: t})
		}
		if loc == nil {
			break
		}
		st.parts = append(st.parts, secretPart{secret: src[loc[2]:loc[3]]})
		src = src[loc[1]:]
	}
	return st, nil
}

// render renders the template over env, resolving secrets from secrets;
// it appends the secret values it used to used. A secret the server does
// not have fails the node (not retryable).
func (st *secretTemplate) render(ctx context.Context, env Env, secrets Secrets, used []string) (string, []string, error) {
	var b strings.Builder
	for _, p := range st.parts {
		if p.tmpl != nil {
			s, err := p.tmpl.RenderContext(ctx, env)
			if err != nil {
				return "", used, err
			}
			b.WriteString(s)
			continue
		}
		var v string
		ok := false
		if secrets != nil {
			v, ok = secrets.Lookup(p.secret)
		}
		if !ok {
			return "", used, runstream.Errorf(runstream.CodeWorkflowNodeFailed, "the secret %s is not configured on this server", p.secret)
		}
		b.WriteString(v)
		used = append(used, v)
	}
	return b.String(), used, nil
}

// RuleLiteralCredential is details.rule of a definition refused because
// it holds a credential in clear instead of a secret reference.
const RuleLiteralCredential = "literal_credential"

// credentialHeaderWords mark a header that carries a credential when its
// lower-case name contains one of them.
var credentialHeaderWords = []string{"authorization", "api-key", "apikey", "api_key", "token", "secret", "password", "cookie", "session", "credential", "signature", "auth"}

// authSchemes are the literal words a credential header may hold besides
// references: "Bearer {{ secrets.TOKEN }}".
var authSchemes = []string{"bearer", "basic", "token", "digest", "bot", "apikey", "key", "splunk", "sso-key"}

// credentialParams are query parameter names that carry a credential.
var credentialParams = []string{"key", "api_key", "apikey", "api-key", "token", "access_token", "auth", "secret", "password", "pass", "pwd", "sig", "signature", "client_secret"}

// literalCredential reports whether a template holds a credential in
// clear: its written-out text, what is left once its references are
// removed, is more than an authentication scheme's name. A placeholder of
// string literals only ({{ "Bearer " + "sk-…" }}) is written out too; one
// that reads anything (input, nodes, secrets) is a reference.
func literalCredential(src string) bool {
	text := templateExpr.ReplaceAllStringFunc(src, func(e string) string {
		if lit, ok := constantText(e); ok {
			return " " + lit + " "
		}
		return " "
	})
	for _, w := range strings.Fields(text) {
		if !containsFold(authSchemes, w) {
			return true
		}
	}
	return false
}

// constantText returns the text of a placeholder made of string literals
// joined by + only, and whether it is one.
func constantText(placeholder string) (string, bool) {
	src := strings.TrimSuffix(strings.TrimPrefix(placeholder, "{{"), "}}")
	var b strings.Builder
	seen := false
	for i := 0; i < len(src); i++ {
		switch c := src[i]; c {
		case ' ', '\t', '\n', '\r', '+':
		case '"', '\'', '`':
			j := closingQuote(src, i)
			b.WriteString(src[i+1 : min(j, len(src))])
			seen, i = true, j
		default:
			return "", false
		}
	}
	return b.String(), seen
}

// closingQuote returns the index of the quote closing the string that
// opens at src[i] (len(src) when it is not closed); a backslash escapes
// the next byte except in a backquoted string.
func closingQuote(src string, i int) int {
	q := src[i]
	j := i + 1
	for j < len(src) && src[j] != q {
		if src[j] == '\\' && q != '`' {
			j++
		}
		j++
	}
	return j
}

// stringLiterals returns the contents of the quoted strings ("…", '…'
// and `…`) of an expression's text, escapes left as written.
func stringLiterals(src string) []string {
	var out []string
	for i := 0; i < len(src); i++ {
		if c := src[i]; c != '"' && c != '\'' && c != '`' {
			continue
		}
		j := closingQuote(src, i)
		out = append(out, src[i+1:min(j, len(src))])
		i = j
	}
	return out
}

// referenceMarker stands for a placeholder that reads a value, in the text
// secretShaped gives the redact package: a marker, which it never takes
// for a secret, and the end of a line, so that the words after it are not
// read as a value it starts ("password: {{ secrets.P }} mode").
const referenceMarker = "[REDACTED:reference]\n"

// secretShaped reports whether a template writes out text in the shape of
// a secret the redact package knows (a provider's key, a JWT, a URL's
// password…), whatever header or part of the URL holds it: in its text,
// or in a string literal of one of its placeholders.
func secretShaped(src string) bool {
	var literals []string
	text := templateExpr.ReplaceAllStringFunc(src, func(e string) string {
		if lit, ok := constantText(e); ok {
			return lit
		}
		literals = append(literals, stringLiterals(e)...)
		return referenceMarker
	})
	for _, t := range append(literals, text) {
		if redact.Text(t) != t {
			return true
		}
	}
	return false
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}

// checkCredentials refuses an http node whose headers or URL hold a
// credential in clear; the error names the header or the part of the
// URL, never the value.
func checkCredentials(rawURL string, headers map[string]string) error {
	deny := func(format string, args ...any) error {
		return runstream.Errorf(runstream.CodeWorkflowDefinitionInvalid, format+": reference a secret, {{ secrets.NAME }}, instead of writing the credential", args...).
			WithDetail("rule", RuleLiteralCredential)
	}
	for name, value := range headers {
		if secretShaped(value) || credentialHeader(name) && literalCredential(value) {
			return deny("header %s holds a literal credential", http.CanonicalHeaderKey(name))
		}
	}
	if where := urlCredential(rawURL); where != "" {
		return deny("%s holds a literal credential", where)
	}
	if secretShaped(rawURL) {
		return deny("the url holds a literal credential")
	}
	return nil
}

// credentialHeader reports whether a header's name says it carries a
// credential (credentialHeaderWords).
func credentialHeader(name string) bool {
	lower := strings.ToLower(name)
	return slices.ContainsFunc(credentialHeaderWords, func(w string) bool { return strings.Contains(lower, w) })
}

// urlCredential names the part of rawURL that holds a credential in
// clear, its password or a credential query parameter, or returns "".
// Its expressions are replaced first, so that an expression's text is not
// read as a password.
func urlCredential(rawURL string) string {
	u := templateExpr.ReplaceAllString(rawURL, "x")
	_, rest, ok := strings.Cut(u, "://")
	if !ok {
		return ""
	}
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		// The password is literal unless the whole of it, in the
		// original, is one expression.
		if _, pass, ok := strings.Cut(authority[:at], ":"); ok && pass != "" && literalPassword(rawURL) {
			return "the url's password"
		}
	}
	if _, query, ok := strings.Cut(tail, "?"); ok {
		query, _, _ = strings.Cut(query, "#")
		for _, pair := range strings.Split(query, "&") {
			k, v, _ := strings.Cut(pair, "=")
			if containsFold(credentialParams, k) && v != "" && literalCredential(queryValue(rawURL, k)) {
				return "the url's query parameter " + shorten(k)
			}
		}
	}
	return ""
}

// literalPassword reports whether the password of rawURL's user
// information is literal text rather than one {{ … }}.
func literalPassword(rawURL string) bool {
	_, rest, _ := strings.Cut(rawURL, "://")
	// The user information ends at the last @ before the path; an
	// expression may hold / or ?, so cut at the first @ followed by the
	// host.
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return false
	}
	_, pass, _ := strings.Cut(rest[:at], ":")
	return literalCredential(pass)
}

// queryValue returns the raw value of the first query parameter key of
// rawURL, expressions included.
func queryValue(rawURL, key string) string {
	_, query, _ := strings.Cut(rawURL, "?")
	for _, pair := range strings.Split(query, "&") {
		if k, v, ok := strings.Cut(pair, "="); ok && strings.EqualFold(k, key) {
			v, _, _ = strings.Cut(v, "#")
			return v
		}
	}
	return ""
}

// scrubSecrets replaces each secret value of used (of at least
// minScrubbedSecret bytes), as it is and as JSON escapes it, in s.
func scrubSecrets(s string, used []string) string {
	for _, v := range used {
		if len(v) < minScrubbedSecret {
			continue
		}
		s = strings.ReplaceAll(s, v, "[REDACTED]")
		if quoted, err := json.Marshal(v); err == nil {
			s = strings.ReplaceAll(s, string(quoted[1:len(quoted)-1]), "[REDACTED]")
		}
	}
	return s
}

// minScrubbedSecret is the shortest secret value scrubbed from outputs
// and errors: a shorter one would be replaced wherever its few letters
// happen to appear.
const minScrubbedSecret = 4
