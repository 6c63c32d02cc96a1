package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// MinSessionKeyBytes is the shortest session key NewSessions accepts.
const MinSessionKeyBytes = 32

// DefaultSessionTTL is the default lifetime of a session.
const DefaultSessionTTL = time.Hour

// sessionContext separates session MACs from any other use of the key.
const sessionContext = "runstream-session-v1."

// Sessions issues and verifies stateless session values: the user id, the
// expiry and the KeyID of the key its credential was (an API key, or the
// key that verified a JWT),
// authenticated with HMAC-SHA256 under a server key. Every instance that
// holds the same key accepts the sessions of the others, so no session
// table is needed; the price is that a session itself cannot be revoked
// before it expires (logging out deletes the browser's cookie), which is
// why sessions are short-lived and never outlive the credential they were
// exchanged for. What can be revoked is the key a session names: the
// caller of Authenticate checks the KeyID it returns (Revocable).
// Sessions is safe for concurrent use.
//
// A value is base64url(JSON payload) "." base64url(HMAC), the MAC taken
// over sessionContext and the first part. The payload has "sub" and
// "exp" and, since sessions were bound to their key, "key" (the KeyID).
// A value issued before that has no "key": it verifies, with an empty
// KeyID, which a Revocable (Keys, JWT) does not hold, so the server
// refuses it and its user signs in again.
type Sessions struct {
	key []byte
	ttl time.Duration
	now func() time.Time
}

// NewSessions returns Sessions signed with key (at least
// MinSessionKeyBytes) lasting ttl (DefaultSessionTTL when not positive).
// now defaults to time.Now.
func NewSessions(key []byte, ttl time.Duration, now func() time.Time) (*Sessions, error) {
	if len(key) < MinSessionKeyBytes {
		return nil, fmt.Errorf("a session key needs at least %d bytes", MinSessionKeyBytes)
	}
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Sessions{key: bytes.Clone(key), ttl: ttl, now: now}, nil
}

// RandomSessionKey returns a new random session key, for a single
// instance whose sessions need not survive a restart.
func RandomSessionKey() []byte {
	key := make([]byte, MinSessionKeyBytes)
	rand.Read(key)
	return key
}

// ReadSessionKey reads a session key file: at least MinSessionKeyBytes
// after trimming white space (e.g. the output of "openssl rand -hex 32").
func ReadSessionKey(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the session key file: %w", err)
	}
	key := bytes.TrimSpace(data)
	if len(key) < MinSessionKeyBytes {
		return nil, fmt.Errorf("session key file %s: at least %d bytes are needed", path, MinSessionKeyBytes)
	}
	return key, nil
}

// sessionPayload is what a session value carries.
type sessionPayload struct {
	Sub string `json:"sub"`
	Exp int64  `json:"exp"` // Unix seconds
	// Key is the KeyID of the key the session's credential was, or was
	// verified by; absent in the values issued before it existed.
	Key string `json:"key,omitempty"`
}

// Issue returns a session value for id and when it expires: after the
// TTL, or when id's credential expires if that is sooner. The session
// carries id.KeyID, so that Authenticate returns it and a revoked key
// revokes its sessions.
func (s *Sessions) Issue(id Identity) (string, time.Time) {
	expires := s.now().Add(s.ttl).Truncate(time.Second)
	if !id.Expires.IsZero() && id.Expires.Before(expires) {
		expires = id.Expires.Truncate(time.Second)
	}
	payload, _ := json.Marshal(sessionPayload{Sub: id.User, Exp: expires.Unix(), Key: id.KeyID})
	body := base64.RawURLEncoding.EncodeToString(payload)
	return body + "." + base64.RawURLEncoding.EncodeToString(s.mac(body)), expires
}

func (s *Sessions) mac(body string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(sessionContext))
	m.Write([]byte(body))
	return m.Sum(nil)
}

// Authenticate implements Authenticator for session values: the
// Identity has the session's user, expiry and KeyID (empty for a session
// issued before sessions carried it). It does not
// check that the KeyID is still in use: see Revocable.
func (s *Sessions) Authenticate(value string) (Identity, error) {
	if len(value) > maxCredentialBytes {
		return Identity{}, errInvalid()
	}
	body, sig, ok := strings.Cut(value, ".")
	if !ok {
		return Identity{}, errInvalid()
	}
	mac, err := strictB64.DecodeString(sig)
	if err != nil || !hmac.Equal(mac, s.mac(body)) {
		return Identity{}, errInvalid()
	}
	var p sessionPayload
	raw, err := strictB64.DecodeString(body)
	if err != nil || json.Unmarshal(raw, &p) != nil || p.Sub == "" {
		return Identity{}, errInvalid()
	}
	expires := time.Unix(p.Exp, 0)
	if !s.now().Before(expires) {
		return Identity{}, errExpired()
	}
	return Identity{User: p.Sub, Expires: expires, KeyID: p.Key}, nil
}
