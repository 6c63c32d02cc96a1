package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/runstream/runstream/auth/authtest"
	"github.com/runstream/runstream/workflow"
)

// followScript, evaluated in a page of the server's own origin, defines
// login(token), which exchanges a token for the session cookie and records
// the status and the session's expiry, and follow(run), which follows a
// run with EventSource (cookies only, as a browser can) and, when the
// stream breaks and EventSource is about to reconnect, renews the session
// with window.token. It records each opening of the stream (with the
// number of logins done by then) and each break.
const followScript = `
window.seen = []; window.opens = []; window.breaks = []; window.logins = []; window.done = false; window.token = null; window.es = null;
window.login = async (token) => {
  const r = await fetch("/api/auth/session", {method: "POST", headers: {Authorization: "Bearer " + token}});
  const body = r.ok ? await r.json() : {};
  window.logins.push({status: r.status, expiresAt: r.ok ? Date.parse(body.expiresAt) : 0});
  return r.status;
};
window.follow = (run, types) => {
  const terminal = new Set(["run.completed", "run.failed", "run.cancelled"]);
  const es = new EventSource("/api/workflows/runs/" + run + "/stream");
  window.es = es;
  es.onopen = () => { window.opens.push({at: Date.now(), logins: window.logins.length}); };
  es.onerror = () => {
    window.breaks.push({at: Date.now(), readyState: es.readyState});
    if (window.token && es.readyState === EventSource.CONNECTING) window.login(window.token);
  };
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

// serve --auth jwt with an ES256 key file: a browser logs in with a
// short-lived token, follows a run by its session cookie, and when the
// session expires with the token (the stream ends with it) renews it with
// a fresh token and resumes with Last-Event-ID, seeing every event
// exactly once.
//
// Only the first session is short. The renewed one lasts the default
// hour, so its cookie is still in the browser when EventSource reconnects
// after the streams' 3 s retry, however loaded the machine: a short TTL
// for every session made the renewed cookie (Max-Age whole seconds,
// rounded down) expire at about the moment of the reconnection, which
// then went out without a cookie, got 401, and ended the EventSource.
func TestBrowserFollowsWithSession(t *testing.T) {
	exe := chromiumPath(t)
	key := authtest.NewECKey(t)
	keyFile := filepath.Join(t.TempDir(), "jwt.pem")
	authtest.WritePublicKeyPEM(t, keyFile, &key.PublicKey)
	token := func(life time.Duration) string {
		return authtest.Token(map[string]any{"alg": "ES256", "typ": "JWT"},
			map[string]any{"sub": "ada", "exp": time.Now().Add(life).Unix()}, authtest.ES256(key))
	}
	// The first token's life, which bounds its session's; a session's
	// expiry is in whole seconds, so it ends 4 to 5 s after the login.
	const firstLife = 5 * time.Second
	p := runServe(t, nil, "--store", "memory:", "--auth", "jwt", "--jwt-keys-file", keyFile, "--jwt-leeway", "0")

	// A run that waits for input, so the stream outlives the first session.
	m := &matrix{base: p.base}
	f := m.fixture(t, token(time.Hour))

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true))...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	if err := chromedp.Do(browser, chromedp.Navigate(p.base+"/healthz"), chromedp.WaitReady("body")); err != nil {
		t.Fatalf("open the server's page in Chromium: %v", err)
	}
	traceBrowser(t, browser)
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
		Seen  []int64
		Opens []struct {
			At     int64 // Unix ms
			Logins int   // logins done when the stream opened
		}
		Breaks []struct {
			At         int64 // Unix ms
			ReadyState int   // 0: EventSource reconnects; 2: it gave up
		}
		Logins []struct {
			Status    int
			ExpiresAt int64 // Unix ms
		}
		Done bool
		// ReadyState is the EventSource's: 2 when it is closed.
		ReadyState int
	}
	state := func() pageState {
		t.Helper()
		var s pageState
		evaluate(`({seen: window.seen, opens: window.opens, breaks: window.breaks, logins: window.logins, done: window.done, readyState: window.es ? window.es.readyState : -1})`, &s)
		return s
	}
	waitFor := func(what string, cond func(pageState) bool) pageState {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			s := state()
			if cond(s) {
				return s
			}
			if s.ReadyState == 2 && !s.Done {
				t.Fatalf("the EventSource gave up while waiting for %s (see the browser's trace); the page has %+v", what, s)
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
	// Log in with the short token and follow in one step, so the stream
	// opens while the first session is young; the page keeps a fresh,
	// long token to renew its session with when the stream breaks.
	types, _ := json.Marshal(workflow.Events())
	evaluate(`window.login(`+strconv.Quote(token(firstLife))+`).then(s => {
		if (s === 200) { window.token = `+strconv.Quote(token(time.Hour))+`; window.follow(`+strconv.Quote(f.runID)+`, `+string(types)+`); }
		return s;
	})`, &status)
	if status != 200 {
		t.Fatalf("login: %d", status)
	}
	first := waitFor("the events up to run.awaiting_input", func(s pageState) bool { return len(s.Seen) >= 6 })
	second := waitFor("the stream to end with its session and reconnect", func(s pageState) bool { return len(s.Opens) >= 2 })
	// The first stream ended when its session expired, not before, and
	// EventSource reconnected by the renewed session.
	if len(second.Breaks) == 0 || second.Breaks[0].At < second.Logins[0].ExpiresAt {
		t.Errorf("the first stream broke %+v, before its session expired at %d ms", second.Breaks, second.Logins[0].ExpiresAt)
	}
	if second.Opens[1].Logins < 2 {
		t.Errorf("the stream reopened after %d logins, want after the renewal", second.Opens[1].Logins)
	}
	// The run goes on; the resumed stream delivers the rest.
	m.mustJSON(t, "POST", "/api/workflows/runs/"+f.runID+"/resume", token(time.Hour), `{"resumeToken":"`+f.token+`","action":"approve","values":{}}`, 200, nil)
	last := waitFor("run.completed", func(s pageState) bool { return s.Done })

	want := make([]int64, last.Seen[len(last.Seen)-1])
	for i := range want {
		want[i] = int64(i + 1)
	}
	if !slices.Equal(last.Seen, want) || len(last.Seen) <= len(first.Seen) {
		t.Errorf("the browser saw seqs %v, want 1..%d exactly once (before the renewal: %v)", last.Seen, len(want), first.Seen)
	}
	if len(last.Logins) != 2 || last.Logins[0].Status != 200 || last.Logins[1].Status != 200 || len(last.Opens) != 2 || last.ReadyState != 2 {
		t.Errorf("logins %+v (want the first and one renewal, both 200), openings %+v (want 2), EventSource state %d (want closed by the page)",
			last.Logins, last.Opens, last.ReadyState)
	}
}

// traceBrowser records the network requests of the browser's tab (the
// cookie each sends, the Set-Cookie and status of each answer, the
// failures, the events of its EventSources) and the page's console, and
// logs the record when the test fails.
func traceBrowser(t *testing.T, browser context.Context) {
	t.Helper()
	var (
		mu    sync.Mutex
		lines []string
	)
	start := time.Now()
	add := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, fmt.Sprintf("%7.3fs ", time.Since(start).Seconds())+fmt.Sprintf(format, args...))
	}
	// A header's value, shortened: the trace shows whether a cookie went,
	// not the whole session value.
	header := func(h network.Headers, name string) string {
		v, _ := h[name].(string)
		if len(v) > 40 {
			v = v[:40] + "…"
		}
		return v
	}
	err := chromedp.Listen(browser, func(ev any) {
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			add("%s %s %s", e.RequestID, e.Request.Method, e.Request.URL)
		case *network.EventRequestWillBeSentExtraInfo:
			add("%s sends Cookie %q, Last-Event-ID %q", e.RequestID, header(e.Headers, "Cookie"), header(e.Headers, "Last-Event-ID"))
		case *network.EventResponseReceived:
			add("%s answered %d", e.RequestID, e.Response.Status)
		case *network.EventResponseReceivedExtraInfo:
			if c := header(e.Headers, "Set-Cookie"); c != "" {
				_, attrs, _ := strings.Cut(e.Headers["Set-Cookie"].(string), ";")
				add("%s sets a cookie:%s", e.RequestID, attrs)
			}
		case *network.EventLoadingFailed:
			add("%s failed: %s", e.RequestID, e.ErrorText)
		case *network.EventLoadingFinished:
			add("%s finished", e.RequestID)
		case *network.EventEventSourceMessageReceived:
			add("%s event %s id %s", e.RequestID, e.EventName, e.EventID)
		case *runtime.EventConsoleAPICalled:
			var args []string
			for _, a := range e.Args {
				args = append(args, cmp.Or(string(a.Value), a.Description))
			}
			add("console.%s %s", e.Type, strings.Join(args, " "))
		case *runtime.EventExceptionThrown:
			add("exception %s", e.ExceptionDetails.Text)
		}
	})
	if err != nil {
		t.Fatalf("trace the browser: %v", err)
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		t.Logf("the browser's trace:\n%s", strings.Join(lines, "\n"))
	})
}
