package httpapi

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/auth"
)

// authEnv is a thread server whose callers authenticate with API keys
// (alice and bob) and may open sessions.
type authEnv struct {
	*threadEnv
	aliceKey, bobKey string
	logs             *bytes.Buffer
	// keysPath is the keys file of keys, the server's credentials.
	keysPath string
	keys     *auth.Keys
}

func newAuthEnv(t *testing.T, mutate ...func(*envConfig)) *authEnv {
	t.Helper()
	e := &authEnv{aliceKey: auth.NewKey(), bobKey: auth.NewKey(), logs: &bytes.Buffer{}}
	ah, _ := auth.HashKey(e.aliceKey)
	bh, _ := auth.HashKey(e.bobKey)
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte("alice "+ah+"\nbob "+bh+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := auth.LoadKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	e.keysPath, e.keys = path, keys
	sessions, err := auth.NewSessions(auth.RandomSessionKey(), time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.threadEnv = newThreadEnv(t, append([]func(*envConfig){func(c *envConfig) {
		c.Authenticate = nil
		c.Auth = AuthConfig{Credentials: keys, Sessions: sessions}
		c.Logger = slog.New(slog.NewTextHandler(e.logs, nil))
	}}, mutate...)...)
	return e
}

const ingestBody = `{"events":[{"event_type":"llm.human.input","category":"message","content":{"type":"human","content":"hi","additional_kwargs":{},"id":"m1"},"metadata":{"caller":"lead_agent"}}]}`

func TestAuthBearer(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	if rec := e.do(t, "POST", "/api/threads/t1/runs/r1/events", ingestBody, "Authorization", "Bearer "+e.aliceKey); rec.Code != 201 {
		t.Fatalf("alice appends: %d %s", rec.Code, rec.Body)
	}
	if rec := e.do(t, "GET", "/api/threads/t1/messages", "", "Authorization", "bearer "+e.aliceKey); rec.Code != 200 {
		t.Errorf("alice reads (lower-case scheme): %d %s", rec.Code, rec.Body)
	}
	if rec := e.do(t, "GET", "/api/threads/t1/runs", "", "Authorization", "Bearer "+e.bobKey); rec.Code != 200 || rec.Body.String() != "[]\n" {
		t.Errorf("bob lists alice's runs: %d %s, want none", rec.Code, rec.Body)
	}
	// X-Api-Key (the LangGraph SDK's apiKey) carries a credential too; the
	// Authorization header wins over it.
	if rec := e.do(t, "GET", "/api/threads/t1/messages", "", "X-Api-Key", e.aliceKey); rec.Code != 200 || rec.Body.String() == "[]\n" {
		t.Errorf("alice reads with X-Api-Key: %d %s", rec.Code, rec.Body)
	}
	if rec := e.do(t, "GET", "/api/threads/t1/runs", "", "Authorization", "Bearer "+e.bobKey, "X-Api-Key", e.aliceKey); rec.Code != 200 || rec.Body.String() != "[]\n" {
		t.Errorf("bob's Authorization with alice's X-Api-Key: %d %s, want bob's (none)", rec.Code, rec.Body)
	}
	wantError(t, e.do(t, "GET", "/api/threads/t1/messages", "", "X-Api-Key", auth.NewKey()), 401, runstream.CodeUnauthenticated)
	wantError(t, e.do(t, "GET", "/api/threads/t1/messages", "", "X-Api-Key", e.bobKey, "X-Api-Key", e.aliceKey), 401, runstream.CodeUnauthenticated)
	wantError(t, e.do(t, "GET", "/api/threads/t1/messages", "", "X-Api-Key", " "), 401, runstream.CodeUnauthenticated) // none: missing

	tests := []struct {
		name, header, challenge string
	}{
		{"no credential", "", `Bearer realm="runstream"`},
		{"unknown key", "Bearer " + auth.NewKey(), `Bearer realm="runstream", error="invalid_token"`},
		{"basic scheme", "Basic YWxpY2U6eA==", `Bearer realm="runstream", error="invalid_token"`},
		{"empty bearer", "Bearer ", `Bearer realm="runstream", error="invalid_token"`},
	}
	for _, tt := range tests {
		var h []string
		if tt.header != "" {
			h = []string{"Authorization", tt.header}
		}
		rec := e.do(t, "GET", "/api/threads/t1/messages", "", h...)
		wantError(t, rec, 401, runstream.CodeUnauthenticated)
		if got := rec.Header().Get("WWW-Authenticate"); got != tt.challenge {
			t.Errorf("%s: WWW-Authenticate %q, want %q", tt.name, got, tt.challenge)
		}
	}
	// The test header of other tests means nothing here.
	wantError(t, e.do(t, "GET", "/api/threads/t1/messages", "", testUserHeader, "alice"), 401, runstream.CodeUnauthenticated)
	wantMetric(t, e.threadEnv, `runstream_auth_requests_total{outcome="missing"} 3`)
	wantMetric(t, e.threadEnv, `runstream_auth_requests_total{outcome="invalid"} 5`)
}

// A credential in the URL is refused on every route, and the access log
// does not record it.
func TestAuthRefusesURLCredentials(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	for _, target := range []string{
		"/api/threads/t1/stream?access_token=" + e.aliceKey,
		"/api/workflows?token=" + e.aliceKey,
		"/healthz?api_key=" + e.aliceKey,
		"/api/threads/t1/messages?API_KEY=" + e.aliceKey,
	} {
		rec := e.do(t, "GET", target, "", "Authorization", "Bearer "+e.aliceKey)
		wantError(t, rec, 400, runstream.CodeInvalidArgument)
		if strings.Contains(rec.Body.String(), e.aliceKey) {
			t.Errorf("%s: the answer repeats the key", target)
		}
	}
	if strings.Contains(e.logs.String(), e.aliceKey) || !strings.Contains(e.logs.String(), "/api/threads/t1/stream") {
		t.Errorf("the log holds the key, or no access line:\n%s", e.logs)
	}
}

func TestAuthSessionCookie(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	rec := e.do(t, "POST", "/api/auth/session", "", "Authorization", "Bearer "+e.aliceKey, "Origin", "http://example.com")
	if rec.Code != 200 {
		t.Fatalf("POST session: %d %s", rec.Code, rec.Body)
	}
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies %v", cookies)
	}
	ck := cookies[0]
	if ck.Name != sessionCookie || ck.Path != "/api/" || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure || ck.MaxAge < 3500 {
		t.Errorf("cookie %+v", ck)
	}
	got := decodeAs[sessionView](t, rec)
	if got.User != "alice" {
		t.Errorf("session %+v", got)
	}
	// The browser keeps the cookie until the session ends, not a fraction
	// of a second less (a stream reconnecting at the end of a session
	// would go out without it).
	if kept := time.Now().Add(time.Duration(ck.MaxAge) * time.Second); kept.Before(got.ExpiresAt) {
		t.Errorf("cookie Max-Age %d s ends before the session (%s)", ck.MaxAge, got.ExpiresAt)
	}
	cookie := "Cookie"
	value := sessionCookie + "=" + ck.Value
	if rec := e.do(t, "POST", "/api/threads/t1/runs/r1/events", ingestBody, cookie, value, "Origin", "http://example.com"); rec.Code != 201 {
		t.Fatalf("append by cookie with its Origin: %d %s", rec.Code, rec.Body)
	}
	if rec := e.do(t, "GET", "/api/threads/t1/messages", "", cookie, value); rec.Code != 200 {
		t.Errorf("read by cookie: %d %s", rec.Code, rec.Body)
	}
	// State-changing requests by cookie need an allowed Origin.
	wantError(t, e.do(t, "POST", "/api/threads/t1/runs/r1/events", ingestBody, cookie, value), 403, runstream.CodePermissionDenied)
	wantError(t, e.do(t, "DELETE", "/api/threads/t1/events", "", cookie, value, "Origin", "http://evil.example"), 403, runstream.CodePermissionDenied)
	wantError(t, e.do(t, "POST", "/api/threads/t1/runs/r1/events", ingestBody, cookie, value, "Origin", "https://example.com"), 403, runstream.CodePermissionDenied)
	// A bearer credential needs no Origin; it wins over the cookie.
	if rec := e.do(t, "POST", "/api/threads/t2/runs/r1/events", ingestBody, cookie, value, "Authorization", "Bearer "+e.bobKey); rec.Code != 201 {
		t.Errorf("bearer with a cookie: %d %s", rec.Code, rec.Body)
	}
	if rec := e.do(t, "GET", "/api/threads/t2/runs", "", cookie, value); rec.Code != 200 || rec.Body.String() != "[]\n" {
		t.Errorf("alice lists bob's runs: %d %s, want none", rec.Code, rec.Body)
	}

	// A session is not renewed with itself, nor from another site's page.
	wantError(t, e.do(t, "POST", "/api/auth/session", "", cookie, value), 401, runstream.CodeUnauthenticated)
	wantError(t, e.do(t, "POST", "/api/auth/session", "", "Authorization", "Bearer "+e.aliceKey, "Origin", "http://evil.example"), 403, runstream.CodePermissionDenied)
	// A forged or tampered cookie is refused.
	wantError(t, e.do(t, "GET", "/api/threads/t1/messages", "", cookie, sessionCookie+"=x"+ck.Value), 401, runstream.CodeUnauthenticated)

	// Logging out deletes the cookie.
	rec = e.do(t, "DELETE", "/api/auth/session", "", cookie, value, "Origin", "http://example.com")
	if rec.Code != 204 {
		t.Fatalf("DELETE session: %d %s", rec.Code, rec.Body)
	}
	if out := rec.Result().Cookies(); len(out) != 1 || out[0].MaxAge >= 0 || out[0].Value != "" || out[0].Path != "/api/" {
		t.Errorf("logout cookie %+v", out)
	}
}

func TestAuthSessionCookieSecure(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, func(c *envConfig) { c.Auth.CookieSecure = true })
	rec := e.do(t, "POST", "/api/auth/session", "", "Authorization", "Bearer "+e.aliceKey, "Origin", "https://example.com")
	if rec.Code != 200 || len(rec.Result().Cookies()) != 1 || !rec.Result().Cookies()[0].Secure {
		t.Fatalf("POST session behind TLS: %d %v", rec.Code, rec.Result().Cookies())
	}
	// Behind TLS the page's origin is https.
	wantError(t, e.do(t, "POST", "/api/auth/session", "", "Authorization", "Bearer "+e.aliceKey, "Origin", "http://example.com"), 403, runstream.CodePermissionDenied)
}

func TestAuthNoSessionsInModeNone(t *testing.T) {
	t.Parallel()
	env := newThreadEnv(t)
	wantError(t, env.do(t, "POST", "/api/auth/session", ""), 404, runstream.CodeNotFound)
}

func TestCORS(t *testing.T) {
	t.Parallel()
	const app = "https://app.example"
	e := newAuthEnv(t, func(c *envConfig) { c.Auth.CORSOrigins = []string{app} })
	preflight := func(origin string) *httptest.ResponseRecorder {
		return e.do(t, "OPTIONS", "/api/threads/t1/runs/r1/events", "", "Origin", origin,
			"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, content-type")
	}
	rec := preflight(app)
	h := rec.Header()
	if rec.Code != 204 || h.Get("Access-Control-Allow-Origin") != app || h.Get("Access-Control-Allow-Credentials") != "true" ||
		!strings.Contains(h.Get("Access-Control-Allow-Headers"), "Authorization") || !strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") {
		t.Errorf("preflight from %s: %d %v", app, rec.Code, h)
	}
	rec = preflight("https://evil.example")
	wantError(t, rec, 403, runstream.CodePermissionDenied)
	if rec.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("a refused origin got %v", rec.Header())
	}
	rec = e.do(t, "POST", "/api/threads/t1/runs/r1/events", ingestBody, "Origin", app, "Authorization", "Bearer "+e.aliceKey)
	if rec.Code != 201 || rec.Header().Get("Access-Control-Allow-Origin") != app || !strings.Contains(rec.Header().Get("Vary"), "Origin") {
		t.Errorf("cross-origin append: %d %v", rec.Code, rec.Header())
	}
	// The LangGraph SDK reconnects to a join stream's Location header.
	// A studio page reads the run's status as its stream opened.
	for _, name := range []string{"Location", "X-Workflow-Run-Status"} {
		if !strings.Contains(rec.Header().Get("Access-Control-Expose-Headers"), name) {
			t.Errorf("cross-origin answers do not expose %s: %v", name, rec.Header())
		}
	}
	// The allow-listed origin may use the cookie for state changes too.
	ck := e.do(t, "POST", "/api/auth/session", "", "Authorization", "Bearer "+e.aliceKey, "Origin", app).Result().Cookies()
	if len(ck) != 1 {
		t.Fatal("no session cookie for the allowed origin")
	}
	if rec := e.do(t, "POST", "/api/threads/t1/runs/r1/events", ingestBody, "Origin", app, "Cookie", sessionCookie+"="+ck[0].Value); rec.Code != 201 {
		t.Errorf("append by cookie from the allowed origin: %d %s", rec.Code, rec.Body)
	}

	// Without an allow-list, no response carries CORS headers.
	off := newAuthEnv(t)
	rec = off.do(t, "GET", "/api/threads/t1/messages", "", "Origin", app, "Authorization", "Bearer "+off.aliceKey)
	if rec.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS off answered %v", rec.Header())
	}
}

func TestParseCORSOrigins(t *testing.T) {
	t.Parallel()
	got, err := ParseCORSOrigins(" https://a.example, http://localhost:3000 ,")
	if err != nil || len(got) != 2 || got[0] != "https://a.example" || got[1] != "http://localhost:3000" {
		t.Errorf("ParseCORSOrigins = %v, %v", got, err)
	}
	for _, bad := range []string{"*", "null", "a.example", "https://a.example/", "ftp://a.example", "https://u@a.example"} {
		if _, err := ParseCORSOrigins(bad); err == nil {
			t.Errorf("ParseCORSOrigins(%q) accepted", bad)
		}
	}
}

func TestAppendRateLimit(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, func(c *envConfig) { c.AppendRate = AppendRate{PerSecond: 0.01, Burst: 2} })
	for i := range 2 {
		if rec := e.do(t, "POST", "/api/threads/t1/runs/r1/events", ingestBody, "Authorization", "Bearer "+e.aliceKey); rec.Code != 201 {
			t.Fatalf("append %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	rec := e.do(t, "POST", "/api/threads/t1/runs/r1/events", ingestBody, "Authorization", "Bearer "+e.aliceKey)
	wantError(t, rec, 429, runstream.CodeRateLimited)
	if ra := rec.Header().Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("Retry-After %q", ra)
	}
	// Bob has a bucket of his own; reads are not limited.
	if rec := e.do(t, "POST", "/api/threads/t2/runs/r1/events", ingestBody, "Authorization", "Bearer "+e.bobKey); rec.Code != 201 {
		t.Errorf("bob's append: %d %s", rec.Code, rec.Body)
	}
	if rec := e.do(t, "GET", "/api/threads/t1/messages", "", "Authorization", "Bearer "+e.aliceKey); rec.Code != 200 {
		t.Errorf("alice reads: %d", rec.Code)
	}
	wantMetric(t, e.threadEnv, `runstream_user_limit_total{limit="appends",outcome="allowed"} 3`)
	wantMetric(t, e.threadEnv, `runstream_user_limit_total{limit="appends",outcome="limited"} 1`)
}

func TestUserBuckets(t *testing.T) {
	t.Parallel()
	b := newUserBuckets(AppendRate{PerSecond: 2, Burst: 2})
	now := time.Unix(1000, 0)
	if b.take("a", now) != 0 || b.take("a", now) != 0 {
		t.Fatal("the burst was not granted")
	}
	if wait := b.take("a", now); wait != 500*time.Millisecond {
		t.Errorf("empty bucket: wait %v, want 500ms", wait)
	}
	if b.take("a", now.Add(500*time.Millisecond)) != 0 {
		t.Error("a token did not come back after 1/rate")
	}
	// Idle users' full buckets are dropped.
	b.take("b", now)
	b.take("c", now.Add(2*time.Minute))
	if _, ok := b.buckets["a"]; ok || len(b.buckets) != 1 {
		t.Errorf("buckets after the sweep: %v", b.buckets)
	}
	if newUserBuckets(AppendRate{}).take("a", now) != 0 {
		t.Error("a zero rate limits")
	}
}

// A stream opened with a session ends when the session expires.
func TestStreamEndsWithSession(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	sessions, err := auth.NewSessions(auth.RandomSessionKey(), time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.api.cfg.Auth.Sessions = sessions
	if rec := e.do(t, "POST", "/api/threads/t1/runs/r1/events", ingestBody, "Authorization", "Bearer "+e.aliceKey); rec.Code != 201 {
		t.Fatal(rec.Body)
	}
	ck := e.do(t, "POST", "/api/auth/session", "", "Authorization", "Bearer "+e.aliceKey).Result().Cookies()
	start := time.Now()
	rec := e.do(t, "GET", "/api/threads/t1/stream", "", "Cookie", sessionCookie+"="+ck[0].Value)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "id: 1\n") {
		t.Fatalf("stream: %d %s", rec.Code, rec.Body)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the stream lasted %v, past its one-second session", d)
	}
	// Its session expired, the cookie no longer opens one.
	time.Sleep(time.Until(start.Add(1100 * time.Millisecond)))
	wantError(t, e.do(t, "GET", "/api/threads/t1/stream", "", "Cookie", sessionCookie+"="+ck[0].Value), 401, runstream.CodeUnauthenticated)
}

// wantMetric fails unless /metrics has the line sample.
func wantMetric(t *testing.T, env *threadEnv, sample string) {
	t.Helper()
	body := env.do(t, "GET", "/metrics", "").Body.String()
	if !strings.Contains(body, "\n"+sample+"\n") {
		t.Errorf("/metrics lacks %s:\n%s", sample, grepLines(body, "runstream_auth_requests_total", "runstream_user_limit_total"))
	}
}

func grepLines(text string, prefixes ...string) string {
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) {
				out = append(out, line)
			}
		}
	}
	return strings.Join(out, "\n")
}

// A refused Origin is named by a short redacted excerpt, never echoed
// whole: a header is the caller's value like any other.
func TestRefusedOriginIsNotEchoed(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, func(c *envConfig) { c.Auth.CORSOrigins = []string{"https://app.example"} })
	origin := "https://evil.example/?password=hunter2-origin-secret&" + strings.Repeat("x", 100)
	rec := e.do(t, "OPTIONS", "/api/threads/t1/runs/r1/events", "", "Origin", origin, "Access-Control-Request-Method", "POST")
	wantError(t, rec, 403, runstream.CodePermissionDenied)
	rec2 := e.do(t, "POST", "/api/auth/session", "", "Authorization", "Bearer "+e.aliceKey, "Origin", origin)
	for _, body := range []string{rec.Body.String(), rec2.Body.String()} {
		if strings.Contains(body, "hunter2-origin-secret") || strings.Contains(body, strings.Repeat("x", 40)) {
			t.Errorf("the refused origin is echoed: %s", body)
		}
	}
}

// Without authentication on loopback (LocalOnly), what another site's
// page can make a browser send is refused: a request addressed to the
// page's own name (DNS rebinding) and a state-changing request from its
// origin. Requests addressed to a loopback host, from this server's
// pages or without an Origin (curl, SDKs), pass.
func TestLocalOnly(t *testing.T) {
	t.Parallel()
	e := newThreadEnv(t, func(c *envConfig) { c.Auth = AuthConfig{LocalOnly: true} })
	send := func(method, url, origin string) int {
		var body io.Reader
		if method == "POST" {
			body = strings.NewReader(ingestBody)
		}
		req := httptest.NewRequestWithContext(t.Context(), method, url, body)
		req.Header.Set("Content-Type", "application/json")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		rec := httptest.NewRecorder()
		e.api.ServeHTTP(rec, req)
		return rec.Code
	}
	for _, c := range []struct {
		method, url, origin string
		want                int
	}{
		{"GET", "http://rebind.attacker.example:8780/api/threads/t1/messages", "", 403},
		{"GET", "http://localhost:8780/api/threads/t1/messages", "", 200},
		{"GET", "http://127.0.0.1:8780/api/threads/t1/messages", "", 200},
		{"GET", "http://[::1]:8780/api/threads/t1/messages", "", 200},
		{"POST", "http://127.0.0.1:8780/api/threads/t1/runs/r1/events", "https://evil.example", 403},
		{"POST", "http://127.0.0.1:8780/api/threads/t1/runs/r1/events", "http://127.0.0.1:8780", 201},
		{"POST", "http://127.0.0.1:8780/api/threads/t1/runs/r1/events", "", 201},
	} {
		if got := send(c.method, c.url, c.origin); got != c.want {
			t.Errorf("%s %s (Origin %q): %d, want %d", c.method, c.url, c.origin, got, c.want)
		}
	}
}

// Two session cookies: neither is taken (the first could be a sibling
// host's, set ahead of the user's).
func TestTwoSessionCookiesAreRefused(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	alice := e.do(t, "POST", "/api/auth/session", "", "Authorization", "Bearer "+e.aliceKey).Result().Cookies()
	bob := e.do(t, "POST", "/api/auth/session", "", "Authorization", "Bearer "+e.bobKey).Result().Cookies()
	if len(alice) != 1 || len(bob) != 1 {
		t.Fatalf("session cookies %v %v", alice, bob)
	}
	if rec := e.do(t, "GET", "/api/threads/t1/messages", "", "Cookie", sessionCookie+"="+alice[0].Value); rec.Code != 200 {
		t.Fatalf("one cookie: %d %s", rec.Code, rec.Body)
	}
	both := sessionCookie + "=" + bob[0].Value + "; " + sessionCookie + "=" + alice[0].Value
	wantError(t, e.do(t, "GET", "/api/threads/t1/messages", "", "Cookie", both), 401, runstream.CodeUnauthenticated)
}

// Revoking every key of a user (removing them from the keys file and
// reloading it) refuses the sessions issued to them too.
func TestRevokedUsersSessionIsRefused(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t)
	cookie := func(key string) string {
		ck := e.do(t, "POST", "/api/auth/session", "", "Authorization", "Bearer "+key).Result().Cookies()
		if len(ck) != 1 {
			t.Fatalf("no session cookie")
		}
		return sessionCookie + "=" + ck[0].Value
	}
	alice, bob := cookie(e.aliceKey), cookie(e.bobKey)
	ah, _ := auth.HashKey(e.aliceKey)
	if err := os.WriteFile(e.keysPath, []byte("alice "+ah+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.keys.Reload(); err != nil {
		t.Fatal(err)
	}
	wantError(t, e.do(t, "GET", "/api/threads/t1/messages", "", "Cookie", bob), 401, runstream.CodeUnauthenticated)
	if rec := e.do(t, "GET", "/api/threads/t1/messages", "", "Cookie", alice); rec.Code != 200 {
		t.Errorf("alice's session after bob's revocation: %d %s", rec.Code, rec.Body)
	}
}

func TestLoopbackHost(t *testing.T) {
	t.Parallel()
	for host, want := range map[string]bool{
		"localhost:8780": true, "LOCALHOST": true, "app.localhost:1": true, "127.0.0.1:8780": true, "127.0.0.2": true, "[::1]:8780": true,
		":8780": false, "0.0.0.0:8780": false, "[::]:8780": false, "example.com:8780": false, "localhost.example.com": false, "": false,
	} {
		if got := LoopbackHost(host); got != want {
			t.Errorf("LoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}
