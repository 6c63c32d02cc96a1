package auth_test

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/auth"
	"github.com/runstream/runstream/auth/authtest"
)

var jwtNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// jwtEnv holds one key of each algorithm, the files that list their
// public halves, and a JWT verifier over each file.
type jwtEnv struct {
	secret []byte
	rsaKey *rsa.PrivateKey
	ecKey  *ecdsa.PrivateKey
	jwks   *auth.JWT // oct (kid hs) + RSA (kid rs) + EC (kid es)
	pem    *auth.JWT // the RSA and EC public keys in PEM
}

func newJWTEnv(t testing.TB) jwtEnv {
	t.Helper()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	e := jwtEnv{secret: []byte(strings.Repeat("s", 32)), rsaKey: rsaKey, ecKey: authtest.NewECKey(t)}
	dir := t.TempDir()
	b64 := base64.RawURLEncoding
	ecPub, _ := e.ecKey.PublicKey.Bytes()
	authtest.WriteJWKS(t, filepath.Join(dir, "jwks.json"),
		authtest.OctJWK("hs", e.secret),
		map[string]any{"kty": "RSA", "kid": "rs", "alg": "RS256", "n": b64.EncodeToString(rsaKey.N.Bytes()), "e": "AQAB"},
		map[string]any{"kty": "EC", "kid": "es", "crv": "P-256", "x": b64.EncodeToString(ecPub[1:33]), "y": b64.EncodeToString(ecPub[33:])})
	rsaDER, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	ecDER, _ := x509.MarshalPKIXPublicKey(&e.ecKey.PublicKey)
	pemFile := filepath.Join(dir, "keys.pem")
	if err := os.WriteFile(pemFile, append(pemBlock(rsaDER), pemBlock(ecDER)...), 0o600); err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return jwtNow }
	if e.jwks, err = auth.NewJWT(auth.JWTConfig{KeysFile: filepath.Join(dir, "jwks.json"), Issuer: "https://idp", Audience: "runstream", Now: now}); err != nil {
		t.Fatal(err)
	}
	if e.pem, err = auth.NewJWT(auth.JWTConfig{KeysFile: pemFile, Now: now}); err != nil {
		t.Fatal(err)
	}
	return e
}

func claims(sub string, exp time.Time, extra ...any) map[string]any {
	c := map[string]any{"sub": sub, "exp": exp.Unix(), "iss": "https://idp", "aud": "runstream"}
	for i := 0; i+1 < len(extra); i += 2 {
		if extra[i+1] == nil {
			delete(c, extra[i].(string))
			continue
		}
		c[extra[i].(string)] = extra[i+1]
	}
	return c
}

// dupClaims returns the claims object of members (JSON text) followed by
// a valid exp, iss and aud.
func dupClaims(members string, exp time.Time) string {
	return fmt.Sprintf(`{%s,"exp":%d,"iss":"https://idp","aud":"runstream"}`, members, exp.Unix())
}

// A token as RawToken writes it, without a member named twice, is
// accepted: the refusals of named-twice members below are of that alone.
func TestJWTAcceptsRawToken(t *testing.T) {
	t.Parallel()
	e := newJWTEnv(t)
	token := authtest.RawToken(`{"alg":"HS256"}`, dupClaims(`"sub":"alice","nested":{"a":1,"b":{"a":2}}`, jwtNow.Add(time.Minute)), authtest.HS256(e.secret))
	if id, err := e.jwks.Authenticate(token); err != nil || id.User != "alice" {
		t.Errorf("%+v, %v", id, err)
	}
}

func TestJWTAccepts(t *testing.T) {
	t.Parallel()
	e := newJWTEnv(t)
	exp := jwtNow.Add(time.Minute)
	tests := []struct {
		name  string
		v     *auth.JWT
		token string
	}{
		{"HS256", e.jwks, authtest.Token(map[string]any{"alg": "HS256", "kid": "hs"}, claims("alice", exp), authtest.HS256(e.secret))},
		{"RS256", e.jwks, authtest.Token(map[string]any{"alg": "RS256", "kid": "rs"}, claims("alice", exp), authtest.RS256(e.rsaKey))},
		{"ES256", e.jwks, authtest.Token(map[string]any{"alg": "ES256", "kid": "es"}, claims("alice", exp), authtest.ES256(e.ecKey))},
		{"no kid", e.jwks, authtest.Token(map[string]any{"alg": "ES256"}, claims("alice", exp), authtest.ES256(e.ecKey))},
		{"aud array", e.jwks, authtest.Token(map[string]any{"alg": "HS256"}, claims("alice", exp, "aud", []string{"x", "runstream"}), authtest.HS256(e.secret))},
		{"PEM RS256", e.pem, authtest.Token(map[string]any{"alg": "RS256"}, claims("alice", exp), authtest.RS256(e.rsaKey))},
		{"PEM ES256", e.pem, authtest.Token(map[string]any{"alg": "ES256", "typ": "JWT"}, claims("alice", exp), authtest.ES256(e.ecKey))},
		{"expired within leeway", e.jwks, authtest.Token(map[string]any{"alg": "HS256"}, claims("alice", jwtNow.Add(-10*time.Second)), authtest.HS256(e.secret))},
		{"nbf within leeway", e.jwks, authtest.Token(map[string]any{"alg": "HS256"}, claims("alice", exp, "nbf", jwtNow.Add(10*time.Second).Unix()), authtest.HS256(e.secret))},
	}
	for _, tt := range tests {
		id, err := tt.v.Authenticate(tt.token)
		if err != nil || id.User != "alice" || id.Expires.IsZero() {
			t.Errorf("%s: %+v, %v", tt.name, id, err)
		}
	}
}

func TestJWTRefuses(t *testing.T) {
	t.Parallel()
	e := newJWTEnv(t)
	exp := jwtNow.Add(time.Minute)
	hs := map[string]any{"alg": "HS256"}
	rsaPubDER, _ := x509.MarshalPKIXPublicKey(&e.rsaKey.PublicKey)
	otherEC := authtest.NewECKey(t)
	tests := []struct {
		name, token string
		v           *auth.JWT
		expired     bool
	}{
		{name: "alg none", token: authtest.Token(map[string]any{"alg": "none"}, claims("alice", exp), nil)},
		{name: "alg None", token: authtest.Token(map[string]any{"alg": "None"}, claims("alice", exp), nil)},
		{name: "alg HS512", token: authtest.Token(map[string]any{"alg": "HS512"}, claims("alice", exp), authtest.HS256(e.secret))},
		// Algorithm confusion: the RSA public key (PEM or DER) as an HMAC
		// secret, against a verifier that holds only public keys.
		{name: "HS256 with the RSA public key (PEM)", v: e.pem, token: authtest.Token(hs, claims("alice", exp), authtest.HS256(pemBlock(rsaPubDER)))},
		{name: "HS256 with the RSA public key (DER)", v: e.pem, token: authtest.Token(hs, claims("alice", exp), authtest.HS256(rsaPubDER))},
		{name: "RS256 header, ES256 signature", token: authtest.Token(map[string]any{"alg": "RS256"}, claims("alice", exp), authtest.ES256(e.ecKey))},
		{name: "ES256 header, HMAC signature", token: authtest.Token(map[string]any{"alg": "ES256"}, claims("alice", exp), authtest.HS256(e.secret))},
		{name: "wrong signature", token: authtest.Token(hs, claims("alice", exp), authtest.HS256([]byte(strings.Repeat("x", 32))))},
		{name: "unknown EC key", token: authtest.Token(map[string]any{"alg": "ES256"}, claims("alice", exp), authtest.ES256(otherEC))},
		{name: "kid of another key", token: authtest.Token(map[string]any{"alg": "HS256", "kid": "rs"}, claims("alice", exp), authtest.HS256(e.secret))},
		{name: "crit header", token: authtest.Token(map[string]any{"alg": "HS256", "crit": []string{"b64"}, "b64": false}, claims("alice", exp), authtest.HS256(e.secret))},
		{name: "expired", token: authtest.Token(hs, claims("alice", jwtNow.Add(-time.Minute)), authtest.HS256(e.secret)), expired: true},
		{name: "no exp", token: authtest.Token(hs, claims("alice", exp, "exp", nil), authtest.HS256(e.secret))},
		{name: "not yet valid", token: authtest.Token(hs, claims("alice", exp, "nbf", jwtNow.Add(time.Minute).Unix()), authtest.HS256(e.secret))},
		{name: "no sub", token: authtest.Token(hs, claims("", exp), authtest.HS256(e.secret))},
		{name: "wrong issuer", token: authtest.Token(hs, claims("alice", exp, "iss", "https://evil"), authtest.HS256(e.secret))},
		{name: "no issuer", token: authtest.Token(hs, claims("alice", exp, "iss", nil), authtest.HS256(e.secret))},
		{name: "wrong audience", token: authtest.Token(hs, claims("alice", exp, "aud", []string{"other"}), authtest.HS256(e.secret))},
		{name: "no audience", token: authtest.Token(hs, claims("alice", exp, "aud", nil), authtest.HS256(e.secret))},
		// A claim named again in another case: encoding/json would take
		// the last of them for the claim.
		{name: "Sub beside sub", token: authtest.Token(hs, claims("alice", exp, "Sub", "mallory"), authtest.HS256(e.secret))},
		{name: "EXP beside exp", token: authtest.Token(hs, claims("alice", jwtNow.Add(-time.Minute), "EXP", jwtNow.Add(time.Hour).Unix()), authtest.HS256(e.secret))},
		{name: "ALG beside alg", token: authtest.Token(map[string]any{"alg": "HS256", "ALG": "none"}, claims("alice", exp), authtest.HS256(e.secret))},
		// A member named twice, as written or through an escape: which
		// one counts would depend on the parser (encoding/json takes the
		// last, others the first).
		{name: "sub twice", token: authtest.RawToken(`{"alg":"HS256"}`, dupClaims(`"sub":"alice","sub":"mallory"`, exp), authtest.HS256(e.secret))},
		{name: "sub twice, once escaped", token: authtest.RawToken(`{"alg":"HS256"}`, dupClaims(`"sub":"alice","s\u0075b":"mallory"`, exp), authtest.HS256(e.secret))},
		{name: "exp twice", token: authtest.RawToken(`{"alg":"HS256"}`, dupClaims(fmt.Sprintf(`"sub":"alice","exp":%d`, jwtNow.Add(-time.Minute).Unix()), exp), authtest.HS256(e.secret))},
		{name: "alg twice", token: authtest.RawToken(`{"alg":"none","alg":"HS256"}`, dupClaims(`"sub":"alice"`, exp), authtest.HS256(e.secret))},
		{name: "two segments", token: "a.b"},
		{name: "garbage", token: "not a token at all"},
		{name: "empty", token: ""},
	}
	for _, tt := range tests {
		v := tt.v
		if v == nil {
			v = e.jwks
		}
		id, err := v.Authenticate(tt.token)
		wantUnauthenticated(t, tt.name, id, err)
		if err == nil {
			continue
		}
		if expired := runstream.AsError(err).Details["reason"] == "expired"; expired != tt.expired {
			t.Errorf("%s: reason expired = %t, want %t", tt.name, expired, tt.expired)
		}
	}
}

func TestJWTKeysFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	short := filepath.Join(dir, "short.json")
	authtest.WriteJWKS(t, short, authtest.OctJWK("k", []byte("too short")))
	mismatch := filepath.Join(dir, "mismatch.json")
	jwk := authtest.OctJWK("k", []byte(strings.Repeat("s", 32)))
	jwk["alg"] = "RS256"
	authtest.WriteJWKS(t, mismatch, jwk)
	smallRSA, _ := rsa.GenerateKey(rand.Reader, 1024)
	small := filepath.Join(dir, "small.pem")
	authtest.WritePublicKeyPEM(t, small, &smallRSA.PublicKey)
	private := filepath.Join(dir, "private.pem")
	der, _ := x509.MarshalPKCS8PrivateKey(smallRSA)
	os.WriteFile(private, []byte("-----BEGIN PRIVATE KEY-----\n"+base64.StdEncoding.EncodeToString(der)+"\n-----END PRIVATE KEY-----\n"), 0o600)
	empty := filepath.Join(dir, "empty.json")
	authtest.WriteJWKS(t, empty)
	for _, path := range []string{short, mismatch, small, private, empty, filepath.Join(dir, "missing")} {
		if _, err := auth.NewJWT(auth.JWTConfig{KeysFile: path}); err == nil {
			t.Errorf("NewJWT accepted %s", filepath.Base(path))
		}
	}
}

// Reload picks up a new key and keeps the old set when the file breaks.
func TestJWTReload(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jwks.json")
	oldKey, newKey := []byte(strings.Repeat("o", 32)), []byte(strings.Repeat("n", 32))
	authtest.WriteJWKS(t, path, authtest.OctJWK("old", oldKey))
	v, err := auth.NewJWT(auth.JWTConfig{KeysFile: path})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Minute)
	oldToken := authtest.Token(map[string]any{"alg": "HS256"}, claims("alice", exp), authtest.HS256(oldKey))
	newToken := authtest.Token(map[string]any{"alg": "HS256"}, claims("alice", exp), authtest.HS256(newKey))
	if _, err := v.Authenticate(newToken); err == nil {
		t.Fatal("a token of the new key passed before the reload")
	}
	authtest.WriteJWKS(t, path, authtest.OctJWK("new", newKey))
	if err := v.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Authenticate(newToken); err != nil {
		t.Errorf("new key after reload: %v", err)
	}
	if _, err := v.Authenticate(oldToken); err == nil {
		t.Error("the removed key still verifies")
	}
	if err := os.WriteFile(path, []byte("{broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := v.Reload(); err == nil {
		t.Error("Reload accepted a broken file")
	}
	if _, err := v.Authenticate(newToken); err != nil {
		t.Errorf("after a failed reload: %v", err)
	}
}

func pemBlock(der []byte) []byte {
	return []byte("-----BEGIN PUBLIC KEY-----\n" + base64.StdEncoding.EncodeToString(der) + "\n-----END PUBLIC KEY-----\n")
}

// TestJWTRevokesRemovedKeys: a token's Identity names the key that
// verified it; the Reload that leaves that key out revokes it (Holds,
// AfterRevoke), and leaves the other keys' tokens held. The same key
// material under another JWKS name is the same key.
func TestJWTRevokesRemovedKeys(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "jwks.json")
	// Hex-looking secrets: a KeyID (hex) that held one would show it.
	gone, kept := []byte(strings.Repeat("0123456789abcdef", 2)), []byte(strings.Repeat("fedcba9876543210", 2))
	authtest.WriteJWKS(t, path, authtest.OctJWK("gone", gone), authtest.OctJWK("kept", kept))
	v, err := auth.NewJWT(auth.JWTConfig{KeysFile: path})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Minute)
	identity := func(secret []byte, kid string) auth.Identity {
		t.Helper()
		id, err := v.Authenticate(authtest.Token(map[string]any{"alg": "HS256", "kid": kid}, claims("alice", exp), authtest.HS256(secret)))
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	goneID, keptID := identity(gone, "gone"), identity(kept, "kept")
	if goneID.KeyID == "" || goneID.KeyID == keptID.KeyID || strings.Contains(goneID.KeyID, string(gone[:16])) || strings.Contains(keptID.KeyID, string(kept[:16])) {
		t.Fatalf("KeyIDs %q and %q: want two distinct fingerprints", goneID.KeyID, keptID.KeyID)
	}
	if !v.Holds(goneID) || !v.Holds(keptID) || v.Holds(auth.Identity{User: "alice"}) {
		t.Fatal("Holds before the reload: want both keys held, and no Identity without a KeyID")
	}
	var revoked []string
	stopGone := v.AfterRevoke(goneID, func() { revoked = append(revoked, "gone") })
	stopKept := v.AfterRevoke(keptID, func() { revoked = append(revoked, "kept") })
	defer stopKept()

	// A failed reload keeps every key and calls nothing.
	os.WriteFile(path, []byte("{broken"), 0o600)
	if err := v.Reload(); err == nil || len(revoked) != 0 || !v.Holds(goneID) {
		t.Fatalf("broken file: %v, revoked %v; want an error and nothing revoked", err, revoked)
	}
	authtest.WriteJWKS(t, path, authtest.OctJWK("renamed", kept))
	if err := v.Reload(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(revoked, ",") != "gone" || v.Holds(goneID) || !v.Holds(keptID) {
		t.Errorf("after removing one key: revoked %v, held %v/%v; want only gone revoked", revoked, v.Holds(goneID), v.Holds(keptID))
	}
	stopGone() // already called: a no-op
	if v.Watched() != 1 {
		t.Errorf("%d callbacks registered, want 1 (the kept key's)", v.Watched())
	}
	// Registered after the revocation: called at once.
	called := false
	v.AfterRevoke(goneID, func() { called = true })()
	if !called {
		t.Error("AfterRevoke of a removed key did not call f at once")
	}
}
