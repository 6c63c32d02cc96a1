package auth_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream/auth"
)

func TestSessions(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	key := []byte(strings.Repeat("k", 32))
	s, err := auth.NewSessions(key, time.Hour, clock)
	if err != nil {
		t.Fatal(err)
	}
	value, expires := s.Issue(auth.Identity{User: "alice"})
	if !expires.Equal(now.Add(time.Hour)) {
		t.Errorf("expires %v, want the TTL", expires)
	}
	id, err := s.Authenticate(value)
	if err != nil || id.User != "alice" || !id.Expires.Equal(expires) {
		t.Fatalf("Authenticate = %+v, %v", id, err)
	}
	// Another instance with the same key accepts it; another key does not.
	same, _ := auth.NewSessions(key, time.Minute, clock)
	if id, err := same.Authenticate(value); err != nil || id.User != "alice" {
		t.Errorf("same key: %+v, %v", id, err)
	}
	other, _ := auth.NewSessions([]byte(strings.Repeat("o", 32)), time.Hour, clock)
	id, err = other.Authenticate(value)
	wantUnauthenticated(t, "other key", id, err)

	// A session never outlives its credential.
	short, exp := s.Issue(auth.Identity{User: "bob", Expires: now.Add(time.Minute)})
	if !exp.Equal(now.Add(time.Minute)) {
		t.Errorf("expires %v, want the credential's", exp)
	}
	now = now.Add(2 * time.Minute)
	id, err = s.Authenticate(short)
	wantUnauthenticated(t, "expired", id, err)

	// A session made from an API key names it; one made from a JWT, like
	// those issued before sessions were bound to their key, does not.
	bound, _ := s.Issue(auth.Identity{User: "alice", KeyID: "0123456789abcdef0123456789abcdef"})
	if id, err := s.Authenticate(bound); err != nil || id.User != "alice" || id.KeyID != "0123456789abcdef0123456789abcdef" {
		t.Errorf("a session of an API key: %+v, %v", id, err)
	}
	if id, err := s.Authenticate(value); err != nil || id.KeyID != "" {
		t.Errorf("a session without a key: %+v, %v", id, err)
	}
	if raw, _ := base64.RawURLEncoding.DecodeString(strings.Split(value, ".")[0]); strings.Contains(string(raw), "key") {
		t.Errorf("a session without a key has the payload %s, not the format of before the binding", raw)
	}

	body, sig, _ := strings.Cut(value, ".")
	for name, bad := range map[string]string{
		"empty":          "",
		"no signature":   body,
		"bad signature":  body + "." + sig[:len(sig)-2] + "AA",
		"swapped parts":  sig + "." + body,
		"payload edited": base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"mallory","exp":4102444800}`)) + "." + sig,
	} {
		id, err := s.Authenticate(bad)
		wantUnauthenticated(t, name, id, err)
	}
	if _, err := auth.NewSessions([]byte("short"), 0, nil); err == nil {
		t.Error("NewSessions accepted a short key")
	}
}
