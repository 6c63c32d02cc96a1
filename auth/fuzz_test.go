package auth_test

import (
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream/auth"
	"github.com/runstream/runstream/auth/authtest"
)

// FuzzJWT: no input panics, and the only tokens accepted are the valid
// ones the corpus starts from (a change to any part breaks the
// signature; the base64url decoding is canonical).
func FuzzJWT(f *testing.F) {
	e := newJWTEnv(f)
	exp := jwtNow.Add(time.Minute)
	valid := map[string]bool{
		authtest.Token(map[string]any{"alg": "HS256", "kid": "hs"}, claims("alice", exp), authtest.HS256(e.secret)): true,
		authtest.Token(map[string]any{"alg": "ES256"}, claims("alice", exp), authtest.ES256(e.ecKey)):               true,
		authtest.Token(map[string]any{"alg": "RS256"}, claims("alice", exp), authtest.RS256(e.rsaKey)):              true,
	}
	for tok := range valid {
		f.Add(tok)
	}
	f.Add(authtest.Token(map[string]any{"alg": "none"}, claims("alice", exp), nil))
	f.Add("..")
	f.Fuzz(func(t *testing.T, token string) {
		id, err := e.jwks.Authenticate(token)
		if err == nil && (!valid[token] || id.User != "alice") {
			t.Errorf("accepted %q as %+v", token, id)
		}
	})
}

// FuzzSessions: no input panics, and no value but one Issue made is
// accepted.
func FuzzSessions(f *testing.F) {
	s, err := auth.NewSessions([]byte(strings.Repeat("k", 32)), time.Hour, nil)
	if err != nil {
		f.Fatal(err)
	}
	value, _ := s.Issue(auth.Identity{User: "alice"})
	f.Add(value)
	f.Add(".")
	f.Fuzz(func(t *testing.T, v string) {
		id, err := s.Authenticate(v)
		if err == nil && (v != value || id.User != "alice") {
			t.Errorf("accepted %q as %+v", v, id)
		}
	})
}
