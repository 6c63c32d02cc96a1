package httpapi_test

import (
	"context"
	"encoding/json"
	"github.com/runstream/runstream/engine/enginetest"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/workflow"
)

// These tests drive the public HTTP API only: they publish a workflow,
// start a run, follow its SSE stream to the end and assert the complete
// event sequence.

func TestFlowLinearWithToolCall(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.StartEngine(t, context.Background(), nil)
	wf := s.publish(t, `{"name":"research","nodes":[
		{"id":"draft","type":"llm","config":{"provider":"scripted","text":"Hello {{ input.who }}, the page said {{ 'ok' }}.","tokensPerSecond":200,
		 "toolCalls":[{"id":"call_1","name":"http_get","input":{"url":"https://example.com"},"output":{"status":200}}]}},
		{"id":"shout","type":"transform","needs":["draft"],"config":{"expression":"upper(nodes.draft.output.text)"}}],
		"output":"shout"}`)
	run := s.startRun(t, wf, `{"who":"Ada"}`)
	events := s.follow(t, run).Rest(t)
	enginetest.CheckSequence(t, events,
		"run.created", "run.queued", "run.started",
		"node.queued:draft", "node.started:draft", "node.tool.started:draft", "node.tool.finished:draft",
		"node.output.delta:draft", "node.completed:draft",
		"node.queued:shout", "node.started:shout", "node.completed:shout",
		"run.completed")
	var tool struct {
		ToolCallID, Name, Status string
		OutputSummary            json.RawMessage
	}
	enginetest.Data(t, events, workflow.EventNodeToolFinished, "draft", 0, &tool)
	if tool.ToolCallID != "call_1" || tool.Name != "http_get" || tool.Status != "ok" || string(tool.OutputSummary) != `{"status":200}` {
		t.Errorf("node.tool.finished: %+v", tool)
	}
	var completed struct {
		Output    string
		Artifacts []any
	}
	enginetest.Data(t, events, workflow.EventRunCompleted, "", 0, &completed)
	if completed.Output != "HELLO ADA, THE PAGE SAID OK." || completed.Artifacts == nil {
		t.Errorf("run.completed: %+v", completed)
	}
	view := must(t, http.StatusOK)(s.get(t, "/api/workflows/runs/"+run))
	if view["status"] != "completed" || view["output"] != "HELLO ADA, THE PAGE SAID OK." || view["lastSeq"] != float64(len(events)) {
		t.Errorf("run view: %v", view)
	}
}

func TestFlowParallelBranches(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.StartEngine(t, context.Background(), nil)
	wf := s.publish(t, `{"name":"fan","nodes":[
		{"id":"left","type":"delay","config":{"ms":200,"progressEveryMs":200}},
		{"id":"right","type":"delay","config":{"ms":200,"progressEveryMs":200}},
		{"id":"join","type":"transform","needs":["left","right"],"config":{"expression":"[nodes.left.output.waitedMs, nodes.right.output.waitedMs]"}}],
		"output":"join"}`)
	events := s.follow(t, s.startRun(t, wf, `{}`)).Rest(t)
	seq := enginetest.Sequence(events)
	want := []string{"node.queued:left", "node.queued:right", "node.started:left", "node.started:right", "node.progress:left", "node.progress:right"}
	for _, w := range want {
		if !slices.Contains(seq, w) {
			t.Errorf("no %s", w)
		}
	}
	// Both branches run at once: each starts before the other completes.
	if slices.Index(seq, "node.started:right") > slices.Index(seq, "node.completed:left") ||
		slices.Index(seq, "node.started:left") > slices.Index(seq, "node.completed:right") {
		t.Errorf("branches ran one after the other:\n%s", strings.Join(seq, "\n"))
	}
	wantTail := []string{"node.queued:join", "node.started:join", "node.completed:join", "run.completed"}
	if len(seq) != 3+2*5+4 || !slices.Equal(seq[len(seq)-4:], wantTail) {
		t.Errorf("events:\n%s", strings.Join(seq, "\n"))
	}
	enginetest.CheckSequence(t, events, seq...) // seqs, terminal, no synthesised frame
	var completed struct{ Output []int }
	enginetest.Data(t, events, workflow.EventRunCompleted, "", 0, &completed)
	if !slices.Equal(completed.Output, []int{200, 200}) {
		t.Errorf("output %v", completed.Output)
	}
}

const approvalFlow = `{"name":"approval","nodes":[
	{"id":"draft","type":"llm","config":{"provider":"scripted","text":"A draft."}},
	{"id":"ask","type":"human_input","needs":["draft"],"config":{"actions":["approve","reject"],
	 "formSchema":{"type":"object","required":["note"],"properties":{"note":{"type":"string","maxLength":20}}}}},
	{"id":"final","type":"transform","needs":["ask"],"config":{"expression":"nodes.ask.output.action + ': ' + nodes.ask.output.values.note"}}],
	"output":"final"}`

func resumeBody(token, action, values string) string {
	return `{"resumeToken":"` + token + `","action":"` + action + `","values":` + values + `}`
}

func TestFlowPauseResume(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.StartEngine(t, context.Background(), nil)
	run := s.startRun(t, s.publish(t, approvalFlow), `{}`)
	st := s.follow(t, run)
	awaiting := st.Until(t, workflow.EventRunAwaitingInput, "ask")
	var d struct {
		ResumeToken string
		Actions     []string
		FormSchema  map[string]any
	}
	if err := json.Unmarshal(awaiting.Data, &d); err != nil {
		t.Fatal(err)
	}
	view := must(t, http.StatusOK)(s.get(t, "/api/workflows/runs/"+run))
	if view["status"] != "awaiting_input" {
		t.Errorf("run view status %v", view["status"])
	}
	raw, _ := json.Marshal(view)
	if strings.Contains(string(raw), d.ResumeToken) {
		t.Errorf("the run view holds the resume token")
	}
	path := "/api/workflows/runs/" + run + "/resume"
	// Refused requests consume nothing: the right request succeeds after
	// them.
	wantError(t, "unknown action", 422, runstream.CodeWorkflowResumeActionInvalid)(s.post(t, path, resumeBody(d.ResumeToken, "maybe", `{"note":"x"}`)))
	body := wantError(t, "invalid values", 422, runstream.CodeWorkflowFormInvalid)(s.post(t, path, resumeBody(d.ResumeToken, "approve", `{"note":"`+strings.Repeat("x", 30)+`"}`)))
	if details, _ := body["details"].(map[string]any); details == nil || !strings.Contains(string(mustJSON(details["problems"])), `"/note"`) {
		t.Errorf("form problems: %v", body["details"])
	}
	wantError(t, "missing value", 422, runstream.CodeWorkflowFormInvalid)(s.post(t, path, resumeBody(d.ResumeToken, "approve", `{}`)))
	wantError(t, "wrong token", 403, runstream.CodeWorkflowResumeTokenInvalid)(s.post(t, path, resumeBody("not-the-token", "approve", `{"note":"x"}`)))
	wantError(t, "another user", 404, runstream.CodeWorkflowRunNotFound)(s.post(t, path, resumeBody(d.ResumeToken, "approve", `{"note":"x"}`), "X-User", "mallory"))
	resumed := must(t, http.StatusOK)(s.post(t, path, resumeBody(d.ResumeToken, "approve", `{"note":"looks good"}`)))
	if resumed["status"] != "running" {
		t.Errorf("resumed run view: %v", resumed)
	}
	wantError(t, "used token", 409, runstream.CodeWorkflowResumeTokenUsed)(s.post(t, path, resumeBody(d.ResumeToken, "approve", `{"note":"x"}`)))
	events := st.Rest(t)
	enginetest.CheckSequence(t, events,
		"run.created", "run.queued", "run.started",
		"node.queued:draft", "node.started:draft", "node.output.delta:draft", "node.completed:draft",
		"node.queued:ask", "node.started:ask", "run.awaiting_input:ask", "run.resumed:ask", "node.completed:ask",
		"node.queued:final", "node.started:final", "node.completed:final",
		"run.completed")
	var r struct{ Action string }
	enginetest.Data(t, events, workflow.EventRunResumed, "ask", 0, &r)
	var completed struct{ Output string }
	enginetest.Data(t, events, workflow.EventRunCompleted, "", 0, &completed)
	if r.Action != "approve" || completed.Output != "approve: looks good" {
		t.Errorf("resumed with %q, output %q", r.Action, completed.Output)
	}
	wantError(t, "a completed run", 409, runstream.CodeWorkflowResumeTokenUsed)(s.post(t, path, resumeBody(d.ResumeToken, "approve", `{"note":"x"}`)))
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// An expired token answers 410; a valid token of a run that no longer
// awaits input (it was cancelled) answers 409 NOT_AWAITING_INPUT.
func TestResumeExpiredAndNotAwaiting(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.StartEngine(t, context.Background(), nil)
	wf := s.publish(t, `{"name":"short","nodes":[{"id":"ask","type":"human_input","config":{"expiresInMs":1}}]}`)
	run := s.startRun(t, wf, `{}`)
	var d struct {
		ResumeToken string
		ExpiresAt   time.Time
	}
	json.Unmarshal(s.follow(t, run).Until(t, workflow.EventRunAwaitingInput, "ask").Data, &d)
	time.Sleep(time.Until(d.ExpiresAt) + time.Millisecond)
	wantError(t, "expired token", 410, runstream.CodeWorkflowResumeTokenExpired)(s.post(t, "/api/workflows/runs/"+run+"/resume", resumeBody(d.ResumeToken, "submit", `{}`)))

	wf = s.publish(t, `{"name":"long","nodes":[{"id":"ask","type":"human_input"}]}`)
	run = s.startRun(t, wf, `{}`)
	st := s.follow(t, run)
	json.Unmarshal(st.Until(t, workflow.EventRunAwaitingInput, "ask").Data, &d)
	// A parked run is cancelled at once.
	body := must(t, http.StatusAccepted)(s.post(t, "/api/workflows/runs/"+run+"/cancel", ""))
	if body["status"] != "cancelled" {
		t.Errorf("cancelled parked run: %v", body)
	}
	wantError(t, "already terminal", 409, runstream.CodeWorkflowRunAlreadyTerminal)(s.post(t, "/api/workflows/runs/"+run+"/resume", resumeBody(d.ResumeToken, "submit", `{}`)))
	enginetest.CheckSequence(t, st.Rest(t),
		"run.created", "run.queued", "run.started", "node.queued:ask", "node.started:ask", "run.awaiting_input:ask",
		"run.cancel_requested", "run.cancelled")
}

// Of 50 concurrent resumes with the same token exactly one succeeds; the
// others find it used.
func TestConcurrentResumes(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.StartEngine(t, context.Background(), nil)
	run := s.startRun(t, s.publish(t, approvalFlow), `{}`)
	st := s.follow(t, run)
	var d struct{ ResumeToken string }
	json.Unmarshal(st.Until(t, workflow.EventRunAwaitingInput, "ask").Data, &d)
	const n = 50
	statuses := make([]int, n)
	codes := make([]any, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			// Not s.post: t.Fatal belongs to the test's goroutine.
			resp, err := http.Post(s.URL+"/api/workflows/runs/"+run+"/resume", "application/json", strings.NewReader(resumeBody(d.ResumeToken, "approve", `{"note":"ok"}`)))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var body map[string]any
			json.NewDecoder(resp.Body).Decode(&body)
			statuses[i], codes[i] = resp.StatusCode, body["code"]
		})
	}
	wg.Wait()
	ok := 0
	for i, status := range statuses {
		switch {
		case status == http.StatusOK:
			ok++
		case status != http.StatusConflict || codes[i] != string(runstream.CodeWorkflowResumeTokenUsed):
			t.Errorf("resume %d: %d %v", i, status, codes[i])
		}
	}
	if ok != 1 {
		t.Errorf("%d resumes succeeded, want exactly 1", ok)
	}
	events := st.Rest(t)
	resumes := 0
	for _, e := range events {
		if e.Event == workflow.EventRunResumed {
			resumes++
		}
	}
	if resumes != 1 || events[len(events)-1].Event != workflow.EventRunCompleted {
		t.Errorf("%d run.resumed events; last event %s", resumes, events[len(events)-1].Event)
	}
}

func TestFlowCancelMidStream(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.StartEngine(t, context.Background(), nil)
	wf := s.publish(t, `{"name":"long","nodes":[
		{"id":"wait","type":"delay","config":{"ms":600000,"progressEveryMs":50}},
		{"id":"never","type":"transform","needs":["wait"],"config":{"expression":"1"}}]}`)
	run := s.startRun(t, wf, `{}`)
	st := s.follow(t, run)
	st.Until(t, workflow.EventNodeProgress, "wait")
	path := "/api/workflows/runs/" + run + "/cancel"
	must(t, http.StatusAccepted)(s.post(t, path, ""))
	events := st.Rest(t)
	seq := enginetest.Sequence(events)
	requested := slices.Index(seq, "run.cancel_requested")
	if requested < 0 || slices.Index(seq[requested+1:], "run.cancel_requested") >= 0 {
		t.Fatalf("want one run.cancel_requested:\n%s", strings.Join(seq, "\n"))
	}
	head := []string{"run.created", "run.queued", "run.started", "node.queued:wait", "node.started:wait"}
	if !slices.Equal(seq[:len(head)], head) || seq[len(seq)-1] != "run.cancelled" || slices.Contains(seq, "node.started:never") {
		t.Errorf("events:\n%s", strings.Join(seq, "\n"))
	}
	for _, e := range seq[len(head):requested] {
		if e != "node.progress:wait" {
			t.Errorf("unexpected %s before the cancellation", e)
		}
	}
	enginetest.CheckSequence(t, events, seq...)
	var req struct{ RequestedBy string }
	enginetest.Data(t, events, workflow.EventRunCancelRequested, "", 0, &req)
	if req.RequestedBy != "local" {
		t.Errorf("requestedBy %q", req.RequestedBy)
	}
	wantError(t, "cancel a cancelled run", 409, runstream.CodeWorkflowRunAlreadyTerminal)(s.post(t, path, ""))
}

func TestFlowRetryAfterTransientFailure(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.StartEngine(t, context.Background(), nil)
	wf := s.publish(t, `{"name":"retry","nodes":[
		{"id":"draft","type":"llm","retry":{"maxAttempts":2,"backoffMs":20},
		 "config":{"provider":"scripted","text":"one two three","failAttempts":[1],"failAfterTokens":1}}],"output":"draft"}`)
	events := s.follow(t, s.startRun(t, wf, `{}`)).Rest(t)
	enginetest.CheckSequence(t, events,
		"run.created", "run.queued", "run.started",
		"node.queued:draft", "node.started:draft", "node.output.delta:draft", "node.failed:draft",
		"node.started:draft", "node.output.delta:draft", "node.completed:draft",
		"run.completed")
	if a := enginetest.Attempts(t, events, "draft"); !slices.Equal(a, []int{1, 2}) {
		t.Errorf("attempts %v", a)
	}
	var failed errorData
	enginetest.Data(t, events, workflow.EventNodeFailed, "draft", 0, &failed)
	if failed.Error.Code != runstream.CodeWorkflowLLMProviderError || !failed.WillRetry || failed.Attempt != 1 {
		t.Errorf("node.failed: %+v", failed)
	}
	var completed struct{ Attempt int }
	enginetest.Data(t, events, workflow.EventNodeCompleted, "draft", 0, &completed)
	if completed.Attempt != 2 {
		t.Errorf("completed attempt %d", completed.Attempt)
	}
}

func TestFlowNodeTimeout(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.StartEngine(t, context.Background(), nil)
	wf := s.publish(t, `{"name":"slow","nodes":[{"id":"wait","type":"delay","timeoutMs":50,"config":{"ms":600000,"progressEveryMs":600000}}]}`)
	events := s.follow(t, s.startRun(t, wf, `{}`)).Rest(t)
	enginetest.CheckSequence(t, events,
		"run.created", "run.queued", "run.started",
		"node.queued:wait", "node.started:wait", "node.progress:wait", "node.failed:wait",
		"run.failed")
	var failed errorData
	enginetest.Data(t, events, workflow.EventRunFailed, "", 0, &failed)
	if failed.Error.Code != runstream.CodeWorkflowNodeTimeout || !failed.Error.Retryable || failed.FailedNodeID == nil || *failed.FailedNodeID != "wait" {
		t.Errorf("run.failed: %+v", failed)
	}
}

// A run whose instance is killed mid-node is taken over by another
// instance once the lease expired (its clock is past it): the completed
// node is not run again and the interrupted one is retried.
func TestFlowTakeover(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctxA, killA := context.WithCancel(context.Background())
	defer killA()
	a := s.StartEngine(t, ctxA, func(c *engine.Config) { c.WorkerID = "a" })
	wf := s.publish(t, `{"name":"chain","nodes":[
		{"id":"first","type":"transform","config":{"expression":"'done'"}},
		{"id":"slow","type":"delay","needs":["first"],"retry":{"maxAttempts":2,"backoffMs":10},"config":{"ms":300,"progressEveryMs":300}},
		{"id":"last","type":"transform","needs":["slow"],"config":{"expression":"nodes.first.output"}}],
		"output":"last"}`)
	run := s.startRun(t, wf, `{}`)
	st := s.follow(t, run)
	st.Until(t, workflow.EventNodeProgress, "slow")
	killA()
	a.Stop(context.Background())
	view := must(t, http.StatusOK)(s.get(t, "/api/workflows/runs/"+run))
	if view["status"] != "running" {
		t.Fatalf("after the kill: %v", view)
	}
	s.StartEngine(t, context.Background(), func(c *engine.Config) {
		c.WorkerID = "b"
		c.Clock = func() time.Time { return time.Now().Add(4 * time.Second) }
	})
	events := st.Rest(t)
	enginetest.CheckSequence(t, events,
		"run.created", "run.queued", "run.started",
		"node.queued:first", "node.started:first", "node.completed:first",
		"node.queued:slow", "node.started:slow", "node.progress:slow",
		"node.failed:slow", "node.started:slow", "node.progress:slow", "node.progress:slow", "node.completed:slow",
		"node.queued:last", "node.started:last", "node.completed:last",
		"run.completed")
	if a := enginetest.Attempts(t, events, "slow"); !slices.Equal(a, []int{1, 2}) {
		t.Errorf("slow attempts %v", a)
	}
	var lost errorData
	enginetest.Data(t, events, workflow.EventNodeFailed, "slow", 0, &lost)
	if lost.Error.Code != runstream.CodeWorkflowWorkerLost || !lost.Error.Retryable || !lost.WillRetry || lost.Attempt != 1 {
		t.Errorf("node.failed: %+v", lost)
	}
	var started struct{ WorkerID string }
	enginetest.Data(t, events, workflow.EventRunStarted, "", 0, &started)
	if started.WorkerID != "a" {
		t.Errorf("run.started by %q", started.WorkerID)
	}
}

// A second cancel while the run is cancelling is accepted and changes
// nothing. (The run's engine was killed, so it stays cancelling until
// another engine takes it over and ends it.)
func TestCancelWhileCancelling(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctxA, killA := context.WithCancel(context.Background())
	defer killA()
	a := s.StartEngine(t, ctxA, func(c *engine.Config) { c.WorkerID = "a" })
	wf := s.publish(t, `{"name":"long","nodes":[{"id":"wait","type":"delay","config":{"ms":600000,"progressEveryMs":600000}}]}`)
	run := s.startRun(t, wf, `{}`)
	st := s.follow(t, run)
	st.Until(t, workflow.EventNodeProgress, "wait")
	killA()
	a.Stop(context.Background())
	path := "/api/workflows/runs/" + run + "/cancel"
	first := must(t, http.StatusAccepted)(s.post(t, path, ""))
	second := must(t, http.StatusAccepted)(s.post(t, path, ""))
	if first["status"] != "cancelling" || second["status"] != "cancelling" || first["lastSeq"] != second["lastSeq"] {
		t.Errorf("cancel views: %v then %v", first, second)
	}
	s.StartEngine(t, context.Background(), func(c *engine.Config) {
		c.WorkerID = "b"
		c.Clock = func() time.Time { return time.Now().Add(4 * time.Second) }
	})
	enginetest.CheckSequence(t, st.Rest(t),
		"run.created", "run.queued", "run.started",
		"node.queued:wait", "node.started:wait", "node.progress:wait",
		"run.cancel_requested", "run.cancelled")
}
