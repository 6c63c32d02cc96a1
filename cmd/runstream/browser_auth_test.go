package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/runstream/runstream/auth/authtest"
	"github.com/runstream/runstream/workflow"
)

// followScript, evaluated in a page of the server's own origin, defines
// login(token), which exchanges a token for the session cookie, and
// follow(run), which follows a run with EventSource (cookies only, as a
// browser can) and, when the stream breaks, renews the session with
// window.token before EventSource reconnects with Last-Event-ID.
const followScript = `
window.seen = []; window.opens = []; window.logins = []; window.done = false; window.token = null; window.es = null;
window.login = async (token) => {
  const r = await fetch("/api/auth/session", {method: "POST", headers: {Authorization: "Bearer " + token}});
  window.logins.push(r.status);
  return r.status;
};
window.follow = (run, types) => {
  const terminal = new Set(["run.completed", "run.failed", "run.cancelled"]);
  const es = new EventSource("/api/workflows/runs/" + run + "/stream");
  window.es = es;
  es.onopen = () => { window.opens.push(Date.now()); };
  es.onerror = () => { if (window.token) window.login(window.token); };
  for (const type of types) {
    es.addEventListener(type, (e) => {
      window.seen.push(Number(e.lastEventId));
      if (terminal.has(type)) { es.close(); window.done = true; }
    });
  }
};
true`

// chromiumPath returns the Chromium binary, skipping the test when there
// is none (bash .ci/run installs Debian's chromium).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	t.Skip("no chromium on PATH: install Debian's chromium (bash .ci/run does) to run the browser tests")
	return ""
}

// serve --auth jwt with an ES256 key file: a browser logs in with a token,
// follows a run by its session cookie, and when the session expires (the
// stream ends with it) renews it and resumes with Last-Event-ID, seeing
// every event exactly once.
func TestBrowserFollowsWithSession(t *testing.T) {
	exe := chromiumPath(t)
	key := authtest.NewECKey(t)
	keyFile := filepath.Join(t.TempDir(), "jwt.pem")
	authtest.WritePublicKeyPEM(t, keyFile, &key.PublicKey)
	token := func() string {
		return authtest.Token(map[string]any{"alg": "ES256", "typ": "JWT"},
			map[string]any{"sub": "ada", "exp": time.Now().Add(time.Hour).Unix()}, authtest.ES256(key))
	}
	const sessionTTL = 4 * time.Second // above the streams' 3 s retry
	p := runServe(t, nil, "--store", "memory:", "--auth", "jwt", "--jwt-keys-file", keyFile, "--session-ttl", sessionTTL.String())

	// A run that waits for input, so the stream outlives the session.
	m := &matrix{base: p.base}
	f := m.fixture(t, token())

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true))...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	if err := chromedp.Do(browser, chromedp.Navigate(p.base+"/healthz"), chromedp.WaitReady("body")); err != nil {
		t.Fatalf("open the server's page in Chromium: %v", err)
	}
	evaluate := func(expr string, v any) {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, 10*time.Second)
		defer cancel()
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](expr, chromedp.EvalAwaitPromise))
		if err == nil && v != nil {
			err = json.Unmarshal(raw, v)
		}
		if err != nil {
			t.Fatalf("evaluate %s in the page: %v", expr, err)
		}
	}
	type pageState struct {
		Seen   []int64
		Opens  []int64 // the time of each stream's opening, in Unix ms
		Logins []int
		Done   bool
		// ReadyState is the EventSource's: 2 when it gave up.
		ReadyState int
	}
	state := func() pageState {
		t.Helper()
		var s pageState
		evaluate(`({seen: window.seen, opens: window.opens, logins: window.logins, done: window.done, readyState: window.es ? window.es.readyState : -1})`, &s)
		return s
	}
	waitFor := func(what string, cond func(pageState) bool) pageState {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			s := state()
			if cond(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; the page has %+v", what, s)
			}
		}
	}

	evaluate(followScript, nil)
	// Without a session the stream is refused.
	var status int
	evaluate(`fetch("/api/workflows/runs/`+f.runID+`").then(r => r.status)`, &status)
	if status != 401 {
		t.Fatalf("GET the run without a session: %d, want 401", status)
	}
	evaluate(`window.login(`+strconv.Quote(token())+`)`, &status)
	if status != 200 {
		t.Fatalf("login: %d", status)
	}
	// The page renews its session with a fresh token when the stream breaks.
	evaluate(`window.token = `+strconv.Quote(token())+`; true`, nil)
	types, _ := json.Marshal(workflow.Events())
	evaluate(`window.follow(`+strconv.Quote(f.runID)+`, `+string(types)+`); true`, nil)
	first := waitFor("the events up to run.awaiting_input", func(s pageState) bool { return len(s.Seen) >= 6 })
	second := waitFor("the stream to end with its session and reconnect", func(s pageState) bool { return len(s.Opens) >= 2 })
	// The first stream lasted until its session expired (a lower bound:
	// a loaded machine only makes it longer).
	if d := time.Duration(second.Opens[1]-second.Opens[0]) * time.Millisecond; d < sessionTTL-time.Second {
		t.Errorf("the second stream opened %v after the first, before the %v session expired", d, sessionTTL)
	}
	// The run goes on; the resumed stream delivers the rest.
	m.mustJSON(t, "POST", "/api/workflows/runs/"+f.runID+"/resume", token(), `{"resumeToken":"`+f.token+`","action":"approve","values":{}}`, 200, nil)
	last := waitFor("run.completed", func(s pageState) bool { return s.Done })

	want := make([]int64, last.Seen[len(last.Seen)-1])
	for i := range want {
		want[i] = int64(i + 1)
	}
	if !slices.Equal(last.Seen, want) || len(last.Seen) <= len(first.Seen) {
		t.Errorf("the browser saw seqs %v, want 1..%d exactly once (before the renewal: %v)", last.Seen, len(want), first.Seen)
	}
	if len(last.Logins) < 2 || slices.ContainsFunc(last.Logins, func(s int) bool { return s != 200 }) || last.ReadyState != 2 {
		t.Errorf("logins %v (want the first and at least one renewal, all 200), EventSource state %d (want closed by the page)", last.Logins, last.ReadyState)
	}
}
