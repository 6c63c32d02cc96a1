package auth

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
)

// Key sizes below which a verification key is refused.
const (
	minHMACKeyBytes = 32
	minRSABits      = 2048
)

// readVerifyKeys reads a JWKS document or PEM public keys from path.
func readVerifyKeys(path string) ([]verifyKey, error) {
	if path == "" {
		return nil, errors.New("a JWT keys file is required")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the JWT keys file: %w", err)
	}
	var keys []verifyKey
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		keys, err = parseJWKS(trimmed)
	} else {
		keys, err = parsePEMKeys(data)
	}
	if err != nil {
		return nil, fmt.Errorf("JWT keys file %s: %w", path, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("JWT keys file %s: no keys", path)
	}
	for i := range keys {
		if keys[i].id, err = verifyKeyID(keys[i]); err != nil {
			return nil, fmt.Errorf("JWT keys file %s: key %d: %w", path, i+1, err)
		}
	}
	return keys, nil
}

// jwtKeyIDContext separates a JWT key's fingerprint (KeyID) from any
// other hash of its material.
const jwtKeyIDContext = "runstream-jwt-key-id-v1."

// verifyKeyID returns the fingerprint of k, the KeyID of the tokens it
// verifies: the first 16 bytes, in hex, of the SHA-256 of
// jwtKeyIDContext, the algorithm and the key's material (the HMAC secret,
// or the public key in PKIX DER). Every instance with the same keys file
// computes the same one; a session value that carries it reveals nothing
// usable of an HMAC secret, which has at least 32 bytes.
func verifyKeyID(k verifyKey) (string, error) {
	material := k.hmac
	if k.rsa != nil || k.ec != nil {
		var pub any = k.rsa
		if k.ec != nil {
			pub = k.ec
		}
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			return "", fmt.Errorf("fingerprint the key: %w", err)
		}
		material = der
	}
	return fingerprint(jwtKeyIDContext+k.alg+".", material), nil
}

// jwk is the part of a JSON Web Key (RFC 7517) that is read.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
	K   string `json:"k"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

func parseJWKS(data []byte) ([]verifyKey, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("not a JWKS document: %w", err)
	}
	var keys []verifyKey
	for i, j := range set.Keys {
		if j.Use != "" && j.Use != "sig" {
			continue // an encryption key verifies nothing
		}
		k, err := j.verifyKey()
		if err != nil {
			return nil, fmt.Errorf("key %d (kid %q): %w", i, j.Kid, err)
		}
		if j.Alg != "" && j.Alg != k.alg {
			return nil, fmt.Errorf("key %d (kid %q): alg %q does not fit a %s key (%s)", i, j.Kid, j.Alg, j.Kty, k.alg)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

func (j jwk) verifyKey() (verifyKey, error) {
	b64 := base64.RawURLEncoding
	switch j.Kty {
	case "oct":
		secret, err := b64.DecodeString(j.K)
		if err != nil || len(secret) < minHMACKeyBytes {
			return verifyKey{}, fmt.Errorf("an oct key needs k of at least %d bytes, base64url", minHMACKeyBytes)
		}
		return verifyKey{kid: j.Kid, alg: "HS256", hmac: secret}, nil
	case "RSA":
		n, errN := b64.DecodeString(j.N)
		e, errE := b64.DecodeString(j.E)
		if errN != nil || errE != nil || len(e) == 0 || len(e) > 4 {
			return verifyKey{}, errors.New("an RSA key needs n and e, base64url")
		}
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		return rsaKey(j.Kid, pub)
	case "EC":
		if j.Crv != "P-256" {
			return verifyKey{}, fmt.Errorf("EC curve %q: only P-256 (ES256)", j.Crv)
		}
		x, errX := b64.DecodeString(j.X)
		y, errY := b64.DecodeString(j.Y)
		if errX != nil || errY != nil || len(x) != 32 || len(y) != 32 {
			return verifyKey{}, errors.New("a P-256 key needs x and y of 32 bytes, base64url")
		}
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		if err != nil {
			return verifyKey{}, errors.New("the EC point is not on P-256")
		}
		return verifyKey{kid: j.Kid, alg: "ES256", ec: pub}, nil
	}
	return verifyKey{}, fmt.Errorf("key type %q: want oct, RSA or EC", j.Kty)
}

func rsaKey(kid string, pub *rsa.PublicKey) (verifyKey, error) {
	if pub.N.BitLen() < minRSABits || pub.E < 3 || pub.E%2 == 0 {
		return verifyKey{}, fmt.Errorf("an RSA key needs at least %d bits and an odd exponent", minRSABits)
	}
	return verifyKey{kid: kid, alg: "RS256", rsa: pub}, nil
}

// parsePEMKeys reads "PUBLIC KEY" blocks (RSA or EC P-256). A private key
// is refused: the server needs, and should hold, the public half only.
func parsePEMKeys(data []byte) ([]verifyKey, error) {
	var keys []verifyKey
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("PEM block %q: want PUBLIC KEY (an HS256 secret goes in a JWKS oct key)", block.Type)
		}
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, err
		}
		switch pub := pub.(type) {
		case *rsa.PublicKey:
			k, err := rsaKey("", pub)
			if err != nil {
				return nil, err
			}
			keys = append(keys, k)
		case *ecdsa.PublicKey:
			if pub.Curve != elliptic.P256() {
				return nil, errors.New("EC keys must be P-256 (ES256)")
			}
			keys = append(keys, verifyKey{alg: "ES256", ec: pub})
		default:
			return nil, fmt.Errorf("public key type %T: want RSA or EC P-256", pub)
		}
	}
	if len(bytes.TrimSpace(data)) > 0 && len(keys) == 0 {
		return nil, errors.New("neither a JWKS document nor PEM public keys")
	}
	return keys, nil
}
