package auth

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// DefaultLeeway is the default of JWTConfig.Leeway.
const DefaultLeeway = 30 * time.Second

// JWTConfig configures JWT verification.
type JWTConfig struct {
	// KeysFile holds the verification keys: a JWKS document
	// ({"keys":[…]}, kty oct for HS256, RSA for RS256, EC P-256 for
	// ES256) or PEM "PUBLIC KEY" blocks (RSA: RS256, EC P-256: ES256).
	KeysFile string
	// Issuer, when set, must equal the token's iss.
	Issuer string
	// Audience, when set, must be the token's aud or one of its entries.
	Audience string
	// Leeway is the clock skew allowed on exp and nbf. Defaults to
	// DefaultLeeway; negative: none.
	Leeway time.Duration
	// Now returns the current time. Defaults to time.Now.
	Now func() time.Time
}

// JWT verifies compact JWS tokens (RFC 7519) signed with HS256, RS256 or
// ES256 by one of the keys of its file. Each key verifies one algorithm
// only, fixed by its type, so a token cannot choose how it is checked:
// "alg: none", an HS256 token made with an RSA public key as the secret,
// and any other algorithm are refused. A token must carry sub (the user)
// and exp; nbf, iss and aud are checked when present or configured.
//
// JWT is a Revocable: the Identity of a token names the key that verified
// it (KeyID, a fingerprint of the key), so that once a Reload leaves that
// key out of the file, the sessions made from the token are refused and
// the streams opened with either end (AfterRevoke). JWT is safe for
// concurrent use.
type JWT struct {
	cfg     JWTConfig
	keys    atomic.Pointer[[]verifyKey]
	revoked revocations // the AfterRevoke callbacks
}

// NewJWT reads the keys of cfg.KeysFile.
func NewJWT(cfg JWTConfig) (*JWT, error) {
	if cfg.Leeway == 0 {
		cfg.Leeway = DefaultLeeway
	}
	if cfg.Leeway < 0 {
		cfg.Leeway = 0
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	j := &JWT{cfg: cfg}
	if err := j.Reload(); err != nil {
		return nil, err
	}
	return j, nil
}

// Reload re-reads the keys file. On error the keys in use stay. Before it
// returns, Reload calls the AfterRevoke callbacks of the keys it removed.
func (j *JWT) Reload() error {
	keys, err := readVerifyKeys(j.cfg.KeysFile)
	if err != nil {
		return err
	}
	for _, f := range j.revoked.swap(func() { j.keys.Store(&keys) }, j.Holds) {
		f()
	}
	return nil
}

// Len returns the number of keys loaded.
func (j *JWT) Len() int { return len(*j.keys.Load()) }

// Holds implements Revocable: it reports whether the key that verified
// id's token (id.KeyID) is still one of the file's keys.
func (j *JWT) Holds(id Identity) bool {
	keys := j.keys.Load()
	if keys == nil || id.KeyID == "" {
		return false
	}
	for _, k := range *keys {
		if k.id == id.KeyID {
			return true
		}
	}
	return false
}

// AfterRevoke implements Revocable: f is called by the Reload after which
// Holds(id) is false, or at once, before AfterRevoke returns, when it is
// false already. f must not block.
func (j *JWT) AfterRevoke(id Identity, f func()) (stop func()) {
	return j.revoked.after(j.Holds, id, f)
}

// Watched returns the number of AfterRevoke callbacks registered and not
// yet called nor stopped.
func (j *JWT) Watched() int { return j.revoked.len() }

// jwtHeader is the JOSE header of a token.
type jwtHeader struct {
	Alg  string          `json:"alg"`
	Kid  string          `json:"kid"`
	Crit json.RawMessage `json:"crit"`
}

// jwtClaims are the claims a token is checked with.
type jwtClaims struct {
	Sub string          `json:"sub"`
	Iss string          `json:"iss"`
	Aud json.RawMessage `json:"aud"`
	Exp *float64        `json:"exp"`
	Nbf *float64        `json:"nbf"`
}

// Authenticate implements Authenticator.
func (j *JWT) Authenticate(token string) (Identity, error) {
	if len(token) > maxCredentialBytes {
		return Identity{}, errInvalid()
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return Identity{}, errInvalid()
	}
	var header jwtHeader
	if !decodeSegment(parts[0], &header) || header.Crit != nil {
		return Identity{}, errInvalid()
	}
	sig, err := strictB64.DecodeString(parts[2])
	if err != nil {
		return Identity{}, errInvalid()
	}
	signed := token[:len(parts[0])+1+len(parts[1])]
	keyID := ""
	for _, k := range *j.keys.Load() {
		// The key decides the algorithm; the header only selects keys.
		if k.alg != header.Alg || (header.Kid != "" && k.kid != "" && k.kid != header.Kid) {
			continue
		}
		if k.verify(signed, sig) {
			keyID = k.id
			break
		}
	}
	if keyID == "" {
		return Identity{}, errInvalid()
	}
	var claims jwtClaims
	if !decodeSegment(parts[1], &claims) {
		return Identity{}, errInvalid()
	}
	id, err := j.check(claims)
	if err != nil {
		return Identity{}, err
	}
	id.KeyID = keyID
	return id, nil
}

// check validates the claims of a token whose signature is verified.
func (j *JWT) check(c jwtClaims) (Identity, error) {
	if c.Sub == "" || c.Exp == nil || !finite(*c.Exp) {
		return Identity{}, errInvalid()
	}
	now := j.cfg.Now()
	exp := unixTime(*c.Exp)
	if !now.Before(exp.Add(j.cfg.Leeway)) {
		return Identity{}, errExpired()
	}
	if c.Nbf != nil && (!finite(*c.Nbf) || now.Add(j.cfg.Leeway).Before(unixTime(*c.Nbf))) {
		return Identity{}, errInvalid()
	}
	if j.cfg.Issuer != "" && c.Iss != j.cfg.Issuer {
		return Identity{}, errInvalid()
	}
	if j.cfg.Audience != "" && !hasAudience(c.Aud, j.cfg.Audience) {
		return Identity{}, errInvalid()
	}
	return Identity{User: c.Sub, Expires: exp.Add(j.cfg.Leeway)}, nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) && math.Abs(f) < 1<<53 }

func unixTime(f float64) time.Time {
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9))
}

// hasAudience reports whether aud (a string or an array of strings)
// names want.
func hasAudience(aud json.RawMessage, want string) bool {
	var one string
	if json.Unmarshal(aud, &one) == nil {
		return one == want
	}
	var many []string
	if json.Unmarshal(aud, &many) != nil {
		return false
	}
	for _, a := range many {
		if a == want {
			return true
		}
	}
	return false
}

// decodeSegment decodes a base64url JSON object segment into v, a
// struct whose members name the header's or claims' names. A member
// named twice (as written, or through a \u escape), or whose name differs
// from one of v's only in case ("Sub", "EXP"), makes the segment invalid:
// which of the two counts would depend on the parser (encoding/json
// takes the last, and matches names in any case).
func decodeSegment(seg string, v any) bool {
	raw, err := strictB64.DecodeString(seg)
	if err != nil || len(raw) == 0 || raw[0] != '{' {
		return false
	}
	names, ok := memberNames(raw)
	if !ok {
		return false
	}
	t := reflect.TypeOf(v).Elem()
	for _, name := range names {
		for i := range t.NumField() {
			tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			if name != tag && strings.EqualFold(name, tag) {
				return false
			}
		}
	}
	return json.Unmarshal(raw, v) == nil
}

// memberNames returns the names of the members of the JSON object raw,
// as decoded (escapes resolved), and false when raw does not begin with
// an object or names a member twice.
func memberNames(raw []byte) ([]string, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var names []string
	for dec.More() {
		tok, err := dec.Token()
		name, _ := tok.(string)
		var value json.RawMessage
		if err != nil || slices.Contains(names, name) || dec.Decode(&value) != nil {
			return nil, false
		}
		names = append(names, name)
	}
	return names, true
}

// verifyKey is one verification key and the one algorithm it verifies.
type verifyKey struct {
	// id is the key's fingerprint, the KeyID of the tokens it verifies
	// (verifyKeyID).
	id   string
	kid  string
	alg  string // HS256, RS256 or ES256
	hmac []byte
	rsa  *rsa.PublicKey
	ec   *ecdsa.PublicKey
}

// verify checks sig over signed with the key's algorithm.
func (k verifyKey) verify(signed string, sig []byte) bool {
	switch k.alg {
	case "HS256":
		mac := hmac.New(sha256.New, k.hmac)
		mac.Write([]byte(signed))
		return hmac.Equal(mac.Sum(nil), sig)
	case "RS256":
		sum := sha256.Sum256([]byte(signed))
		return rsa.VerifyPKCS1v15(k.rsa, crypto.SHA256, sum[:], sig) == nil
	case "ES256":
		// JWS ES256 signatures are R || S, 32 bytes each (RFC 7518 §3.4).
		if len(sig) != 64 {
			return false
		}
		sum := sha256.Sum256([]byte(signed))
		r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
		return ecdsa.Verify(k.ec, sum[:], r, s)
	}
	return false
}
