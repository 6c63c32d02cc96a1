package redact

import (
	"encoding/base64"
	"regexp"
	"strings"
	"unicode/utf8"
)

// markerPrefix starts every marker: "[REDACTED:<rule>]".
const markerPrefix = "[REDACTED:"

func marker(rule string) string { return markerPrefix + rule + "]" }

// isMarker reports whether s is exactly one marker.
func isMarker(s string) bool {
	if len(s) < len(markerPrefix)+2 || !strings.HasPrefix(s, markerPrefix) || s[len(s)-1] != ']' {
		return false
	}
	for i := len(markerPrefix); i < len(s)-1; i++ {
		if c := s[i]; !isLowerASCII(c) && c != '_' {
			return false
		}
	}
	return true
}

// valueRule finds one kind of secret inside a string.
type valueRule struct {
	// name is the rule's marker name; label, when set, picks it per match.
	name  string
	label func(s string, m []int) string
	// triggers are literals of which one must occur in s before re runs
	// at all (see candidates); need, when set, must occur too.
	triggers []string
	need     string
	re       *regexp.Regexp
	// group is the submatch replaced by the marker (0: the whole match).
	group int
	// accept, when set, vets the secret before it is replaced.
	accept func(secret string) bool
}

// Character classes that never contain a marker's '[' or ']', so a marker
// cannot be (part of) a match and redaction is idempotent.
const (
	b64url  = `[A-Za-z0-9_-]`
	alnum   = `[A-Za-z0-9]`
	urlUser = `[^\s/?#@:\[\]"'<>` + "`" + `\\]*`
	urlPass = `[^\s/?#\[\]"'<>` + "`" + `\\]*`
)

// lead is what may come before a provider key: the start of the string
// or a character that is not a letter or digit. An underscore counts, so
// a key glued to a name ("extra_sk-ant-…") is found, while a prefix inside
// a word ("task-list") is not; the key itself is the rule's group 1.
const lead = `(?:^|[^A-Za-z0-9])`

// afterLead compiles the expression of a provider key's shape: the key,
// as group 1, after lead.
func afterLead(shape string) *regexp.Regexp { return regexp.MustCompile(lead + "(" + shape + ")") }

// The lines that open and close a private key block.
const (
	pemBegin = `-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----`
	pemEnd   = `-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----`
)

var pemBeginRe, pemEndRe = regexp.MustCompile(pemBegin), regexp.MustCompile(pemEnd)

// OpenPrivateKey returns the BEGIN line of the last private key block of
// text when no END line follows it (the block is still being written),
// else nil. Text after it is part of the block, which the private_key rule
// redacts whole: a writer of text in pieces keeps the line as the context
// of the next piece.
func OpenPrivateKey(text []byte) []byte {
	begins := pemBeginRe.FindAllIndex(text, -1)
	if len(begins) == 0 {
		return nil
	}
	last := begins[len(begins)-1]
	if pemEndRe.Match(text[last[1]:]) {
		return nil
	}
	return text[last[0]:last[1]]
}

// valueRules run in this order: whole PEM blocks first, then the
// provider-specific shapes (their names are the most useful), then the
// contextual shapes (URLs with userinfo, Bearer/Basic values) that would
// otherwise swallow them.
var valueRules = []valueRule{
	{
		name:     "private_key",
		triggers: []string{"PRIVATE KEY"},
		// An unterminated block (a truncated output) is redacted to the end.
		re: regexp.MustCompile(pemBegin + `(?:[\s\S]*?` + pemEnd + `|[\s\S]*)`),
	},
	{
		name:     "anthropic_key",
		triggers: []string{"sk-ant-"},
		re:       afterLead(`sk-ant-` + b64url + `{20,}`),
		group:    1,
		accept:   func(s string) bool { return looksRandom(s[len("sk-ant-"):]) },
	},
	{
		name:     "openai_key",
		triggers: []string{"sk-"},
		re:       afterLead(`sk-` + b64url + `{20,}`),
		group:    1,
		accept:   func(s string) bool { return looksRandom(s[len("sk-"):]) },
	},
	{
		name:     "github_token",
		triggers: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"},
		re:       afterLead(`gh[pousr]_` + alnum + `{36,}|github_pat_[A-Za-z0-9_]{22,}`),
		group:    1,
	},
	{
		name:     "gitlab_token",
		triggers: []string{"glpat-"},
		re:       afterLead(`glpat-` + b64url + `{20,}`),
		group:    1,
	},
	{
		name:     "slack_webhook",
		triggers: []string{"hooks.slack.com/"},
		re:       regexp.MustCompile(`hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9_/-]{8,})`),
		// Keep the host and kind so a reader knows what was there.
		group: 1,
	},
	{
		name:     "slack_token",
		triggers: []string{"xox", "xapp-"},
		re:       afterLead(`(?:xox[abeprs]|xapp)-[A-Za-z0-9-]{10,}`),
		group:    1,
		accept:   looksRandom,
	},
	{
		name:     "stripe_key",
		triggers: []string{"_live_", "_test_", "whsec_"},
		re:       afterLead(`[rs]k_(?:live|test)_` + alnum + `{16,}|whsec_` + alnum + `{24,}`),
		group:    1,
	},
	{
		name:     "google_api_key",
		triggers: []string{"AIza"},
		re:       afterLead(`AIza` + b64url + `{35}`),
		group:    1,
	},
	{
		name:     "huggingface_token",
		triggers: []string{"hf_"},
		re:       afterLead(`hf_` + alnum + `{30,}`),
		group:    1,
		accept:   func(s string) bool { return looksRandom(s[len("hf_"):]) },
	},
	{
		name:     "aws_access_key_id",
		triggers: []string{"AKIA", "ASIA"},
		re:       regexp.MustCompile(lead + `((?:AKIA|ASIA)[A-Z0-9]{16})\b`),
		group:    1,
	},
	{
		name:     "aws_secret_key",
		triggers: []string{"secret_access_key", "SECRET_ACCESS_KEY", "SecretAccessKey", "secretAccessKey"},
		re:       regexp.MustCompile(`(?i)aws_?secret_?access_?key["']?[ \t]*(?:=|:)[ \t]*["']?([A-Za-z0-9/+]{40})`),
		group:    1,
	},
	{
		// runstream's own API keys (auth.NewKey).
		name:     "runstream_key",
		triggers: []string{"rsk_"},
		re:       afterLead(`rsk_` + b64url + `{32,}`),
		group:    1,
		accept:   func(s string) bool { return looksRandom(s[len("rsk_"):]) },
	},
	{
		name:     "npm_token",
		triggers: []string{"npm_"},
		re:       regexp.MustCompile(lead + `(npm_` + alnum + `{36})\b`),
		group:    1,
	},
	{
		name:     "jwt",
		triggers: []string{"eyJ"},
		re:       afterLead(`eyJ` + b64url + `{10,}\.` + b64url + `{2,}\.` + b64url + `*`),
		group:    1,
	},
	{
		name:     "dsn",
		label:    urlLabel,
		triggers: []string{"://"},
		need:     "@",
		// Userinfo with a password; the password may hold a raw '@', so it
		// runs to the last '@' of the authority.
		re:    regexp.MustCompile(`\b([A-Za-z][A-Za-z0-9+.-]*)://(` + urlUser + `:` + urlPass + `)@`),
		group: 2,
	},
	{
		// Go MySQL driver form: user:pass@tcp(host:3306)/db.
		name:     "dsn",
		triggers: []string{"@tcp(", "@unix("},
		re:       regexp.MustCompile(`([A-Za-z0-9_.-]*:[^\s@/\[\]"']+)@(?:tcp|unix)\(`),
		group:    1,
	},
	{
		name:     "bearer",
		triggers: []string{"Bearer", "bearer", "BEARER"},
		re:       regexp.MustCompile(`(?i)\bbearer[ \t]+([A-Za-z0-9._~+/-]+=*)`),
		group:    1,
		accept:   looksRandom,
	},
	{
		name:     "basic_auth",
		triggers: []string{"Basic", "basic", "BASIC"},
		re:       regexp.MustCompile(`(?i)\bbasic[ \t]+([A-Za-z0-9+/]{4,}={0,2})`),
		group:    1,
		accept:   isBasicCredentials,
	},
}

// dsnSchemes are the URL schemes whose userinfo is redacted as "dsn"; any
// other scheme ("https") is "url_credentials".
var dsnSchemes = map[string]bool{
	"postgres": true, "postgresql": true, "mysql": true, "mariadb": true,
	"redis": true, "rediss": true, "amqp": true, "amqps": true,
	"mongodb": true, "mongodb+srv": true, "mssql": true, "sqlserver": true,
	"clickhouse": true, "nats": true, "kafka": true, "jdbc": true,
}

func urlLabel(s string, m []int) string {
	if dsnSchemes[strings.ToLower(s[m[2]:m[3]])] {
		return "dsn"
	}
	return "url_credentials"
}

// looksRandom tells a machine-made credential from a word or a phrase: at
// least 8 bytes, with at least two "unusual" characters, digits or
// uppercase letters after the first byte. "tokens", "Authentication" and
// "this-is-a-phrase" fail; a random base62 or hex string passes with
// overwhelming probability.
func looksRandom(s string) bool {
	if len(s) < 8 {
		return false
	}
	unusual := 0
	for i := 0; i < len(s); i++ {
		if isDigit(s[i]) || (i > 0 && isUpper(s[i])) {
			unusual++
			if unusual >= 2 {
				return true
			}
		}
	}
	return false
}

// isBasicCredentials reports whether s is base64 of printable "user:pass",
// which tells a Basic credential from prose such as "basic authentication".
func isBasicCredentials(s string) bool {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		raw, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "="))
		if err != nil {
			return false
		}
	}
	if !utf8.Valid(raw) || !strings.Contains(string(raw), ":") {
		return false
	}
	for _, r := range string(raw) {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// trigger is one literal of a rule (or of the key=value scan, assignRule).
type trigger struct {
	lit  string
	rule int
}

// assignRule is the bit of candidates that stands for the key=value scan.
var assignRule = len(valueRules)

// triggerTable lists the triggers by their first byte.
var triggerTable = func() *[256][]trigger {
	var t [256][]trigger
	for i, rule := range valueRules {
		for _, lit := range rule.triggers {
			t[lit[0]] = append(t[lit[0]], trigger{lit, i})
		}
	}
	for _, sep := range []string{"=", ":"} {
		t[sep[0]] = append(t[sep[0]], trigger{sep, assignRule})
	}
	return &t
}()

// triggerPairs has, for each byte a trigger starts with, a bit for each
// byte that follows it in a trigger; a trigger of one byte sets them all.
// Most bytes of text start no trigger, or none with the byte after them.
var triggerPairs = func() *[256][4]uint64 {
	var t [256][4]uint64
	for c, triggers := range triggerTable {
		for _, tr := range triggers {
			if len(tr.lit) == 1 {
				t[c] = [4]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
				continue
			}
			n := tr.lit[1]
			t[c][n>>6] |= 1 << (n & 63)
		}
	}
	return &t
}()

// candidates returns a bit per rule (and bit assignRule) whose trigger
// occurs in s: one pass over s instead of a substring search per trigger,
// which is what keeps a string without secrets cheap.
func candidates(s string) (mask uint64) {
	for i := 0; i < len(s); i++ {
		if i+1 < len(s) {
			if n := s[i+1]; triggerPairs[s[i]][n>>6]&(1<<(n&63)) == 0 {
				continue
			}
		}
		for _, t := range triggerTable[s[i]] {
			if mask&(1<<t.rule) == 0 && strings.HasPrefix(s[i:], t.lit) {
				mask |= 1 << t.rule
			}
		}
	}
	return mask
}

// apply replaces every accepted match of rule in s; it returns s itself
// when nothing was replaced.
func (rule *valueRule) apply(s string) (string, bool) {
	if rule.need != "" && !strings.Contains(s, rule.need) {
		return s, false
	}
	matches := rule.re.FindAllStringSubmatchIndex(s, -1)
	if matches == nil {
		return s, false
	}
	var b strings.Builder
	last, changed := 0, false
	for _, m := range matches {
		start, end := m[2*rule.group], m[2*rule.group+1]
		if start < 0 || start < last {
			continue
		}
		secret := s[start:end]
		if isMarker(secret) || (rule.accept != nil && !rule.accept(secret)) {
			continue
		}
		name := rule.name
		if rule.label != nil {
			name = rule.label(s, m)
		}
		if !changed {
			b.Grow(len(s))
			changed = true
		}
		b.WriteString(s[last:start])
		b.WriteString(marker(name))
		last = end
	}
	if !changed {
		return s, false
	}
	b.WriteString(s[last:])
	return b.String(), true
}
