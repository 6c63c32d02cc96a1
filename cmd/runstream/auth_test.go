package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/runstream/runstream/auth"
	"github.com/runstream/runstream/auth/authtest"
	"github.com/runstream/runstream/internal/apitest"
	"github.com/runstream/runstream/sse"
)

// call sends a request with a bearer token ("": none) and returns the
// status, the body and the headers.
func call(t *testing.T, method, url, token, body string, header ...string) (int, []byte, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out, resp.Header
}

// writeAPIKeys writes an --api-keys-file that gives each key to alice.
func writeAPIKeys(t *testing.T, file string, keys ...string) {
	t.Helper()
	var lines strings.Builder
	for _, key := range keys {
		hash, err := auth.HashKey(key)
		if err != nil {
			t.Fatal(err)
		}
		lines.WriteString("alice " + hash + "\n")
	}
	if err := os.WriteFile(file, []byte(lines.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// dialStream opens the SSE stream at url with header's fields (name,
// value, …) and returns its status and a reader of its body, which is
// closed when the test ends.
func dialStream(t *testing.T, url string, header ...string) (int, *sse.Reader) {
	t.Helper()
	resp := apitest.Get(t, url, header...)
	return resp.StatusCode, sse.NewReader(resp.Body)
}

// jwtKeys is an HS256 secret in a JWKS file, for serve --auth jwt.
type jwtKeys struct {
	file   string
	secret []byte
}

func newJWTKeys(t *testing.T) jwtKeys {
	t.Helper()
	k := jwtKeys{file: filepath.Join(t.TempDir(), "jwks.json"), secret: []byte(auth.NewKey())}
	authtest.WriteJWKS(t, k.file, authtest.OctJWK("k1", k.secret))
	return k
}

// token returns a token for user that expires after ttl (negative: in the
// past).
func (k jwtKeys) token(user string, ttl time.Duration) string {
	return authtest.Token(map[string]any{"alg": "HS256", "kid": "k1"},
		map[string]any{"sub": user, "exp": time.Now().Add(ttl).Unix()}, authtest.HS256(k.secret))
}

// twiceNamed returns a token, signed with the key, whose claims name sub
// twice: first, then second (encoding/json alone would take second).
func (k jwtKeys) twiceNamed(first, second string) string {
	claims := fmt.Sprintf(`{"sub":%q,"sub":%q,"exp":%d}`, first, second, time.Now().Add(time.Hour).Unix())
	return authtest.RawToken(`{"alg":"HS256","kid":"k1"}`, claims, authtest.HS256(k.secret))
}

// TestServeRefusesPublicAddrWithoutAuth: with the default --auth none,
// serve does not listen on a non-loopback address; the message names the
// flags that change that.
func TestServeRefusesPublicAddrWithoutAuth(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:8780", ":8780", "[::]:8780", "192.0.2.1:8780", "example.com:8780"} {
		var stdout, stderr bytes.Buffer
		m := &Main{Getenv: func(string) string { return "" }}
		err := m.Run(context.Background(), []string{"serve", "--addr", addr, "--store", "memory:"}, &stdout, &stderr)
		if err == nil || exitCode(err) == 0 || !strings.Contains(err.Error(), "--auth") || !strings.Contains(err.Error(), "--insecure-no-auth") {
			t.Errorf("serve --addr %s: %v (exit %d), want a refusal naming --auth and --insecure-no-auth", addr, err, exitCode(err))
		}
		if strings.Contains(stdout.String(), "listening") {
			t.Errorf("serve --addr %s listened:\n%s", addr, stdout.String())
		}
	}
	// RUNSTREAM_AUTH=none from the environment is the same.
	m := &Main{Getenv: func(k string) string { return map[string]string{"RUNSTREAM_AUTH": "none"}[k] }}
	if err := m.Run(context.Background(), []string{"serve", "--addr", "0.0.0.0:8780", "--store", "memory:"}, io.Discard, io.Discard); err == nil {
		t.Error("RUNSTREAM_AUTH=none on 0.0.0.0 started")
	}
}

// A loopback-looking --addr is checked again once listened on: a name the
// listen resolves (foo.localhost, or localhost in an unusual hosts file)
// may bind another interface, which --auth none refuses.
func TestServeChecksTheBoundAddressWithoutAuth(t *testing.T) {
	t.Parallel()
	none := &authFlags{mode: authNone}
	for _, ip := range []string{"10.1.2.3", "0.0.0.0", "::"} {
		if err := none.checkListener(&net.TCPAddr{IP: net.ParseIP(ip), Port: 8780}); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--insecure-no-auth") {
			t.Errorf("bound to %s with --auth none: %v, want a usage error naming --insecure-no-auth", ip, err)
		}
	}
	for _, ip := range []string{"127.0.0.1", "127.1.2.3", "::1"} {
		if err := none.checkListener(&net.TCPAddr{IP: net.ParseIP(ip), Port: 8780}); err != nil {
			t.Errorf("bound to %s with --auth none: %v", ip, err)
		}
	}
	public := &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 8780}
	for name, a := range map[string]*authFlags{
		"--insecure-no-auth": {mode: authNone, insecureNoAuth: true},
		"--auth token":       {mode: authToken},
	} {
		if err := a.checkListener(public); err != nil {
			t.Errorf("bound to %s with %s: %v", public, name, err)
		}
	}
}

// With --insecure-no-auth it starts, and warns.
func TestServeInsecureNoAuthWarns(t *testing.T) {
	t.Parallel()
	p := runServe(t, nil, "--store", "memory:", "--addr", "0.0.0.0:0", "--insecure-no-auth")
	if !strings.Contains(p.stdout.String(), "WARNING: --auth none") || !strings.Contains(p.stderr.String(), "authentication is off") {
		t.Errorf("no start-up warning on stdout and in the log:\n%s\n%s", p.stdout, p.stderr)
	}
	// On loopback the warning is there too.
	q := runServe(t, nil, "--store", "memory:")
	if !strings.Contains(q.stdout.String(), "WARNING: --auth none") {
		t.Errorf("no start-up warning on loopback:\n%s", q.stdout)
	}
}

func TestServeAuthFlagErrors(t *testing.T) {
	t.Parallel()
	keys := newJWTKeys(t)
	for _, args := range [][]string{
		{"--auth", "magic"},
		{"--auth", "token"},
		{"--auth", "token", "--api-keys-file", keys.file},
		{"--auth", "jwt"},
		{"--auth", "jwt", "--jwt-keys-file", filepath.Join(t.TempDir(), "missing")},
		{"--auth", "jwt", "--jwt-keys-file", keys.file, "--cors-origins", "*"},
		{"--auth", "jwt", "--jwt-keys-file", keys.file, "--session-key-file", keys.file + ".none"},
		{"--append-rate", "-2"},
	} {
		m := &Main{Getenv: func(string) string { return "" }}
		err := m.Run(context.Background(), append([]string{"serve", "--store", "memory:", "--addr", "127.0.0.1:0"}, args...), io.Discard, io.Discard)
		if !errors.Is(err, errUsage) {
			t.Errorf("serve %v: %v, want a usage error", args, err)
		}
	}
}

func TestAuthCommand(t *testing.T) {
	t.Parallel()
	run := func(stdin string, args ...string) (string, error) {
		var out bytes.Buffer
		m := &Main{Getenv: func(string) string { return "" }, Stdin: strings.NewReader(stdin)}
		err := m.Run(context.Background(), append([]string{"auth"}, args...), &out, io.Discard)
		return out.String(), err
	}
	key := auth.NewKey()
	want, _ := auth.HashKey(key)
	if out, err := run(key+"\n", "hash-key"); err != nil || out != want+"\n" {
		t.Errorf("hash-key = %q, %v; want %q", out, err, want)
	}
	if _, err := run("short\n", "hash-key"); !errors.Is(err, errUsage) {
		t.Errorf("hash-key of a short key: %v", err)
	}
	out, err := run("", "new-key", "alice")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 2 || !strings.HasPrefix(lines[0], "key: rsk_") || !strings.HasPrefix(lines[1], "keys-file line: alice sha256:") {
		t.Fatalf("new-key = %q, %v", out, err)
	}
	newKey := strings.TrimPrefix(lines[0], "key: ")
	if h, _ := auth.HashKey(newKey); lines[1] != "keys-file line: alice "+h {
		t.Errorf("new-key's line does not hash its key: %q", out)
	}
	for _, args := range [][]string{{}, {"nope"}, {"new-key"}, {"new-key", "a b"}, {"new-key", "-x"}, {"new-key", "a", "b"}} {
		if _, err := run("", args...); !errors.Is(err, errUsage) {
			t.Errorf("auth %v: %v", args, err)
		}
	}
	// Help is help: no key is made for a user named "--help".
	for _, args := range [][]string{{"new-key", "--help"}, {"new-key", "-h"}, {"hash-key", "--help"}} {
		if out, err := run("", args...); err != nil || strings.Contains(out, "rsk_") {
			t.Errorf("auth %v = %q, %v; want help, no key", args, out, err)
		}
	}
}

// serve --auth token authenticates API keys and re-reads the keys file
// on SIGHUP.
func TestServeAuthTokenReloadsOnSIGHUP(t *testing.T) {
	aliceKey, bobKey := auth.NewKey(), auth.NewKey()
	ah, _ := auth.HashKey(aliceKey)
	bh, _ := auth.HashKey(bobKey)
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte("alice "+ah+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := runServe(t, nil, "--store", "memory:", "--auth", "token", "--api-keys-file", file)
	if strings.Contains(p.stdout.String(), "WARNING") {
		t.Errorf("a warning with --auth token:\n%s", p.stdout)
	}
	list := p.base + "/api/workflows"
	if code, _, h := call(t, "GET", list, "", ""); code != 401 || h.Get("WWW-Authenticate") == "" {
		t.Errorf("no credential: %d %v", code, h)
	}
	if code, body, _ := call(t, "GET", list, aliceKey, ""); code != 200 {
		t.Errorf("alice's key: %d %s", code, body)
	}
	if code, _, _ := call(t, "GET", list, bobKey, ""); code != 401 {
		t.Errorf("bob's key before the reload: %d", code)
	}
	if err := os.WriteFile(file, []byte("bob "+bh+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if code, _, _ := call(t, "GET", list, bobKey, ""); code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bob's key still refused 20 s after SIGHUP; stderr:\n%s", p.stderr)
		}
	}
	if code, _, _ := call(t, "GET", list, aliceKey, ""); code != 401 {
		t.Errorf("alice's removed key after the reload: %d", code)
	}
}

// tail and run send the credential of --credential-file; without one, a
// server with --auth token refuses them.
func TestClientCommandsSendCredential(t *testing.T) {
	t.Parallel()
	key := auth.NewKey()
	hash, _ := auth.HashKey(key)
	dir := t.TempDir()
	keysFile, credFile, flow := filepath.Join(dir, "keys"), filepath.Join(dir, "credential"), filepath.Join(dir, "flow.yaml")
	for name, content := range map[string]string{
		keysFile: "ada " + hash + "\n",
		credFile: key + "\n",
		flow:     "name: hello\nnodes:\n  - id: greet\n    type: transform\n    config: {expression: \"'hello ' + input.who\"}\noutput: greet\n",
	} {
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	base, _, _ := startServe(t, nil, "--store", "memory:", "--auth", "token", "--api-keys-file", keysFile)

	err, _, _ := runCmd(t, "", "--server", base, "--input", `{"who":"Ada"}`, flow)
	if err == nil || !strings.Contains(err.Error(), "UNAUTHENTICATED") {
		t.Errorf("run without a credential: %v", err)
	}
	err, out, stderr := runCmd(t, "", "--server", base, "--credential-file", credFile, "--input", `{"who":"Ada"}`, flow)
	if err != nil || !strings.Contains(out, "run.completed") {
		t.Fatalf("run with a credential: %v\n%s\n%s", err, out, stderr)
	}
	_, runID, ok := strings.Cut(strings.TrimSpace(stderr), ", run ")
	if !ok {
		t.Fatalf("run printed no run id:\n%s", stderr)
	}
	runID, _, _ = strings.Cut(runID, "\n")
	tail := func(args ...string) (string, error) {
		var stdout bytes.Buffer
		m := &Main{Getenv: func(string) string { return "" }}
		err := m.Run(t.Context(), append(append([]string{"tail", "--server", base}, args...), runID), &stdout, io.Discard)
		return stdout.String(), err
	}
	if out, err := tail("--credential-file", credFile); err != nil || !strings.Contains(out, "run.completed") {
		t.Errorf("tail with a credential: %v\n%s", err, out)
	}
	if _, err := tail(); err == nil {
		t.Error("tail without a credential succeeded")
	}
	if _, err := tail("--credential-file", filepath.Join(dir, "missing")); !errors.Is(err, errUsage) {
		t.Errorf("tail with a missing credential file: %v", err)
	}
}

// A session made on one instance is accepted by every instance with the
// same --session-key-file (sessions are signed, not stored), and by no
// other.
func TestSessionsAcrossInstances(t *testing.T) {
	t.Parallel()
	keys := newJWTKeys(t)
	sessionKey := filepath.Join(t.TempDir(), "session.key")
	if err := os.WriteFile(sessionKey, []byte(auth.NewKey()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	common := []string{"--store", "memory:", "--auth", "jwt", "--jwt-keys-file", keys.file}
	a := runServe(t, nil, append(common, "--session-key-file", sessionKey)...)
	b := runServe(t, nil, append(common, "--session-key-file", sessionKey)...)
	other := runServe(t, nil, common...)
	if !strings.Contains(other.stderr.String(), "no --session-key-file") {
		t.Errorf("no warning without a session key file:\n%s", other.stderr)
	}

	code, body, h := call(t, "POST", a.base+"/api/auth/session", keys.token("ada", time.Hour), "")
	if code != 200 {
		t.Fatalf("POST session on a: %d %s", code, body)
	}
	resp := http.Response{Header: h}
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies %v", cookies)
	}
	cookie := cookies[0].Name + "=" + cookies[0].Value
	for name, p := range map[string]*serveRun{"a": a, "b": b} {
		if code, body, _ := call(t, "GET", p.base+"/api/workflows", "", "", "Cookie", cookie); code != 200 {
			t.Errorf("the session on %s: %d %s", name, code, body)
		}
	}
	if code, _, _ := call(t, "GET", other.base+"/api/workflows", "", "", "Cookie", cookie); code != 401 {
		t.Errorf("the session on an instance with another key: %d", code)
	}
}

// The append rate is per user: with --auth none every caller is the one
// local user, so by default there is none; with authentication the
// default holds, and an explicit value wins in either mode.
func TestAppendRateDefaults(t *testing.T) {
	t.Parallel()
	keys := newJWTKeys(t)
	for _, c := range []struct {
		args []string
		want float64
	}{
		{nil, 0},
		{[]string{"--append-rate", "30"}, 30},
		{[]string{"--auth", "jwt", "--jwt-keys-file", keys.file}, defaultAppendRate},
		{[]string{"--auth", "jwt", "--jwt-keys-file", keys.file, "--append-rate", "0"}, 0},
	} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		var a authFlags
		a.add(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if err := a.build("127.0.0.1:0", slog.New(slog.DiscardHandler)); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if a.appendRate != c.want {
			t.Errorf("%v: append rate %g, want %g", c.args, a.appendRate, c.want)
		}
	}
}

// serve --auth none on loopback answers only requests addressed to a
// loopback host: a page whose name an attacker's DNS points at 127.0.0.1
// (DNS rebinding) reads nothing.
func TestServeAuthNoneRefusesOtherHosts(t *testing.T) {
	t.Parallel()
	base, _, _ := startServe(t, nil, "--store", "memory:")
	for host, want := range map[string]int{"rebind.attacker.example": 403, "": 200, "localhost": 200} {
		req, err := http.NewRequestWithContext(t.Context(), "GET", base+"/api/workflows", nil)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /api/workflows with Host %q: %d, want %d", host, resp.StatusCode, want)
		}
	}
}

// TestServeReloadsChangedKeysFile: without a SIGHUP, a key removed from
// --api-keys-file is revoked once the change is seen (every
// --keys-reload-interval) and has stayed for one more interval: the
// stream opened with it ends and its reconnection is refused, while the
// kept key's requests go on. A negative interval is refused.
func TestServeReloadsChangedKeysFile(t *testing.T) {
	t.Parallel()
	old, kept := auth.NewKey(), auth.NewKey()
	file := filepath.Join(t.TempDir(), "keys")
	writeAPIKeys(t, file, old, kept)
	m := &Main{Getenv: func(string) string { return "" }}
	if err := m.Run(t.Context(), []string{"serve", "--store", "memory:", "--auth", "token", "--api-keys-file", file, "--keys-reload-interval", "-1s"}, io.Discard, io.Discard); exitCode(err) != 2 {
		t.Errorf("--keys-reload-interval -1s: %v, want a usage error", err)
	}
	p := runServe(t, nil, "--store", "memory:", "--workers", "0", "--auth", "token", "--api-keys-file", file, "--keys-reload-interval", "50ms")
	body := `{"events":[{"event_type":"run.start","content":{"chain":"c"},"metadata":{"caller":"test"}}]}`
	if code, out, _ := call(t, "POST", p.base+"/api/threads/t1/runs/r1/events", kept, body); code != http.StatusCreated {
		t.Fatalf("POST events: %d %s", code, out)
	}
	code, stream := dialStream(t, p.base+"/api/threads/t1/stream", "Authorization", "Bearer "+old)
	if code != http.StatusOK {
		t.Fatalf("stream with the old key: %d", code)
	}
	if ev, err := stream.Next(); err != nil || ev.ID != "1" {
		t.Fatalf("first event %+v, %v", ev, err)
	}

	writeAPIKeys(t, file, kept)
	if err := apitest.ReadToEnd(t, stream, 30*time.Second); !errors.Is(err, io.EOF) {
		t.Errorf("the old key's stream ended with %v once the file changed; want a clean end", err)
	}
	if code, _, _ := call(t, "GET", p.base+"/api/threads/t1/stream", old, ""); code != http.StatusUnauthorized {
		t.Errorf("the old key after the change: %d, want 401", code)
	}
	if code, out, _ := call(t, "GET", p.base+"/api/threads/t1/runs", kept, ""); code != http.StatusOK {
		t.Errorf("the kept key after the change: %d %s", code, out)
	}
	p.waitLog(t, "keys reloaded", 10*time.Second)
}

// TestServeRemovedJWTKeyEndsItsStreams: with --auth jwt, a key removed
// from --jwt-keys-file at a reload ends the thread streams opened with
// the tokens it signed and with the sessions made from them, and refuses
// both from then on; the streams of the key kept go on.
func TestServeRemovedJWTKeyEndsItsStreams(t *testing.T) {
	gone, kept := []byte(auth.NewKey()), []byte(auth.NewKey())
	file := filepath.Join(t.TempDir(), "jwks.json")
	authtest.WriteJWKS(t, file, authtest.OctJWK("gone", gone), authtest.OctJWK("kept", kept))
	token := func(secret []byte, kid string) string {
		return authtest.Token(map[string]any{"alg": "HS256", "kid": kid},
			map[string]any{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}, authtest.HS256(secret))
	}
	goneToken, keptToken := token(gone, "gone"), token(kept, "kept")
	p := runServe(t, nil, "--store", "memory:", "--workers", "0", "--auth", "jwt", "--jwt-keys-file", file)
	post := func(n int) {
		t.Helper()
		body := fmt.Sprintf(`{"events":[{"event_type":"run.start","content":{"chain":"c%d"},"metadata":{"caller":"test"}}]}`, n)
		if code, out, _ := call(t, "POST", p.base+"/api/threads/t1/runs/r1/events", keptToken, body); code != http.StatusCreated {
			t.Fatalf("POST events: %d %s", code, out)
		}
	}
	post(1)
	code, out, h := call(t, "POST", p.base+"/api/auth/session", goneToken, "")
	cookies := (&http.Response{Header: h}).Cookies()
	if code != http.StatusOK || len(cookies) != 1 {
		t.Fatalf("session from the gone key's token: %d %s, cookies %v", code, out, cookies)
	}
	cookie := cookies[0].Name + "=" + cookies[0].Value
	open := func(header ...string) (int, *sse.Reader) {
		t.Helper()
		return dialStream(t, p.base+"/api/threads/t1/stream", header...)
	}
	streams := map[string][]string{
		"gone token":   {"Authorization", "Bearer " + goneToken},
		"gone api key": {"X-Api-Key", goneToken}, // the LangGraph SDK's apiKey
		"gone session": {"Cookie", cookie},
		"kept token":   {"Authorization", "Bearer " + keptToken},
	}
	readers := map[string]*sse.Reader{}
	for name, header := range streams {
		code, r := open(header...)
		if code != http.StatusOK {
			t.Fatalf("stream with the %s: %d", name, code)
		}
		if ev, err := r.Next(); err != nil || ev.ID != "1" {
			t.Fatalf("stream with the %s: first event %+v, %v; want seq 1", name, ev, err)
		}
		readers[name] = r
	}

	authtest.WriteJWKS(t, file, authtest.OctJWK("kept", kept))
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"gone token", "gone api key", "gone session"} {
		if err := apitest.ReadToEnd(t, readers[name], 30*time.Second); !errors.Is(err, io.EOF) {
			t.Errorf("the stream with the %s ended with %v once its key was removed; want a clean end", name, err)
		}
	}
	post(2)
	if ev, err := readers["kept token"].Next(); err != nil || ev.ID != "2" {
		t.Errorf("the kept key's stream after the rotation: %+v, %v; want seq 2", ev, err)
	}
	for _, name := range []string{"gone token", "gone api key", "gone session"} {
		if code, _ := open(streams[name]...); code != http.StatusUnauthorized {
			t.Errorf("reconnection with the %s: %d, want 401", name, code)
		}
	}
}

// serve --auth token: once an API key is removed from --api-keys-file and
// the file reloaded (SIGHUP), the streams opened with it end as when a
// credential expires (a LangGraph join is aborted, a thread stream ends
// cleanly) and their reconnection is refused, while the join of the
// user's other key goes on. Not parallel: SIGHUP reaches every serve of
// the process.
func TestServeRemovedKeyEndsItsStreams(t *testing.T) {
	old, kept := auth.NewKey(), auth.NewKey()
	file := filepath.Join(t.TempDir(), "keys")
	writeAPIKeys(t, file, old, kept)
	p := runServe(t, nil, "--store", "memory:", "--workers", "0", "--auth", "token", "--api-keys-file", file)
	push := func(index int) {
		t.Helper()
		body := fmt.Sprintf(`{"thread_id":"t1","epoch":1,"first_index":%d,"chunks":[{"event":"values","data":{"n":%d}}]}`, index, index)
		if code, out, _ := call(t, "POST", p.base+"/api/runs/r1/stream-chunks", kept, body); code != http.StatusOK {
			t.Fatalf("push: %d %s", code, out)
		}
	}
	const joinPath, threadPath = "/api/threads/t1/runs/r1/stream", "/api/threads/t1/stream"
	open := func(path, key string) (int, *sse.Reader) {
		t.Helper()
		header := []string{"Authorization", "Bearer " + key}
		if path == joinPath {
			header = append(header, "Last-Event-ID", "-1") // from the start
		}
		return dialStream(t, p.base+path, header...)
	}
	push(0)
	joins := map[string]joined{}
	for name, key := range map[string]string{"old": old, "kept": kept} {
		code, r := open(joinPath, key)
		if code != http.StatusOK {
			t.Fatalf("join with the %s key: %d", name, code)
		}
		joins[name] = joined{r: r}
		if got := joins[name].next(t) + "," + joins[name].next(t); got != "metadata ,values 0" {
			t.Fatalf("join with the %s key: frames %s", name, got)
		}
	}
	code, thread := open(threadPath, old)
	if code != http.StatusOK {
		t.Fatalf("thread stream with the old key: %d", code)
	}

	writeAPIKeys(t, file, kept)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if err := apitest.ReadToEnd(t, joins["old"].r, 30*time.Second); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("the old key's join ended with %v once the key was removed; want an aborted connection", err)
	}
	if err := apitest.ReadToEnd(t, thread, 30*time.Second); !errors.Is(err, io.EOF) {
		t.Errorf("the old key's thread stream ended with %v once the key was removed; want a clean end", err)
	}
	push(1)
	if got := joins["kept"].next(t); got != "values 1" {
		t.Errorf("the kept key's join after the rotation: %s, want values 1", got)
	}
	for _, path := range []string{joinPath, threadPath} {
		if code, _ := open(path, old); code != http.StatusUnauthorized {
			t.Errorf("reconnection to %s with the removed key: %d, want 401", path, code)
		}
	}
}

// TestKeysChangedBeforeTheWatchStarts: a key removed from the file after
// serve read it but before its polling started (while the store opens)
// is still revoked by the polling: the change is told from the file the
// keys were read from, not from the file as the polling first finds it.
func TestKeysChangedBeforeTheWatchStarts(t *testing.T) {
	t.Parallel()
	alice, bob := auth.NewKey(), auth.NewKey()
	file := filepath.Join(t.TempDir(), "keys")
	writeAPIKeys(t, file, alice, bob)
	a := &authFlags{mode: authToken, apiKeysFile: file, sessionTTL: time.Hour, streamLifetime: time.Hour, keysReloadInterval: 20 * time.Millisecond}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := a.build("127.0.0.1:0", logger); err != nil {
		t.Fatal(err)
	}
	if _, err := a.api.Credentials.Authenticate(bob); err != nil {
		t.Fatalf("bob's key before the change: %v", err)
	}
	// The file is replaced, by a rename as a secret is, before the watch.
	next := file + ".next"
	writeAPIKeys(t, next, alice)
	if err := os.Rename(next, file); err != nil {
		t.Fatal(err)
	}
	a.reloadKeys(t.Context(), logger)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := a.api.Credentials.Authenticate(bob); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("bob's key, removed before the watch started, still authenticates after 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := a.api.Credentials.Authenticate(alice); err != nil {
		t.Errorf("alice's key after the change: %v", err)
	}
}

// The polling of a keys file reloads a change once it stayed for one
// poll, never the poll that first sees it, so a file caught half-written
// is not applied; a change that goes on waits until it stops; a file that
// becomes unreadable is warned of once, and reloaded when it is back and
// stayed.
func TestKeysFileWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a")
	info, _ := os.Stat(path)
	w := keysFileWatch{loaded: info}
	poll := func(step string, want int) {
		t.Helper()
		info, err := os.Stat(path)
		got := w.tick(info, err)
		if got != want {
			t.Fatalf("%s: %d, want %d", step, got, want)
		}
		if got == keysChanged {
			w.reloaded(info)
		}
	}
	poll("unchanged", keysUnchanged)
	write("ab")
	poll("a change, first seen", keysUnchanged)
	poll("the change, stayed", keysChanged)
	poll("reloaded", keysUnchanged)
	write("abc")
	poll("a change being written", keysUnchanged)
	write("abcd")
	poll("still being written", keysUnchanged)
	poll("written", keysChanged)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	poll("gone", keysUnreadable)
	poll("still gone", keysUnchanged)
	write("abcde")
	poll("back, first seen", keysUnchanged)
	poll("back, stayed", keysChanged)
}
