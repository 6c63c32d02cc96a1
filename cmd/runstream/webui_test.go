package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// uiPage is a headless Chromium tab on a serve process's web UI. It
// collects the console's errors and exceptions; the test fails on any that
// allow does not excuse. A failing test logs the tab's network and console
// trace (traceBrowser).
type uiPage struct {
	t     *testing.T
	ctx   context.Context
	base  string
	shots string

	mu    sync.Mutex
	errs  []string
	allow func(chromedp.ConsoleMessage) bool
}

// screenshotDir is where the UI tests save their screenshots:
// $RUNSTREAM_SCREENSHOTS when set, else the test's artifact directory.
func screenshotDir(t *testing.T) string {
	if dir := os.Getenv("RUNSTREAM_SCREENSHOTS"); dir != "" {
		dir = filepath.Join(dir, t.Name())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.ArtifactDir()
}

func openUI(t *testing.T, base string, opts ...chromedp.ExecAllocatorOption) *uiPage {
	t.Helper()
	exe := chromiumPath(t)
	options := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1200, 900),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(options, opts...)...)
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	p := &uiPage{t: t, ctx: browser, base: base, shots: screenshotDir(t), allow: func(chromedp.ConsoleMessage) bool { return false }}
	t.Cleanup(func() {
		cancelBrowser()
		cancelAlloc()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, e := range p.errs {
			t.Errorf("console: %s", e)
		}
	})
	// The first call starts the browser, whose life is that call's
	// context: no timeout on it.
	if err := chromedp.Do(browser, chromedp.Navigate("about:blank"), chromedp.WaitReady("body")); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	traceBrowser(t, browser)
	messages := chromedp.Console(browser)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type != chromedp.ConsoleError && m.Type != chromedp.ConsoleException {
				continue
			}
			p.mu.Lock()
			if !p.allow(m) {
				p.errs = append(p.errs, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line))
			}
			p.mu.Unlock()
		}
	}()
	return p
}

// open loads a page of the UI and waits for its module to render.
func (p *uiPage) open(path string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(p.base+path), chromedp.WaitReady("body")); err != nil {
		p.t.Fatalf("open %s: %v", path, err)
	}
	p.wait("the page "+path+" to render", `!document.querySelector("main").textContent.includes("Loading…")`)
}

func (p *uiPage) eval(expr string, v any) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](expr, chromedp.EvalAwaitPromise))
	if err == nil && v != nil {
		err = json.Unmarshal(raw, v)
	}
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
}

// wait polls expr until it is truthy.
func (p *uiPage) wait(what, expr string) {
	p.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var ok bool
		p.eval(`!!(`+expr+`)`, &ok)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var text string
			p.eval(`document.querySelector("main").innerText.slice(0, 2000)`, &text)
			p.t.Fatalf("timed out waiting for %s (%s); the page shows:\n%s", what, expr, text)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// click clicks the element of a CSS selector.
func (p *uiPage) click(sel string) {
	p.t.Helper()
	p.wait(sel, `document.querySelector(`+strconv.Quote(sel)+`)`)
	p.eval(`document.querySelector(`+strconv.Quote(sel)+`).click(), true`, nil)
}

// set sets the value of a form field as typing would.
func (p *uiPage) set(sel, value string) {
	p.t.Helper()
	p.wait(sel, `document.querySelector(`+strconv.Quote(sel)+`)`)
	p.eval(`(() => { const el = document.querySelector(`+strconv.Quote(sel)+`); el.value = `+strconv.Quote(value)+`; el.dispatchEvent(new Event("input", {bubbles: true})); el.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`, nil)
}

func (p *uiPage) text(sel string) string {
	p.t.Helper()
	var s string
	p.eval(`(document.querySelector(`+strconv.Quote(sel)+`) || {}).textContent || ""`, &s)
	return s
}

// checkLabels fails the test for a form field without a label and for a
// button or link without a name, on the page as it is.
func (p *uiPage) checkLabels(page string) {
	p.t.Helper()
	var unnamed []string
	p.eval(`[...document.querySelectorAll("input, select, textarea, button, a[href]")].filter(e => {
		if (e.closest("[hidden]")) return false;
		if (e.matches("input, select, textarea")) return !(e.labels && e.labels.length) && !e.getAttribute("aria-label");
		return !(e.getAttribute("aria-label") || e.textContent.trim());
	}).map(e => e.outerHTML.slice(0, 120))`, &unnamed)
	for _, u := range unnamed {
		p.t.Errorf("%s: no label or name: %s", page, u)
	}
}

// shot saves a screenshot of the whole page as name.png.
func (p *uiPage) shot(name string) { p.t.Helper(); p.screenshot(name, chromedp.FullScreenshot(100)) }

// shotViewport saves a screenshot of what the viewport shows.
func (p *uiPage) shotViewport(name string) {
	p.t.Helper()
	p.screenshot(name, chromedp.CaptureScreenshot())
}

func (p *uiPage) screenshot(name string, action chromedp.Action[[]byte]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, action)
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(p.shots, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot %s", path)
}

// apiCall calls the API of base with a JSON body and decodes the answer.
func apiCall(t *testing.T, method, url, ctype, body string, want int, v any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, url, resp.StatusCode, b, want)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
	}
}

// uiApproval is the approval example with an artifact on its decision
// and a slower draft, so that the page sees many deltas: about 2 s of
// them, so that a page drawn late on a loaded machine still shows the
// draft in part first (the page draws once per animation frame, several
// deltas at a time).
const uiApproval = `name: ui-approval
description: Draft, approve, record the decision as an artifact.
inputSchema:
  type: object
  required: [customer, topic]
  properties:
    customer: {type: string, minLength: 1}
    topic: {type: string, enum: [a broken kettle, a late parcel]}
    urgent: {type: boolean}
    copies: {type: integer, minimum: 1}
    tags: {type: array, items: {type: string}}
    contact:
      type: object
      properties:
        email: {type: string}
nodes:
  - id: draft
    type: llm
    config:
      provider: scripted
      tokensPerSecond: 10
      text: >-
        Dear {{ input.customer }}, thank you for writing to us about
        {{ input.topic }}. We will ship a replacement today.
  - id: approval
    type: human_input
    needs: [draft]
    config:
      actions: [approve, reject]
      formSchema:
        type: object
        properties:
          note: {type: string, maxLength: 200}
        additionalProperties: false
  - id: decision
    type: transform
    needs: [draft, approval]
    artifact: {name: decision.json, mimeType: application/json}
    config:
      expression: >-
        {"approved": nodes.approval.output.action == "approve",
         "note": nodes.approval.output.values.note ?? "",
         "reply": nodes.draft.output.text}
output: decision
`

const uiDraft = "Dear Ada, thank you for writing to us about a late parcel. We will ship a replacement today."

// From the browser: publish a workflow (after a definition error shown at
// its node), run it from the generated form, watch the draft stream in,
// approve it in the resume form, and download the run's artifact.
func TestWebUIPublishRunApprove(t *testing.T) {
	p := runServe(t, nil, "--store", "memory:")
	ui := openUI(t, p.base)

	ui.open("/")
	ui.wait("the examples", `document.querySelectorAll(".cards .card").length === 4`)
	ui.shot("home")

	// The refused definition is the one error the browser logs.
	ui.mu.Lock()
	ui.allow = func(m chromedp.ConsoleMessage) bool {
		return m.Source == "network" && strings.Contains(m.Text, "status of 422") && strings.HasSuffix(m.URL, "/api/workflows")
	}
	ui.mu.Unlock()
	ui.open("/workflows")
	ui.set("#definition", strings.Replace(uiApproval, "needs: [draft, approval]", "needs: [draft, nowhere]", 1))
	ui.click(`form button[type=submit]`)
	ui.wait("the definition error at its node", `document.querySelector("#def-error-node")`)
	if got := ui.text("#def-error-node"); !strings.Contains(got, "decision") || !strings.Contains(got, "line ") {
		t.Errorf("the error names %q, want the node decision and its line", got)
	}
	ui.shot("workflows-definition-error")
	ui.set("#definition", uiApproval)
	ui.click(`form button[type=submit]`)
	ui.wait("the published workflow", `location.pathname.startsWith("/workflows/wf") || document.querySelector("h1").textContent === "ui-approval"`)
	ui.click(`main > p > button.primary`)
	ui.wait("the run form", `document.querySelector("#run-form")`)
	ui.shot("workflow-run-form")
	ui.checkLabels("the run form")
	var fields []string
	ui.eval(`[...document.querySelectorAll("#run-form [name]")].map(e => e.name + ":" + (e.type || e.tagName))`, &fields)
	if got := strings.Join(fields, " "); got != "contact.email:text copies:number customer:text tags:textarea topic:select-one urgent:checkbox" {
		t.Errorf("the run form has fields %s", got)
	}
	ui.set(`#run-form [name=customer]`, "Ada")
	ui.eval(`(() => { const s = document.querySelector('#run-form [name=topic]'); s.value = [...s.options].find(o => o.text === "a late parcel").value; return true; })()`, nil)
	ui.set(`#run-form [name=tags]`, "kettle\nparcel")
	ui.click(`#run-form button[type=submit]`)
	ui.wait("the run page", `location.pathname.startsWith("/runs/")`)

	// The draft streams in: several deltas, the text growing.
	ui.wait("the first delta", `document.querySelector('pre.out[data-node="draft"]')`)
	first := ui.text(`pre.out[data-node="draft"]`)
	ui.shot("run-streaming")
	ui.wait("the approval form", `document.querySelector("#resume-form")`)
	var deltas int
	ui.eval(`window.runstreamRun.events.filter(e => e.event === "node.output.delta").length`, &deltas)
	if deltas < 2 || len(first) >= len(uiDraft) {
		t.Errorf("%d deltas, first seen text %q: want the text to arrive in pieces", deltas, first)
	}
	if got := ui.text(`pre.out[data-node="draft"]`); got != uiDraft {
		t.Errorf("draft = %q, want %q", got, uiDraft)
	}
	var state string
	ui.eval(`document.querySelector('#dag [data-node="approval"]').dataset.state`, &state)
	if state != "awaiting_input" {
		t.Errorf("the DAG shows approval %s, want awaiting_input", state)
	}
	ui.shot("run-awaiting-input")
	ui.checkLabels("the run page")
	ui.set(`#resume-form [name=note]`, "fine by me")
	ui.click(`#resume-form button[data-action=approve]`)
	ui.wait("the run to complete", `document.querySelector("#run-status").textContent === "completed"`)
	ui.wait("the artifact link", `document.querySelector('a[download="decision.json"]')`)
	var artifact struct {
		Status int
		Body   string
	}
	ui.eval(`fetch(document.querySelector('a[download="decision.json"]').href).then(async r => ({status: r.status, body: await r.text()}))`, &artifact)
	if artifact.Status != 200 || !strings.Contains(artifact.Body, `"note":"fine by me"`) || !strings.Contains(artifact.Body, `"approved":true`) {
		t.Errorf("artifact download: %d %s", artifact.Status, artifact.Body)
	}
	var states []string
	ui.eval(`[...document.querySelectorAll("#dag [data-node]")].map(g => g.dataset.node + "=" + g.dataset.state)`, &states)
	if got := strings.Join(states, " "); got != "draft=completed approval=completed decision=completed" {
		t.Errorf("DAG states %s", got)
	}
	ui.shot("run-completed")
	ui.click("#t-log")
	ui.wait("the event log", `!document.querySelector("#tab-log").hidden && document.querySelectorAll("#event-log tbody tr").length > 5`)
	ui.shot("run-event-log")

	ui.open("/runs")
	ui.wait("the runs table", `document.querySelector("main table .badge.s-completed")`)
	ui.checkLabels("the runs page")
	ui.shot("runs")
	// The status filter: no failed run, then the completed one again.
	ui.eval(`(() => { const s = document.querySelector("#f-status"); s.value = "failed"; s.dispatchEvent(new Event("change")); return true; })()`, nil)
	ui.wait("no failed run", `location.search === "?status=failed" && document.querySelector("main").textContent.includes("No run matches the filters.")`)
	ui.eval(`(() => { const s = document.querySelector("#f-status"); s.value = "completed"; s.dispatchEvent(new Event("change")); return true; })()`, nil)
	ui.wait("the completed run", `location.search === "?status=completed" && document.querySelectorAll("main tbody tr").length === 1`)
	// The first page's recent runs name their workflow, as /runs does.
	ui.open("/")
	ui.wait("the recent run's workflow name", `[...document.querySelectorAll("main tbody tr td a")].some(a => a.textContent === "ui-approval")`)
}

// A long run started with one click on the first page is cancelled from
// its page while its progress bars move.
func TestWebUICancelLongRun(t *testing.T) {
	p := runServe(t, nil, "--store", "memory:")
	ui := openUI(t, p.base)
	ui.open("/")
	ui.click(`button[aria-label="Run example long"]`)
	ui.wait("the run page", `location.pathname.startsWith("/runs/")`)
	ui.wait("a progress bar", `document.querySelector('#node-crunch [role=progressbar]')`)
	ui.shot("run-long-progress")
	ui.click("#cancel")
	ui.wait("the cancelled run", `document.querySelector("#run-status").textContent === "cancelled"`)
	var state string
	ui.eval(`document.querySelector('#dag [data-node="crunch"]').dataset.state`, &state)
	if state != "cancelled" {
		t.Errorf("crunch is %s, want cancelled", state)
	}
	ui.shot("run-long-cancelled")
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// The server stops while a run's page follows its streaming draft and
// starts again on the same address: the page shows that it reconnects,
// resumes with Last-Event-ID, applies every event exactly once, and shows
// the draft text once (an attempt cut short by the stop keeps its text
// apart, folded).
func TestWebUIResumesAfterRestart(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "rs.db")
	addr := freeAddr(t)
	p := runServe(t, nil, "--store", db, "--addr", addr)
	var wf struct{ WorkflowID string }
	apiCall(t, "POST", p.base+"/api/workflows", "application/yaml", strings.Replace(uiApproval, "tokensPerSecond: 10", "tokensPerSecond: 3", 1), 201, &wf)
	var run struct{ RunID string }
	apiCall(t, "POST", p.base+"/api/workflows/"+wf.WorkflowID+"/runs", "application/json", `{"input":{"customer":"Ada","topic":"a late parcel"}}`, 201, &run)

	ui := openUI(t, p.base)
	// While the server is away, the browser logs its refused connections,
	// and a request it sent as the stopping server closed its connection
	// gets no answer.
	ui.mu.Lock()
	ui.allow = restartErrors
	ui.mu.Unlock()
	ui.open("/runs/" + run.RunID)
	ui.wait("some of the draft", `document.querySelector('pre.out[data-node="draft"]')`)
	before := ui.text(`pre.out[data-node="draft"]`)
	stopping := time.Now()
	if err := p.stop(); err != nil {
		t.Fatalf("stop serve: %v", err)
	}
	t.Logf("serve stopped in %v", time.Since(stopping).Round(time.Millisecond))
	ui.wait("the reconnecting state", `document.querySelector("#reconnecting")`)
	ui.shot("run-reconnecting")
	time.Sleep(500 * time.Millisecond)
	runServe(t, nil, "--store", db, "--addr", addr)
	ui.wait("the stream back", `!document.querySelector("#reconnecting")`)
	ui.wait("the approval form", `document.querySelector("#resume-form")`)
	var seqs []int
	ui.eval(`window.runstreamRun.events.map(e => e.seq)`, &seqs)
	for i, s := range seqs {
		if s != i+1 {
			t.Fatalf("the page applied seqs %v, want 1, 2, 3… each once", seqs)
		}
	}
	var lastSeq struct{ LastSeq int }
	apiCall(t, "GET", "http://"+addr+"/api/workflows/runs/"+run.RunID, "", "", 200, &lastSeq)
	if len(seqs) != lastSeq.LastSeq {
		t.Errorf("the page applied %d events, the run has %d", len(seqs), lastSeq.LastSeq)
	}
	var drafts []string
	ui.eval(`[...document.querySelectorAll('pre.out[data-node="draft"]')].map(e => e.textContent)`, &drafts)
	if len(drafts) != 1 || drafts[0] != uiDraft {
		t.Errorf("the page shows the draft %q, want %q once (before the stop it had %q)", drafts, uiDraft, before)
	}
	t.Logf("before the stop the page had %d of the draft's %d characters", len(before), len(uiDraft))
	ui.shot("run-resumed-after-restart")
	ui.click(`#resume-form button[data-action=reject]`)
	ui.wait("the run to complete", `document.querySelector("#run-status").textContent === "completed"`)
}

// A server stopped while a run's node would outlast its shutdown timeout
// interrupts the node; the page following the run shows the interrupted
// attempt as such (not as a failure) and the node's next attempt on the
// restarted server, which completes the run.
func TestWebUIInterruptedAttempt(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "rs.db")
	addr := freeAddr(t)
	// A POST that never answers: the node that sends it may not run
	// twice, so its interrupted attempt fails it.
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hang.Close()
	args := []string{"--store", db, "--addr", addr, "--shutdown-timeout", "2s", "--http-node-allow", "127.0.0.0/8"}
	p := runServe(t, nil, args...)
	var wf, post struct{ WorkflowID string }
	apiCall(t, "POST", p.base+"/api/workflows", "application/json", `{"name":"long","nodes":[{"id":"wait","type":"delay","config":{"ms":3000,"progressEveryMs":200}}],"output":"wait"}`, 201, &wf)
	apiCall(t, "POST", p.base+"/api/workflows", "application/json", `{"name":"post","nodes":[{"id":"send","type":"http","config":{"method":"POST","url":"`+hang.URL+`/orders"}}]}`, 201, &post)
	var run, postRun struct{ RunID string }
	apiCall(t, "POST", p.base+"/api/workflows/"+wf.WorkflowID+"/runs", "application/json", `{"input":{}}`, 201, &run)
	apiCall(t, "POST", p.base+"/api/workflows/"+post.WorkflowID+"/runs", "application/json", `{"input":{}}`, 201, &postRun)

	ui := openUI(t, p.base)
	ui.mu.Lock()
	ui.allow = restartErrors
	ui.mu.Unlock()
	ui.open("/runs/" + run.RunID)
	ui.wait("the node running", `window.runstreamRun.nodes.get("wait")?.state === "running"`)
	if err := p.stop(); err != nil {
		t.Fatalf("stop serve: %v", err)
	}
	runServe(t, nil, args...)
	ui.wait("the run to complete", `document.querySelector("#run-status").textContent === "completed"`)
	var note string
	ui.eval(`document.querySelector("#node-wait .note")?.textContent ?? ""`, &note)
	if !strings.Contains(note, "Attempt 1 was interrupted by a server shutdown; the node starts again.") {
		t.Errorf("the node's card says %q about its first attempt", note)
	}
	var errs, bars []string
	ui.eval(`[...document.querySelectorAll("#node-wait .error")].map(e => e.textContent)`, &errs)
	if len(errs) != 0 {
		t.Errorf("the node's card shows errors %q", errs)
	}
	ui.eval(`window.runstreamRun.nodes.get("wait").attempts.map(a => a.state)`, &bars)
	if !slices.Equal(bars, []string{"interrupted", "completed"}) {
		t.Errorf("the timeline's attempts are %v, want interrupted, then completed", bars)
	}
	ui.shot("run-interrupted-attempt")

	// The run failed before the page opened: its status shows "failed"
	// from the start, and its events arrive after. The run's error box
	// shows once the page has applied run.failed, and so the events before.
	ui.open("/runs/" + postRun.RunID)
	ui.wait("the POST's run to have failed", `document.querySelector("#run-error")`)
	ui.eval(`[...document.querySelectorAll("#node-send .error")].map(e => e.textContent)`, &errs)
	if len(errs) != 1 || !strings.Contains(errs[0], "Attempt 1 was interrupted by a server shutdown, and the node may not run again") {
		t.Errorf("the POST node's card shows errors %q", errs)
	}
}

// seedThread writes a thread through the ingest API: 45 messages, two
// subagents, a workspace change set and the run's token usage.
func seedThread(t *testing.T, base, thread, run string) {
	t.Helper()
	tbase := base + "/api/threads/" + thread + "/runs/" + run
	apiCall(t, "PUT", tbase, "application/json", `{"status":"running","model_name":"gpt-test","total_input_tokens":1200,"total_output_tokens":300,"total_tokens":1500,"llm_call_count":3,"lead_agent_tokens":900,"subagent_tokens":500,"middleware_tokens":100,"token_usage_by_model":{"gpt-test":{"input_tokens":1000,"output_tokens":250,"total_tokens":1250},"small-model":{"input_tokens":200,"output_tokens":50,"total_tokens":250}}}`, 200, nil)
	post := func(events ...string) {
		t.Helper()
		apiCall(t, "POST", tbase+"/events", "application/json", `{"events":[`+strings.Join(events, ",")+`]}`, 201, nil)
	}
	var msgs []string
	for i := 1; i <= 45; i++ {
		if i%2 == 1 {
			msgs = append(msgs, fmt.Sprintf(`{"event_type":"llm.human.input","content":{"type":"human","content":"message %d from the human"},"metadata":{"caller":"lead_agent"}}`, i))
		} else {
			msgs = append(msgs, fmt.Sprintf(`{"event_type":"llm.ai.response","content":{"type":"ai","content":"message %d from the **AI**","tool_calls":[{"id":"call_%d","name":"search","args":{"q":"kettles"}}]},"metadata":{"caller":"lead_agent","usage":{"total_tokens":10},"latency_ms":5,"llm_call_index":%d}}`, i, i, i))
		}
	}
	post(msgs...)
	post(
		`{"event_type":"subagent.start","content":{"task_id":"task_a","description":"Find the manual"},"metadata":{"task_id":"task_a"}}`,
		`{"event_type":"subagent.start","content":{"task_id":"task_b","description":"Compare prices"},"metadata":{"task_id":"task_b"}}`,
		`{"event_type":"subagent.step","content":{"task_id":"task_a","message_index":0,"kind":"ai","text":"a looks for the manual","truncated":false,"tool_calls":[]},"metadata":{"task_id":"task_a","message_index":0}}`,
		`{"event_type":"subagent.step","content":{"task_id":"task_b","message_index":0,"kind":"ai","text":"b compares shop one","truncated":false,"tool_calls":[{"name":"shop","args":{"n":2}}]},"metadata":{"task_id":"task_b","message_index":0}}`,
		`{"event_type":"subagent.step","content":{"task_id":"task_b","message_index":1,"kind":"tool","text":"b compares shop two","truncated":false,"tool_name":"shop"},"metadata":{"task_id":"task_b","message_index":1}}`,
		`{"event_type":"subagent.step","content":{"task_id":"task_a","message_index":1,"kind":"ai","text":"a found it","truncated":false,"tool_calls":[]},"metadata":{"task_id":"task_a","message_index":1}}`,
		`{"event_type":"subagent.end","content":{"task_id":"task_a","status":"completed"},"metadata":{"task_id":"task_a"}}`,
		`{"event_type":"workspace_changes","content":"2 files changed","metadata":{"workspace_changes":{"version":1,"summary":{"created":1,"modified":1,"deleted":0,"symlink_created":0,"additions":3,"deletions":1,"truncated":false},"limits":{"max_files":200,"max_scanned_files":5000,"max_file_bytes_for_diff":262144,"max_total_diff_bytes":1048576},"files":[`+
			wsFile("report.md", "created", "null", "24", 2, 0, `@@ -0,0 +1,2 @@\n+# Report\n+kettles are fine`)+`,`+
			wsFile("src/main.go", "modified", "300", "300", 1, 1, `@@ -1,3 +1,3 @@\n package main\n-var x = 1\n+var x = 2\n`)+`]}}}`,
	)
}

// wsFile is one file of a workspace_changes record.
func wsFile(path, status, before, after string, adds, dels int, diff string) string {
	return fmt.Sprintf(`{"path":%q,"root":"workspace","status":%q,"binary":false,"sensitive":false,"size_before":%s,"size_after":%s,"sha256_before":null,"sha256_after":null,"diff":"%s","diff_truncated":false,"diff_unavailable_reason":null,"additions":%d,"deletions":%d,"symlink":false,"symlink_target_before":null,"symlink_target_after":null}`,
		path, status, before, after, diff, adds, dels)
}

// A thread seeded through the ingest API: page back to its first message,
// open a subagent, filter the run events by task, read a workspace diff
// and the token usage, and see a new message arrive live, once.
func TestWebUIThread(t *testing.T) {
	p := runServe(t, nil, "--store", "memory:")
	seedThread(t, p.base, "th_ui", "tr_1")
	// An older run of the thread: the run list is newest first, and the
	// page follows the newest run.
	apiCall(t, "PUT", p.base+"/api/threads/th_ui/runs/tr_0", "application/json", `{"status":"success","model_name":"gpt-test","created_at":"2020-01-01T00:00:00Z"}`, 200, nil)
	ui := openUI(t, p.base)
	ui.open("/threads/th_ui")
	ui.wait("the latest messages", `document.querySelectorAll("#messages .msg").length === 20`)
	ui.wait("the runs", `document.querySelectorAll("#run-select option").length === 2`)
	var runs []string
	ui.eval(`[...document.querySelectorAll("#run-select option")].map(o => o.value).concat(document.querySelector("#run-select").value)`, &runs)
	if got := strings.Join(runs, " "); got != "tr_1 tr_0 tr_1" {
		t.Errorf("run options and the selected run: %s; want tr_1 tr_0, tr_1 selected", got)
	}
	ui.wait("the workspace", `document.querySelector('#workspace [data-path="src/main.go"]')`)
	ui.shot("thread")
	for i := 0; i < 5; i++ {
		var hidden bool
		ui.eval(`document.querySelector("#load-older").hidden`, &hidden)
		if hidden {
			break
		}
		var n int
		ui.eval(`document.querySelectorAll("#messages .msg").length`, &n)
		ui.click("#load-older")
		ui.wait("older messages", `document.querySelectorAll("#messages .msg").length > `+strconv.Itoa(n)+` || document.querySelector("#load-older").hidden`)
	}
	var texts []string
	ui.eval(`[...document.querySelectorAll("#messages .msg .text")].map(e => e.textContent)`, &texts)
	if len(texts) != 45 || texts[0] != "message 1 from the human" || texts[44] != "message 45 from the human" || texts[1] != "message 2 from the **AI**" {
		t.Fatalf("%d messages, first %q: want 45 from message 1", len(texts), texts[:min(2, len(texts))])
	}
	var folded int
	ui.eval(`document.querySelectorAll("#messages .msg.ai details").length`, &folded)
	if folded != 22 {
		t.Errorf("%d folded tool calls, want 22", folded)
	}

	// Subagents: a card per task, its steps loaded when opened.
	ui.wait("two subagent cards", `document.querySelectorAll("#subagents [data-task]").length === 2`)
	ui.eval(`document.querySelector('#subagents [data-task="task_b"]').open = true`, nil)
	ui.wait("task_b's steps", `document.querySelectorAll('#subagents [data-task="task_b"] li').length === 2`)
	// The run events filtered to task_b's steps.
	ui.set("#ev-types", "subagent.step")
	ui.set("#ev-task", "task_b")
	ui.click(`#ev-filter button[type=submit]`)
	ui.wait("the filtered events", `document.querySelectorAll("#run-events tbody tr").length === 2`)
	var rows []string
	ui.eval(`[...document.querySelectorAll("#run-events tbody tr")].map(r => r.cells[1].textContent + "/" + r.cells[3].textContent)`, &rows)
	if got := strings.Join(rows, " "); got != "subagent.step/task_b subagent.step/task_b" {
		t.Errorf("filtered rows %s", got)
	}
	// The workspace diff, coloured.
	ui.eval(`document.querySelector('#workspace [data-path="src/main.go"]').open = true`, nil)
	var diff struct{ Add, Del, Hunk int }
	ui.eval(`(() => { const d = document.querySelector('#workspace [data-path="src/main.go"] .diff'); return {add: d.querySelectorAll(".add").length, del: d.querySelectorAll(".del").length, hunk: d.querySelectorAll(".hunk").length}; })()`, &diff)
	if diff != (struct{ Add, Del, Hunk int }{1, 1, 1}) {
		t.Errorf("diff lines %+v", diff)
	}
	var bars []string
	ui.eval(`[...document.querySelectorAll("#usage .bars th")].map(e => e.textContent)`, &bars)
	if got := strings.Join(bars, " "); got != "gpt-test small-model lead_agent subagent middleware" {
		t.Errorf("usage bars %s", got)
	}
	ui.shot("thread-reviewed")
	ui.checkLabels("the thread page")

	// Live: a new message appears once. A later one, which the stream
	// delivers after it, shows when the page has applied all it will of
	// the first (a condition, not a pause).
	for _, text := range []string{"a live message", "a later message"} {
		apiCall(t, "POST", p.base+"/api/threads/th_ui/runs/tr_1/events", "application/json", `{"events":[{"event_type":"llm.human.input","content":{"type":"human","content":"`+text+`"},"metadata":{"caller":"lead_agent"}}]}`, 201, nil)
	}
	ui.wait("the later live message", `[...document.querySelectorAll("#messages .msg .text")].some(e => e.textContent === "a later message")`)
	var n int
	ui.eval(`[...document.querySelectorAll("#messages .msg .text")].filter(e => e.textContent === "a live message").length + document.querySelectorAll("#messages .msg").length * 1000`, &n)
	if n != 47*1000+1 {
		t.Errorf("after the live messages: %d messages, %d copies of the first; want 47 and 1", n/1000, n%1000)
	}

	// At 360 px the page has no horizontal scrolling.
	ctx, cancel := context.WithTimeout(ui.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(360, 800)); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/threads/th_ui", "/", "/runs", "/workflows"} {
		ui.open(path)
		time.Sleep(300 * time.Millisecond)
		var width int
		ui.eval(`document.documentElement.scrollWidth`, &width)
		if width > 360 {
			t.Errorf("%s is %d px wide at a 360 px viewport", path, width)
		}
	}
	ui.open("/threads/th_ui")
	ui.wait("the workspace", `document.querySelector('#workspace [data-path="src/main.go"]')`)
	ui.shotViewport("thread-360px")
	ui.eval(`document.querySelector("#workspace").scrollIntoView(), true`, nil)
	ui.shotViewport("thread-360px-workspace")
}

// In a dark colour scheme the UI uses its dark palette.
func TestWebUIDarkScheme(t *testing.T) {
	p := runServe(t, nil, "--store", "memory:")
	seedThread(t, p.base, "th_dark", "tr_1")
	ui := openUI(t, p.base, chromedp.Flag("force-dark-mode", true), chromedp.Flag("blink-settings", "preferredColorScheme=0"))
	ui.open("/")
	var dark bool
	ui.eval(`matchMedia("(prefers-color-scheme: dark)").matches`, &dark)
	if !dark {
		t.Skip("this Chromium ignores --force-dark-mode: no dark scheme to check")
	}
	var bg string
	ui.eval(`getComputedStyle(document.body).backgroundColor`, &bg)
	if bg != "rgb(13, 17, 23)" {
		t.Errorf("dark body background %s", bg)
	}
	ui.shot("home-dark")
	ui.open("/threads/th_dark")
	ui.wait("the workspace", `document.querySelector('#workspace [data-path="src/main.go"]')`)
	ui.eval(`document.querySelector('#workspace [data-path="src/main.go"]').open = true; document.querySelector("#workspace").scrollIntoView(); true`, nil)
	ui.shotViewport("thread-dark-workspace")
}

// Behind --auth token the first page asks for a token, which it exchanges
// for the session cookie; the UI then works with the cookie alone.
func TestWebUISignIn(t *testing.T) {
	const key = "ui-secret-key-0123456789"
	sum := sha256.Sum256([]byte(key))
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("ada sha256:"+hex.EncodeToString(sum[:])+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := runServe(t, nil, "--store", "memory:", "--auth", "token", "--api-keys-file", keys)
	ui := openUI(t, p.base)
	// The page learns that it must sign in from the API's 401s.
	ui.mu.Lock()
	ui.allow = func(m chromedp.ConsoleMessage) bool {
		return m.Source == "network" && strings.Contains(m.Text, "status of 401")
	}
	ui.mu.Unlock()
	ui.open("/")
	ui.wait("the sign-in form", `document.querySelector("#token")`)
	ui.set("#token", "wrong")
	ui.click(`form button[type=submit]`)
	ui.wait("the refusal", `document.querySelector("main .error")`)
	ui.shot("sign-in-refused")
	ui.set("#token", key)
	ui.click(`form button[type=submit]`)
	ui.wait("the first page", `document.querySelectorAll(".cards .card").length === 4`)
	var cookie string
	ui.eval(`document.cookie`, &cookie)
	if cookie != "" {
		t.Errorf("the page can read a cookie %q: the session cookie must be HttpOnly", cookie)
	}
	ui.click(`button[aria-label="Run example long"]`)
	ui.wait("the run page", `location.pathname.startsWith("/runs/") && document.querySelector('#node-warmup')`)
	ui.click("#cancel")
	ui.wait("the cancelled run", `document.querySelector("#run-status").textContent === "cancelled"`)
}

// restartErrors allows what the browser logs while the server restarts:
// its port refuses connections while it is down, and a request sent on a
// kept-alive connection as the stopping server closed it gets no answer.
// Neither is the page's fault; it reconnects its streams.
func restartErrors(m chromedp.ConsoleMessage) bool {
	return m.Source == "network" && (strings.Contains(m.Text, "ERR_CONNECTION_REFUSED") || strings.Contains(m.Text, "ERR_EMPTY_RESPONSE"))
}

// A thread page follows the thread's stream across a server restart:
// rows written before and after it appear once each.
func TestWebUIThreadResumesAfterRestart(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "rs.db")
	addr := freeAddr(t)
	p := runServe(t, nil, "--store", db, "--addr", addr)
	seedThread(t, p.base, "th_live", "tr_1")
	ui := openUI(t, p.base)
	ui.mu.Lock()
	ui.allow = restartErrors
	ui.mu.Unlock()
	ui.open("/threads/th_live")
	ui.wait("the latest messages", `document.querySelectorAll("#messages .msg").length === 20`)
	say := func(text string) {
		t.Helper()
		apiCall(t, "POST", "http://"+addr+"/api/threads/th_live/runs/tr_1/events", "application/json",
			`{"events":[{"event_type":"llm.human.input","content":{"type":"human","content":`+strconv.Quote(text)+`},"metadata":{"caller":"lead_agent"}}]}`, 201, nil)
	}
	say("before the restart")
	ui.wait("the first live message", `[...document.querySelectorAll("#messages .msg .text")].some(e => e.textContent === "before the restart")`)
	if err := p.stop(); err != nil {
		t.Fatalf("stop serve: %v", err)
	}
	ui.wait("the reconnecting state", `document.querySelector("#reconnecting")`)
	ui.shot("thread-reconnecting")
	runServe(t, nil, "--store", db, "--addr", addr)
	say("after the restart")
	ui.wait("the second live message", `[...document.querySelectorAll("#messages .msg .text")].some(e => e.textContent === "after the restart")`)
	ui.wait("the stream back", `!document.querySelector("#reconnecting")`)
	// A last message, written once the stream is back: when it shows,
	// the page has applied what it will of the messages before it.
	say("the last message")
	ui.wait("the last live message", `[...document.querySelectorAll("#messages .msg .text")].some(e => e.textContent === "the last message")`)
	var seqs []int
	ui.eval(`[...document.querySelectorAll("#messages .msg")].map(e => Number(e.dataset.seq))`, &seqs)
	if len(seqs) != 23 {
		t.Errorf("%d messages shown, want 20 + 3: seqs %v", len(seqs), seqs)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Errorf("messages out of order or repeated: seqs %v", seqs)
			break
		}
	}
	ui.shot("thread-after-restart")
}

// The runs table pages back and forth by the API's cursor.
func TestWebUIRunsPaging(t *testing.T) {
	p := runServe(t, nil, "--store", "memory:")
	var wf struct{ WorkflowID string }
	apiCall(t, "POST", p.base+"/api/workflows", "application/yaml", "name: quick\nnodes:\n  - id: only\n    type: transform\n    config: {expression: '1'}\n", 201, &wf)
	for i := 0; i < 23; i++ {
		apiCall(t, "POST", p.base+"/api/workflows/"+wf.WorkflowID+"/runs", "application/json", `{}`, 201, nil)
	}
	ui := openUI(t, p.base)
	ui.open("/runs")
	ui.wait("the first page", `document.querySelectorAll("main tbody tr").length === 20`)
	var first []string
	ui.eval(`[...document.querySelectorAll("main tbody tr td:first-child")].map(e => e.textContent)`, &first)
	ui.click(`main button:nth-of-type(2)`)
	ui.wait("the second page", `document.querySelectorAll("main tbody tr").length === 3 && document.querySelector("main").textContent.includes("Page 2")`)
	var second []string
	ui.eval(`[...document.querySelectorAll("main tbody tr td:first-child")].map(e => e.textContent)`, &second)
	seen := map[string]bool{}
	for _, id := range append(first, second...) {
		if seen[id] {
			t.Errorf("run %s on both pages", id)
		}
		seen[id] = true
	}
	ui.shot("runs-page-2")
	ui.click(`main button:nth-of-type(1)`)
	ui.wait("the first page again", `document.querySelectorAll("main tbody tr").length === 20 && document.querySelector("main").textContent.includes("Page 1")`)
}

// The run page shows a node's tool calls, folded, with their input and
// output.
func TestWebUIToolCalls(t *testing.T) {
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "the tool page says tea")
	}))
	t.Cleanup(page.Close)
	p := runServe(t, nil, "--store", "memory:", "--http-node-allow", "127.0.0.0/8")
	var wf struct{ WorkflowID string }
	apiCall(t, "POST", p.base+"/api/workflows", "application/json", `{"name":"tools","nodes":[{"id":"ask","type":"llm","config":{
		"provider":"scripted","text":"I looked it up.",
		"toolCalls":[{"id":"c1","name":"http_get","input":{"url":"`+page.URL+`/tea"}}]}}],"output":"ask"}`, 201, &wf)
	var run struct{ RunID string }
	apiCall(t, "POST", p.base+"/api/workflows/"+wf.WorkflowID+"/runs", "application/json", `{"input":{}}`, 201, &run)
	ui := openUI(t, p.base)
	ui.open("/runs/" + run.RunID)
	ui.wait("the completed run", `document.querySelector("#run-status").textContent === "completed"`)
	ui.wait("the tool call", `document.querySelector('#node-ask details.tool')`)
	tool := ui.text("#node-ask details.tool")
	for _, want := range []string{"http_get", "/tea", "the tool page says tea"} {
		if !strings.Contains(tool, want) {
			t.Errorf("the tool call shows %q, want %q in it", tool, want)
		}
	}
	ui.shot("run-tool-calls")
}
