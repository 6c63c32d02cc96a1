package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
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
// clear: its written-out text (templateText) is more than an
// authentication scheme's name and the references it holds.
func literalCredential(src string) bool {
	written, _ := templateText(src)
	for _, w := range strings.Fields(written) {
		if w != referenceWord && !containsFold(authSchemes, w) {
			return true
		}
	}
	return false
}

// referenceMarker stands for a placeholder that reads a value, in the
// written-out text of a template: a marker, which the redact package never
// takes for a secret, and the end of a line, so that the words after it
// are not read as a value it starts ("password: {{ secrets.P }} mode").
const referenceMarker = "[REDACTED:reference]\n"

// referenceWord is referenceMarker as a word of the text.
var referenceWord = strings.TrimSpace(referenceMarker)

// templateText splits a template as the credential checks read it. Its
// written-out text is the text outside placeholders, the string literals
// of each placeholder that reads no value ({{ "sk-…" }}, {{ trim("sk-…") }},
// {{ true ? "sk-…" : "" }}: what it renders is written in the definition),
// and referenceMarker for each placeholder that does read one (a variable
// such as input, nodes or secrets, or an element #). The string literals
// of the latter ({{ input.session ?? "anonymous" }}) are returned apart:
// they are held to the secret-shape test alone. Literals are decoded
// (escapes resolved) from the expression's syntax tree; a placeholder
// that does not parse counts as a reference, its template is refused
// when it compiles.
func templateText(src string) (written string, readLiterals []string) {
	written = templateExpr.ReplaceAllStringFunc(src, func(e string) string {
		lits, reads := placeholderLiterals(strings.TrimSuffix(strings.TrimPrefix(e, "{{"), "}}"))
		if reads {
			readLiterals = append(readLiterals, lits...)
			return referenceMarker
		}
		return strings.Join(lits, "")
	})
	return written, readLiterals
}

// placeholderLiterals returns the string literals of an expression, in
// the order written, and whether it reads a value.
func placeholderLiterals(src string) (literals []string, reads bool) {
	tree, err := parser.Parse(src)
	if err != nil {
		return nil, true
	}
	v := &literalVisitor{}
	ast.Walk(&tree.Node, v)
	return v.literals, v.reads
}

// literalVisitor collects what placeholderLiterals returns.
type literalVisitor struct {
	literals []string
	reads    bool
}

func (v *literalVisitor) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.StringNode:
		v.literals = append(v.literals, n.Value)
	case *ast.IdentifierNode, *ast.PointerNode, *ast.VariableDeclaratorNode:
		v.reads = true
	}
}

// secretShaped reports whether a template writes out text in the shape of
// a secret the redact package knows (a provider's key, a JWT, a URL's
// password…), whatever header or part of the URL holds it: in its
// written-out text, or in a string literal of a placeholder that reads a
// value.
func secretShaped(src string) bool {
	return templateHolds(src, func(t string) bool { return redact.Text(t) != t })
}

// ValueShaped is the check of secretShaped with the value rules alone
// (redact.Shaped): text that only follows a sensitive name ("password =
// ?", "{"token": input.token}") does not count.
func ValueShaped(src string) bool {
	return templateHolds(src, redact.Shaped)
}

// templateHolds reports whether test finds a secret in a template's
// written-out text or in a string literal of a placeholder that reads a
// value (templateText).
func templateHolds(src string, test func(string) bool) bool {
	written, literals := templateText(src)
	return slices.ContainsFunc(append(literals, written), test)
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

// CheckDefinitionCredentials refuses a definition (its JSON) that holds
// text in the shape of a secret (ValueShaped) in any string or member
// name, wherever it is: a node's config, a prompt, an expression, a
// schema's example. A definition is stored and served back as it was
// published, so it must reference secrets ({{ secrets.NAME }}), never
// hold them. The error is WORKFLOW_DEFINITION_INVALID with details.rule
// literal_credential and details.path, the JSON pointer of the string,
// never its value. The http node's stricter header and URL rules are
// checkCredentials'. A secret split across strings (a scripted model's
// tokens, a concatenation in an expression) is not found.
func CheckDefinitionCredentials(raw json.RawMessage) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil // refused as JSON elsewhere
	}
	path, found := secretIn(v, "")
	if !found {
		return nil
	}
	e := LiteralCredential("the definition at "+cmp.Or(path, "/"), path)
	if id := nodeAt(v, path); id != "" {
		e.WithNode(id)
	}
	return e
}

// nodeAt returns the id of the node whose part the pointer path names
// (/nodes/N/…), "" when it names none or its id is not a valid one.
func nodeAt(def any, path string) string {
	rest, ok := strings.CutPrefix(path, "/nodes/")
	if !ok {
		return ""
	}
	index, _, _ := strings.Cut(rest, "/")
	i, err := strconv.Atoi(index)
	root, _ := def.(map[string]any)
	nodes, _ := root["nodes"].([]any)
	if err != nil || i < 0 || i >= len(nodes) {
		return ""
	}
	node, _ := nodes[i].(map[string]any)
	if id, _ := node["id"].(string); nodeIDPattern.MatchString(id) {
		return id
	}
	return ""
}

// LiteralCredential is the refusal of a definition that holds a
// credential: where names the place in words, path (in details.path) is
// its JSON pointer.
func LiteralCredential(where, path string) *runstream.Error {
	return runstream.Errorf(runstream.CodeWorkflowDefinitionInvalid, "%s holds a literal credential: reference a secret, {{ secrets.NAME }}, instead of writing it", where).
		WithDetail("rule", RuleLiteralCredential).WithDetail("path", path)
}

// secretIn returns the JSON pointer, below at, of the first string of v
// that ValueShaped finds a secret in, or of the object whose member name
// it finds one in.
func secretIn(v any, at string) (string, bool) {
	switch v := v.(type) {
	case string:
		return at, ValueShaped(v)
	case []any:
		for i, item := range v {
			if path, ok := secretIn(item, fmt.Sprintf("%s/%d", at, i)); ok {
				return path, true
			}
		}
	case map[string]any:
		names := slices.Sorted(maps.Keys(v))
		for _, name := range names {
			member := at + contracts.PointerToken(name)
			if ValueShaped(name) {
				return at, true // the object: the name is the secret
			}
			if path, ok := secretIn(v[name], member); ok {
				return path, true
			}
		}
	}
	return "", false
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
