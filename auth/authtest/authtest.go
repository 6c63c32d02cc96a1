// Package authtest makes signed JSON Web Tokens and key files for tests
// of code that verifies them (auth.JWT and the servers that use it).
package authtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"testing"
)

// Token returns the compact JWS of header and claims, signed by sign (nil:
// an empty signature, as "alg: none" tokens have).
func Token(header, claims map[string]any, sign func(signed []byte) []byte) string {
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(claims)
	return RawToken(string(h), string(c), sign)
}

// RawToken is Token with the header and claims given as JSON text, for
// tokens encoding/json would not write (a claim named twice, say).
func RawToken(header, claims string, sign func(signed []byte) []byte) string {
	signed := base64.RawURLEncoding.EncodeToString([]byte(header)) + "." + base64.RawURLEncoding.EncodeToString([]byte(claims))
	var sig []byte
	if sign != nil {
		sig = sign([]byte(signed))
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// HS256 signs with secret.
func HS256(secret []byte) func([]byte) []byte {
	return func(signed []byte) []byte {
		m := hmac.New(sha256.New, secret)
		m.Write(signed)
		return m.Sum(nil)
	}
}

// RS256 signs with key.
func RS256(key *rsa.PrivateKey) func([]byte) []byte {
	return func(signed []byte) []byte {
		sum := sha256.Sum256(signed)
		sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
		if err != nil {
			panic(err)
		}
		return sig
	}
}

// ES256 signs with key (P-256), as R || S.
func ES256(key *ecdsa.PrivateKey) func([]byte) []byte {
	return func(signed []byte) []byte {
		sum := sha256.Sum256(signed)
		r, s, err := ecdsa.Sign(rand.Reader, key, sum[:])
		if err != nil {
			panic(err)
		}
		sig := make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
		return sig
	}
}

// NewECKey returns a new P-256 key.
func NewECKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// WritePublicKeyPEM writes pub as a PEM "PUBLIC KEY" file at path.
func WritePublicKeyPEM(t testing.TB, path string, pub any) {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// WriteJWKS writes a JWKS document of keys (JWK objects) at path.
func WriteJWKS(t testing.TB, path string, keys ...map[string]any) {
	t.Helper()
	data, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// OctJWK is the JWK of an HS256 secret.
func OctJWK(kid string, secret []byte) map[string]any {
	return map[string]any{"kty": "oct", "kid": kid, "k": base64.RawURLEncoding.EncodeToString(secret)}
}
