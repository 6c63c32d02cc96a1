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

// jwtUI serves the web UI behind --auth jwt (no leeway, so a session
// ends with its token) and returns the server and a signer of tokens of
// a user with a life: a short one makes a short session.
func jwtUI(t *testing.T) (*serveRun, func(user string, life time.Duration) string) {
	t.Helper()
	key := authtest.NewECKey(t)
	keyFile := filepath.Join(t.TempDir(), "jwt.pem")
	authtest.WritePublicKeyPEM(t, keyFile, &key.PublicKey)
	p := runServe(t, nil, "--store", "memory:", "--auth", "jwt", "--jwt-keys-file", keyFile, "--jwt-leeway", "0")
	return p, func(user string, life time.Duration) string {
		return authtest.Token(map[string]any{"alg": "ES256", "typ": "JWT"},
			map[string]any{"sub": user, "exp": time.Now().Add(life).Unix()}, authtest.ES256(key))
	}
}

// shortLife is the life of the tokens whose sessions the tests let end
// while a page follows a stream: long enough for the page to open (the
// tests do not depend on it: a page that opens late signs in alike).
const shortLife = 8 * time.Second

// signIn fills the UI's sign-in form with token and sends it.
func (p *uiPage) signIn(token string) {
	p.t.Helper()
	p.wait("the sign-in form", `document.querySelector("main #token")`)
	p.set("#token", token)
	p.click(`main form button[type=submit]`)
	p.wait("the sign-in form to go", `!document.querySelector("main #token")`)
}

// allow401 lets the browser log the 401s of an ended session.
func (p *uiPage) allow401() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.allow = func(m chromedp.ConsoleMessage) bool {
		return m.Source == "network" && strings.Contains(m.Text, "status of 401")
	}
}

// sayAs writes a human message to a thread as the token's user.
func sayAs(t *testing.T, base, token, thread, text string) {
	t.Helper()
	code, body, _ := call(t, "POST", base+"/api/threads/"+thread+"/runs/tr_1/events", token,
		`{"events":[{"event_type":"llm.human.input","content":{"type":"human","content":`+strconv.Quote(text)+`},"metadata":{"caller":"lead_agent"}}]}`)
	if code != 201 {
		t.Fatalf("write to %s: %d %s", thread, code, body)
	}
}

// seedMessages writes n messages to a thread as the token's user.
func seedMessages(t *testing.T, base, token, thread string, n int) {
	t.Helper()
	if code, body, _ := call(t, "PUT", base+"/api/threads/"+thread+"/runs/tr_1", token, `{"status":"running"}`); code != 200 {
		t.Fatalf("PUT the run of %s: %d %s", thread, code, body)
	}
	for i := 1; i <= n; i++ {
		sayAs(t, base, token, thread, fmt.Sprintf("message %d of %s", i, thread))
	}
}

// A thread page whose session ends while it follows the thread's stream:
// the stream's 401 shows the sign-in form; signed in again, the same page
// (with the older messages it had loaded) comes back and its stream
// resumes after its last event: the message written while signed out
// shows, and no message shows twice.
func TestWebUIThreadStreamSignsInAgain(t *testing.T) {
	p, token := jwtUI(t)
	long := token("ada", time.Hour)
	seedMessages(t, p.base, long, "th_s", 25)
	ui := openUI(t, p.base)
	ui.allow401()
	ui.open("/threads/th_s")
	ui.signIn(token("ada", shortLife))
	ui.wait("the latest messages", `document.querySelectorAll("#messages .msg").length === 20`)
	ui.click("#load-older")
	ui.wait("every message", `document.querySelectorAll("#messages .msg").length === 25`)
	ui.eval(`document.querySelector("#messages").dataset.mark = "the page before the sign-in", true`, nil)
	sayAs(t, p.base, long, "th_s", "before the session ends")
	ui.wait("the live message", `[...document.querySelectorAll("#messages .msg .text")].some(e => e.textContent === "before the session ends")`)

	// The session ends: the stream's reconnection answers 401.
	ui.wait("the sign-in form after the stream's 401", `document.querySelector("main #token") && !document.querySelector("#messages")`)
	ui.shot("thread-stream-sign-in-again")
	sayAs(t, p.base, long, "th_s", "while signed out")
	ui.signIn(long)
	ui.wait("the message written while signed out", `[...document.querySelectorAll("#messages .msg .text")].some(e => e.textContent === "while signed out")`)
	var mark string
	ui.eval(`document.querySelector("#messages").dataset.mark || ""`, &mark)
	if mark != "the page before the sign-in" {
		t.Errorf("after the sign-in the thread page was drawn anew (mark %q), want the page kept", mark)
	}
	sayAs(t, p.base, long, "th_s", "after the sign-in")
	ui.wait("the message written after the sign-in", `[...document.querySelectorAll("#messages .msg .text")].some(e => e.textContent === "after the sign-in")`)
	ui.wait("the stream open", `!document.querySelector("#reconnecting, #stream-closed")`)
	var shown struct {
		Seqs  []int
		Texts []string
	}
	ui.eval(`({seqs: [...document.querySelectorAll("#messages .msg")].map(e => Number(e.dataset.seq)),
		texts: [...document.querySelectorAll("#messages .msg .text")].map(e => e.textContent)})`, &shown)
	if len(shown.Seqs) != 28 || len(shown.Texts) != 28 {
		t.Errorf("%d messages shown, want 25 + 3: %q", len(shown.Seqs), shown.Texts)
	}
	for i := 1; i < len(shown.Seqs); i++ {
		if shown.Seqs[i] <= shown.Seqs[i-1] {
			t.Errorf("messages out of order or repeated: seqs %v", shown.Seqs)
			break
		}
	}
	if n := len(shown.Texts); n == 28 && (shown.Texts[0] != "message 1 of th_s" || !slices.Equal(shown.Texts[25:], []string{"before the session ends", "while signed out", "after the sign-in"})) {
		t.Errorf("messages shown %q", shown.Texts)
	}
	ui.shot("thread-stream-resumed")
}

// A run page whose session ends while it follows the run's stream: the
// stream's 401 shows the sign-in form; the run is approved and completes
// meanwhile; signed in again, the same page comes back, its stream
// resumes after its last event and the page applies every event of the
// run once.
func TestWebUIRunStreamSignsInAgain(t *testing.T) {
	p, token := jwtUI(t)
	long := token("ada", time.Hour)
	var wf struct{ WorkflowID string }
	if code, body, _ := call(t, "POST", p.base+"/api/workflows", long, strings.Replace(uiApproval, "tokensPerSecond: 10", "tokensPerSecond: 40", 1), "Content-Type", "application/yaml"); code != 201 {
		t.Fatalf("publish: %d %s", code, body)
	} else if err := json.Unmarshal(body, &wf); err != nil {
		t.Fatal(err)
	}
	var run struct{ RunID string }
	if code, body, _ := call(t, "POST", p.base+"/api/workflows/"+wf.WorkflowID+"/runs", long, `{"input":{"customer":"Ada","topic":"a late parcel"}}`); code != 201 {
		t.Fatalf("start: %d %s", code, body)
	} else if err := json.Unmarshal(body, &run); err != nil {
		t.Fatal(err)
	}
	runStatus := func() (status string, lastSeq int) {
		t.Helper()
		var r struct {
			Status  string
			LastSeq int
		}
		code, body, _ := call(t, "GET", p.base+"/api/workflows/runs/"+run.RunID, long, "")
		if code != 200 || json.Unmarshal(body, &r) != nil {
			t.Fatalf("GET the run: %d %s", code, body)
		}
		return r.Status, r.LastSeq
	}

	ui := openUI(t, p.base)
	ui.allow401()
	ui.open("/runs/" + run.RunID)
	ui.signIn(token("ada", shortLife))
	ui.wait("the approval form", `document.querySelector("#resume-form")`)
	ui.eval(`document.querySelector("#nodes").dataset.mark = "the page before the sign-in", true`, nil)
	var resumeToken string
	ui.eval(`window.runstreamRun.awaiting.resumeToken`, &resumeToken)

	ui.wait("the sign-in form after the stream's 401", `document.querySelector("main #token") && !document.querySelector("#nodes")`)
	ui.shot("run-stream-sign-in-again")
	// Meanwhile the run is approved elsewhere and completes.
	if code, body, _ := call(t, "POST", p.base+"/api/workflows/runs/"+run.RunID+"/resume", long, `{"resumeToken":`+strconv.Quote(resumeToken)+`,"action":"approve","values":{}}`); code != 200 {
		t.Fatalf("resume: %d %s", code, body)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if s, _ := runStatus(); s == "completed" {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the run is %s, want completed", s)
		}
	}
	ui.signIn(long)
	ui.wait("the completed run", `document.querySelector("#run-status").textContent === "completed" && document.querySelector('a[download="decision.json"]')`)
	var mark string
	ui.eval(`document.querySelector("#nodes").dataset.mark || ""`, &mark)
	if mark != "the page before the sign-in" {
		t.Errorf("after the sign-in the run page was drawn anew (mark %q), want the page kept", mark)
	}
	_, lastSeq := runStatus()
	var seqs []int
	ui.eval(`window.runstreamRun.events.map(e => e.seq)`, &seqs)
	var rows int
	ui.eval(`document.querySelectorAll("#event-log tbody tr").length`, &rows)
	if len(seqs) != lastSeq || rows != lastSeq {
		t.Errorf("the page applied %d events and logs %d, the run has %d", len(seqs), rows, lastSeq)
	}
	for i, s := range seqs {
		if s != i+1 {
			t.Errorf("the page applied seqs %v, want 1, 2, 3… each once", seqs)
			break
		}
	}
	var drafts []string
	ui.eval(`[...document.querySelectorAll('pre.out[data-node="draft"]')].map(e => e.textContent)`, &drafts)
	if len(drafts) != 1 || drafts[0] != uiDraft {
		t.Errorf("the page shows the draft %q, want %q once", drafts, uiDraft)
	}
	ui.shot("run-stream-resumed")
}

// Signing out forgets the user: after ada signs out, bob, signing in on
// the same browser, is not shown the threads ada opened, and nothing of
// hers is left in the browser's storage. And when bob's session ends on
// his thread's page, ada signing in at the form that shows is not given
// his page back: she lands on the first page, which lists none of his
// threads.
func TestWebUISignOutForgetsUser(t *testing.T) {
	p, token := jwtUI(t)
	ada, bob := token("ada", time.Hour), token("bob", time.Hour)
	seedMessages(t, p.base, ada, "th_ada", 3)
	seedMessages(t, p.base, bob, "th_bob", 3)
	ui := openUI(t, p.base)
	ui.allow401()
	userKeys := `Object.keys(localStorage).concat(Object.keys(sessionStorage)).filter(k => k.startsWith("runstream."))`

	ui.open("/threads/th_ada")
	ui.signIn(ada)
	ui.wait("ada's messages", `document.querySelectorAll("#messages .msg").length === 3`)
	ui.click("a.brand")
	ui.wait("ada's thread on the first page", `document.querySelector('main a[href="/threads/th_ada"]')`)
	ui.click("#who button")
	ui.wait("the sign-in form after the sign-out", `document.querySelector("main #token") && location.pathname === "/"`)
	var left []string
	ui.eval(userKeys, &left)
	if len(left) != 0 {
		t.Errorf("after the sign-out the browser keeps %v", left)
	}
	ui.shot("signed-out")
	ui.signIn(bob)
	ui.wait("the first page", `document.querySelectorAll(".cards .card").length === 4`)
	ui.checkLabels("the first page")
	if got := ui.text("main"); strings.Contains(got, "th_ada") || !strings.Contains(got, "No thread opened in this browser yet.") {
		t.Errorf("bob's first page lists ada's threads: %s", got)
	}
	ui.click(`nav a[href="/threads"]`)
	ui.wait("the threads page", `document.querySelector("#thread-id")`)
	if got := ui.text("main"); strings.Contains(got, "th_ada") {
		t.Errorf("bob's threads page lists ada's threads: %s", got)
	}
	ui.shot("signed-in-as-another-user")

	// bob signs out and in again with a short session, on his thread.
	ui.click("#who button")
	ui.wait("the sign-in form after the sign-out", `document.querySelector("main #token")`)
	ui.open("/threads/th_bob")
	ui.signIn(token("bob", shortLife))
	ui.wait("bob's messages", `document.querySelectorAll("#messages .msg").length === 3`)
	ui.wait("the sign-in form when bob's session ends", `document.querySelector("main #token")`)
	ui.signIn(ada)
	ui.wait("ada's first page", `location.pathname === "/" && document.querySelectorAll(".cards .card").length === 4`)
	if got := ui.text("body"); strings.Contains(got, "th_bob") || strings.Contains(got, "message 1 of") || !strings.Contains(got, "No thread opened in this browser yet.") {
		t.Errorf("ada, signed in where bob's session ended, is shown: %s", got)
	}
	if who := ui.text("#who"); !strings.Contains(who, "ada") {
		t.Errorf("the page says it is signed in as %q, want ada", who)
	}

	// ada signs out in another tab: this one forgets her page too.
	ui.open("/threads/th_ada")
	ui.wait("ada's messages", `document.querySelectorAll("#messages .msg").length === 3`)
	tab, closeTab := chromedp.NewContext(ui.ctx)
	defer closeTab()
	// The tab's first call opens it, for the life of that call's context.
	if err := chromedp.Do(tab, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("open another tab: %v", err)
	}
	other := &uiPage{t: t, ctx: tab, base: ui.base, shots: ui.shots, allow: ui.allow}
	other.open("/")
	other.click("#who button")
	other.wait("the sign-in form after the sign-out", `document.querySelector("main #token")`)
	ui.wait("the sign-in form in the first tab", `document.querySelector("main #token") && !document.querySelector("#messages") && location.pathname === "/"`)
	if got := ui.text("body"); strings.Contains(got, "th_ada") || strings.Contains(got, "message 1 of") {
		t.Errorf("after ada signed out in another tab, this one shows: %s", got)
	}
}
