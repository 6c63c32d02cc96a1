package httpapi

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/auth"
	"github.com/runstream/runstream/internal/apitest"
)

// revocationEnv is an authEnv where alice holds two keys: old, which the
// tests remove, and kept.
type revocationEnv struct {
	*authEnv
	old, kept string
}

func newRevocationEnv(t *testing.T) *revocationEnv {
	t.Helper()
	e := &revocationEnv{authEnv: newAuthEnv(t), old: auth.NewKey(), kept: auth.NewKey()}
	e.writeKeys(t, e.old, e.kept)
	return e
}

// writeKeys makes aliceKeys alice's keys (bob keeps his) and reloads the
// keys file.
func (e *revocationEnv) writeKeys(t *testing.T, aliceKeys ...string) {
	t.Helper()
	var file strings.Builder
	for _, key := range aliceKeys {
		hash, err := auth.HashKey(key)
		if err != nil {
			t.Fatal(err)
		}
		file.WriteString("alice " + hash + "\n")
	}
	bobHash, _ := auth.HashKey(e.bobKey)
	file.WriteString("bob " + bobHash + "\n")
	if err := os.WriteFile(e.keysPath, []byte(file.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.keys.Reload(); err != nil {
		t.Fatal(err)
	}
}

// session returns the Cookie header of a session made from key.
func (e *revocationEnv) session(t *testing.T, key string) string {
	t.Helper()
	ck := e.do(t, "POST", "/api/auth/session", "", "Authorization", "Bearer "+key).Result().Cookies()
	if len(ck) != 1 {
		t.Fatalf("no session cookie for the key")
	}
	return sessionCookie + "=" + ck[0].Value
}

// Removing one of a user's keys (key rotation) refuses the sessions made
// from it with 401 and the unified error body, while the sessions made
// from the user's other key go on working. A session that names no key
// (issued before sessions were bound to their key) is refused too.
func TestSessionOfARemovedKeyIsRefused(t *testing.T) {
	t.Parallel()
	e := newRevocationEnv(t)
	oldSession, keptSession := e.session(t, e.old), e.session(t, e.kept)
	for name, cookie := range map[string]string{"old": oldSession, "kept": keptSession} {
		if rec := e.do(t, "GET", "/api/threads/t1/messages", "", "Cookie", cookie); rec.Code != 200 {
			t.Fatalf("the %s key's session before the rotation: %d %s", name, rec.Code, rec.Body)
		}
	}
	e.writeKeys(t, e.kept)

	rec := e.do(t, "GET", "/api/threads/t1/messages", "", "Cookie", oldSession)
	body := wantError(t, rec, 401, runstream.CodeUnauthenticated)
	if body.Message != "the credential is not valid" { // as for a forged cookie: no hint of which check failed
		t.Errorf("the refusal of a revoked session says more than any invalid credential's: %+v", body)
	}
	if got := rec.Header().Get("WWW-Authenticate"); !strings.HasPrefix(got, `Bearer realm="runstream"`) {
		t.Errorf("WWW-Authenticate %q", got)
	}
	wantError(t, e.do(t, "POST", "/api/threads/t1/runs/r1/events", ingestBody, "Cookie", oldSession, "Origin", "http://example.com"), 401, runstream.CodeUnauthenticated)
	if rec := e.do(t, "GET", "/api/threads/t1/messages", "", "Cookie", keptSession); rec.Code != 200 {
		t.Errorf("the kept key's session after the rotation: %d %s", rec.Code, rec.Body)
	}
	if rec := e.do(t, "POST", "/api/threads/t1/runs/r1/events", ingestBody, "Cookie", keptSession, "Origin", "http://example.com"); rec.Code != 201 {
		t.Errorf("append with the kept key's session: %d %s", rec.Code, rec.Body)
	}
	// A new session from the kept key works; the removed key makes none.
	if rec := e.do(t, "GET", "/api/threads/t1/messages", "", "Cookie", e.session(t, e.kept)); rec.Code != 200 {
		t.Errorf("a new session of the kept key: %d %s", rec.Code, rec.Body)
	}
	wantError(t, e.do(t, "POST", "/api/auth/session", "", "Authorization", "Bearer "+e.old), 401, runstream.CodeUnauthenticated)

	unbound, _ := e.api.cfg.Auth.Sessions.Issue(auth.Identity{User: "alice"})
	wantError(t, e.do(t, "GET", "/api/threads/t1/messages", "", "Cookie", sessionCookie+"="+unbound), 401, runstream.CodeUnauthenticated)
}

// A thread stream opened with a key, or with a session made from it, ends
// once the key is removed from the keys file and the file reloaded, as
// when its credential expires: cleanly, and the reconnection is refused.
// The stream of the user's other key goes on.
func TestStreamOfARemovedKeyEnds(t *testing.T) {
	t.Parallel()
	e := newRevocationEnv(t)
	srv := apitest.Serve(t, e.api, e.api)
	e.appendAs(t, "alice", validStart("r1"))
	oldSession := e.session(t, e.old)
	open := func(header ...string) *threadStreamConn {
		c := e.openStream(t, srv, "", header...)
		if seq := c.next(t).Seq; seq != 1 {
			t.Fatalf("first record seq %d", seq)
		}
		return c
	}
	byKey := open("Authorization", "Bearer "+e.old)
	bySession := open("Cookie", oldSession)
	kept := open("Authorization", "Bearer "+e.kept)
	bob := e.openStream(t, srv, "", "Authorization", "Bearer "+e.bobKey) // t1 shows him nothing of alice's
	if n := e.keys.Watched(); n != 4 {
		t.Errorf("keys watched for 4 open streams: %d", n)
	}

	e.writeKeys(t, e.kept)
	for name, c := range map[string]*threadStreamConn{"key": byKey, "session": bySession} {
		if err := apitest.ReadToEnd(t, c.reader, 30*time.Second); !errors.Is(err, io.EOF) {
			t.Errorf("the stream opened with the removed key's %s ended with %v, want a clean end (io.EOF)", name, err)
		}
	}
	e.appendAs(t, "alice", validStart("r2"))
	if seq := kept.next(t).Seq; seq != 2 {
		t.Errorf("the kept key's stream after the rotation: seq %d, want 2", seq)
	}

	for name, h := range map[string][]string{"key": {"Authorization", "Bearer " + e.old}, "session": {"Cookie", oldSession}} {
		req, err := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/api/threads/t1/stream", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(h[0], h[1])
		req.Header.Set("Last-Event-ID", "1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 || !strings.Contains(string(raw), `"code":"UNAUTHENTICATED"`) {
			t.Errorf("reconnection with the removed key's %s: %d %s, want 401 UNAUTHENTICATED", name, resp.StatusCode, raw)
		}
	}

	// The ended streams let go of their callbacks; so do those that end
	// otherwise (the client leaves).
	kept.resp.Body.Close()
	bob.resp.Body.Close()
	for deadline := time.Now().Add(30 * time.Second); e.keys.Watched() != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d revocation callbacks still registered after every stream ended", e.keys.Watched())
		}
	}
}
