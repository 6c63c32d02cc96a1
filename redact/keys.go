package redact

// Key names are compared in a normalised form: ASCII letters lowercased,
// every other byte that is not a letter or digit dropped, so "X-Api-Key",
// "x_api_key", "xApiKey" and "x.api.key" are all "xapikey". While
// normalising we remember where words started in the original key (after a
// separator, at a lower→upper camelCase step, at the last upper of an
// acronym followed by a lower: "APIKey" is "API"+"Key"), because the weak
// names below only match at a word start.

// maxKeyTail bounds the work per key: only the last maxKeyTail bytes of a
// key are normalised, which is enough since the rules are suffixes.
const maxKeyTail = 64

// keyName is one sensitive name in normalised form.
type keyName struct {
	name string
	// strong names match as a suffix anywhere ("dbpassword"); weak names
	// only match the whole key or a suffix that starts a word ("auth_token",
	// "accessToken"), never a glued or counting form ("maxtokens").
	strong bool
}

// defaultKeyNames is the sensitive-key list. Plurals that name counts
// ("tokens", "max_tokens", "input_tokens") are deliberately absent: token
// accounting is core data.
var defaultKeyNames = []keyName{
	// Strong: long, unambiguous, a suffix is always a credential.
	{"password", true}, {"passwords", true}, {"passwd", true},
	{"passphrase", true}, {"secret", true}, {"secrets", true},
	{"secretkey", true}, {"secretaccesskey", true},
	{"authorization", true}, {"credential", true}, {"credentials", true},
	{"privatekey", true}, {"apikey", true}, {"apikeys", true},
	{"connectionstring", true}, {"cookie", true}, {"cookies", true},
	{"accountkey", true}, {"sharedaccesskey", true}, // Azure connection strings
	// Weak: short or common words; whole key or a word-start suffix.
	{"token", false}, {"pwd", false}, {"dsn", false}, {"sessionid", false},
	// Glued spellings of token names ("accesstoken", "x-authtoken").
	{"accesstoken", false}, {"refreshtoken", false}, {"idtoken", false},
	{"authtoken", false}, {"apitoken", false}, {"bearertoken", false},
	{"sessiontoken", false}, {"csrftoken", false}, {"xsrftoken", false},
}

// keyTable indexes names by their last byte so a key is compared with a
// handful of candidates only.
type keyTable [256][]keyName

func newKeyTable(names []keyName) *keyTable {
	var t keyTable
	for _, n := range names {
		last := n.name[len(n.name)-1]
		t[last] = append(t[last], n)
	}
	return &t
}

var defaultKeys = newKeyTable(defaultKeyNames)

// keyMatch is how a key matched: not at all, a weak name, or a strong name.
type keyMatch uint8

const (
	noMatch keyMatch = iota
	weakMatch
	strongMatch
)

// matchKey reports whether key is sensitive under the default names plus
// extra (normalised, weak).
func matchKey(key string, extra []string) keyMatch {
	var buf [maxKeyTail]byte
	norm, starts := normalizeKey(key, &buf)
	return matchNorm(norm, starts, extra)
}

// matchNorm is matchKey for a key normalised by normalizeKey.
func matchNorm(norm []byte, starts uint64, extra []string) keyMatch {
	if len(norm) == 0 {
		return noMatch
	}
	best := noMatch
	for _, n := range defaultKeys[norm[len(norm)-1]] {
		if hasNameSuffix(norm, starts, n.name, n.strong) {
			if n.strong {
				return strongMatch
			}
			best = weakMatch
		}
	}
	if best != noMatch {
		return best
	}
	for _, n := range extra {
		if hasNameSuffix(norm, starts, n, false) {
			return weakMatch
		}
	}
	return noMatch
}

// hasNameSuffix reports whether norm ends with name and, unless strong, the
// name starts a word (bit p of starts).
func hasNameSuffix(norm []byte, starts uint64, name string, strong bool) bool {
	p := len(norm) - len(name)
	if p < 0 || string(norm[p:]) != name {
		return false
	}
	return strong || starts&(1<<p) != 0
}

// normalizeKey writes the normalised tail of key into buf and returns it
// with a bit set for every position where a word starts.
func normalizeKey(key string, buf *[maxKeyTail]byte) (norm []byte, starts uint64) {
	from := max(0, len(key)-maxKeyTail)
	n := 0
	for i := from; i < len(key); i++ {
		c := key[i]
		if !isAlnum(c) {
			continue
		}
		if wordStart(key, i) {
			starts |= 1 << n
		}
		buf[n] = lower(c)
		n++
	}
	return buf[:n], starts
}

// wordStart reports whether the alphanumeric byte key[i] starts a word.
func wordStart(key string, i int) bool {
	if i == 0 {
		return true
	}
	prev, c := key[i-1], key[i]
	switch {
	case !isAlnum(prev):
		return true
	case isUpper(c) && (isLowerASCII(prev) || isDigit(prev)):
		return true // camelCase: "accessToken"
	case isUpper(c) && isUpper(prev) && i+1 < len(key) && isLowerASCII(key[i+1]):
		return true // acronym end: "APIKey"
	}
	return false
}

// normalizeName lowercases name and drops non-alphanumerics, for
// Options.ExtraKeys.
func normalizeName(name string) string {
	b := make([]byte, 0, len(name))
	for i := 0; i < len(name); i++ {
		if isAlnum(name[i]) {
			b = append(b, lower(name[i]))
		}
	}
	return string(b)
}

func isAlnum(c byte) bool      { return isLowerASCII(c) || isUpper(c) || isDigit(c) }
func isLowerASCII(c byte) bool { return 'a' <= c && c <= 'z' }
func isUpper(c byte) bool      { return 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool      { return '0' <= c && c <= '9' }

func lower(c byte) byte {
	if isUpper(c) {
		return c + ('a' - 'A')
	}
	return c
}
