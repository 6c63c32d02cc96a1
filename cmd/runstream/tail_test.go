package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/httpapi"
	"github.com/runstream/runstream/internal/apitest"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/streams"
	"github.com/runstream/runstream/workflow"
	"github.com/runstream/runstream/workflowsvc"
)

// tailEnv is the real HTTP API over a memory store, a live hub and the event
// log (as in httpapi's workflow stream tests), with one run of the local
// user whose events all carry the time tailNow.
type tailEnv struct {
	store *memory.WorkflowStore
	log   *eventlog.WorkflowLog
	url   string
	run   workflow.Run
}

var tailNow = time.Date(2026, 8, 26, 10, 0, 1, 123e6, time.UTC)

const tailToken = "rt_7f3a9c2e_only_in_the_stream"

var longSummary = strings.Repeat("lorem ipsum ", 20)

// tailEvents are the events after run.created and run.queued, up to but not
// including run.completed.
var tailEvents = []workflow.NewEvent{
	{Event: workflow.EventRunStarted, Data: json.RawMessage(`{"startedAt":"2026-08-26T10:00:01+00:00"}`)},
	{Event: workflow.EventNodeStarted, NodeID: "agent_writer", NodeRunID: "nr_1", Data: json.RawMessage(`{"attempt":1}`)},
	{Event: workflow.EventNodeOutputDelta, NodeID: "agent_writer", NodeRunID: "nr_1", Data: json.RawMessage(`{"channel":"text","delta":"Hello, \"world\""}`)},
	{Event: workflow.EventNodeProgress, NodeID: "agent_writer", NodeRunID: "nr_1", Data: json.RawMessage(`{"phase":"draft","message":"halfway","percent":50}`)},
	{Event: workflow.EventNodeToolStarted, NodeID: "agent_writer", NodeRunID: "nr_1", Data: json.RawMessage(`{"toolCallId":"tc_1","name":"search","inputSummary":"` + longSummary + `"}`)},
	{Event: workflow.EventNodeFailed, NodeID: "agent_writer", NodeRunID: "nr_1", Data: json.RawMessage(`{"error":{"code":"WORKFLOW_LLM_PROVIDER_ERROR","message":"provider hung up","retryable":true},"attempt":1,"willRetry":true}`)},
	{Event: workflow.EventRunAwaitingInput, NodeID: "review", NodeRunID: "nr_2", Data: json.RawMessage(`{"formSchema":{"type":"object"},"actions":["approve","reject"],"resumeToken":"` + tailToken + `"}`)},
	{Event: workflow.EventRunResumed, NodeID: "review", NodeRunID: "nr_2", Data: json.RawMessage(`{"action":"approve"}`)},
	{Event: workflow.EventNodeCompleted, NodeID: "agent_writer", NodeRunID: "nr_3", Data: json.RawMessage(`{"durationMs":12}`)},
}

// tailLines are the human-readable lines of the run's events, by seq from 1.
func tailLines(showToken bool) []string {
	at := tailNow.Local().Format("15:04:05.000")
	tool := `{"toolCallId":"tc_1","name":"search","inputSummary":"` + longSummary + `"}`
	awaiting := "actions: approve, reject"
	if showToken {
		awaiting += "  resumeToken: " + tailToken
	}
	return []string{
		"#1  " + at + `  run.created  -  {"version":1,"versionId":"wv_tail"}`,
		"#2  " + at + `  run.queued  -  {"queue":"default"}`,
		"#3  " + at + `  run.started  -  {"startedAt":"2026-08-26T10:00:01+00:00"}`,
		"#4  " + at + `  node.started  agent_writer  {"attempt":1}`,
		"#5  " + at + `  node.output.delta  agent_writer  text: "Hello, \"world\""`,
		"#6  " + at + `  node.progress  agent_writer  draft: halfway (50%)`,
		"#7  " + at + `  node.tool.started  agent_writer  ` + tool[:119] + "…",
		"#8  " + at + `  node.failed  agent_writer  WORKFLOW_LLM_PROVIDER_ERROR: "provider hung up" (attempt 1, will retry)`,
		"#9  " + at + `  run.awaiting_input  review  ` + awaiting,
		"#10  " + at + `  run.resumed  review  {"action":"approve"}`,
		"#11  " + at + `  node.completed  agent_writer  {"durationMs":12}`,
		"#12  " + at + `  run.completed  -  {"output":{"text":"Hello"},"artifacts":[]}`,
	}
}

func newTailEnv(t *testing.T) *tailEnv {
	t.Helper()
	validator, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	env := &tailEnv{store: memory.NewWorkflowStore()}
	hub := live.New(live.Config{Poll: streams.Poller(env.store), PollInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	go hub.Run(ctx)
	env.log = eventlog.NewWorkflowLog(env.store, validator, hub, func() time.Time { return tailNow })
	t.Cleanup(cancel)
	api := httpapi.New(httpapi.Config{}, workflowsvc.New(env.store, nil, hub, workflowsvc.Config{}), nil)
	srv := apitest.Serve(t, api, api)
	env.url = srv.URL
	wf, v, err := env.store.CreateWorkflow(t.Context(), workflow.Workflow{ID: "wf_tail", OwnerID: httpapi.LocalUser, Name: "tail"},
		workflow.Version{ID: "wv_tail", Definition: json.RawMessage(`{"name":"tail","nodes":[]}`)})
	if err != nil {
		t.Fatal(err)
	}
	env.run, _, err = env.log.CreateRun(t.Context(), workflow.Run{ID: "run_tail", WorkflowID: wf.ID, VersionID: v.ID, OwnerID: httpapi.LocalUser, Input: json.RawMessage(`{}`)},
		[]workflow.NewEvent{
			{Event: workflow.EventRunCreated, Data: json.RawMessage(`{"version":1,"versionId":"wv_tail"}`)},
			{Event: workflow.EventRunQueued, Data: json.RawMessage(`{"queue":"default"}`)},
		})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.log.Append(t.Context(), workflow.AppendParams{RunID: env.run.ID, Events: tailEvents}); err != nil {
		t.Fatal(err)
	}
	return env
}

func (env *tailEnv) complete(t *testing.T) {
	t.Helper()
	_, err := env.log.Append(context.Background(), workflow.AppendParams{RunID: env.run.ID, Events: []workflow.NewEvent{
		{Event: workflow.EventRunCompleted, Data: json.RawMessage(`{"output":{"text":"Hello"},"artifacts":[]}`)},
	}})
	if err != nil {
		t.Error(err)
	}
}

// startTail runs "runstream tail" with args until it returns.
func startTail(env map[string]string, args ...string) (*syncBuffer, *syncBuffer, <-chan error) {
	m := &Main{Getenv: func(k string) string { return env[k] }}
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- m.Run(context.Background(), append([]string{"tail"}, args...), stdout, stderr) }()
	return stdout, stderr, done
}

func wait(t *testing.T, done <-chan error, stderr *syncBuffer) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("tail did not return\nstderr:\n%s", stderr)
		return nil
	}
}

func outputLines(s string) []string {
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// TestTailFollows starts tail on a running run, completes the run while it
// follows, and checks every event is printed once in the chosen format.
func TestTailFollows(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		// want returns the expected lines from the stored envelopes.
		want func(stored []workflow.Envelope) []string
	}{{
		name: "human",
		args: []string{"run_tail"},
		want: func([]workflow.Envelope) []string { return tailLines(false) },
	}, {
		name: "human with the token",
		args: []string{"--show-token", "run_tail"},
		want: func([]workflow.Envelope) []string { return tailLines(true) },
	}, {
		name: "human after a seq",
		args: []string{"run_tail", "--after", "9"},
		want: func([]workflow.Envelope) []string { return tailLines(false)[9:] },
	}, {
		name: "json",
		args: []string{"--json", "run_tail"},
		want: func(stored []workflow.Envelope) []string {
			var lines []string
			for _, env := range stored {
				if env.Event == workflow.EventRunAwaitingInput {
					env.Data = json.RawMessage(`{"actions":["approve","reject"],"formSchema":{"type":"object"},"resumeToken":"[REDACTED:resume_token]"}`)
				}
				b, _ := env.MarshalJSON()
				lines = append(lines, string(b))
			}
			return lines
		},
	}, {
		name: "json with the token",
		args: []string{"run_tail", "--json", "--show-token"},
		want: func(stored []workflow.Envelope) []string {
			var lines []string
			for _, env := range stored {
				b, _ := env.MarshalJSON()
				lines = append(lines, string(b))
			}
			return lines
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := newTailEnv(t)
			stdout, stderr, done := startTail(map[string]string{"RUNSTREAM_SERVER": env.url}, tt.args...)
			// Complete the run once tail has printed the stored events, so
			// the terminal event reaches it live.
			for deadline := time.Now().Add(30 * time.Second); !strings.Contains(stdout.String(), "node.completed"); {
				if time.Now().After(deadline) {
					t.Fatalf("tail printed no node.completed\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
				}
				time.Sleep(5 * time.Millisecond)
			}
			env.complete(t)
			if err := wait(t, done, stderr); err != nil {
				t.Fatalf("tail: %v\nstderr:\n%s", err, stderr)
			}
			stored, err := env.store.ListEvents(t.Context(), env.run.ID, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			got, want := outputLines(stdout.String()), tt.want(stored)
			if !slices.Equal(got, want) {
				t.Errorf("output:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			showToken := slices.Contains(tt.args, "--show-token")
			if strings.Contains(stdout.String(), tailToken) != showToken {
				t.Errorf("the resume token is printed: %v, want %v", !showToken, showToken)
			}
		})
	}
}

func TestTailErrors(t *testing.T) {
	t.Parallel()
	env := newTailEnv(t)
	tests := []struct {
		name     string
		args     []string
		wantText string
		wantCode int
	}{
		{name: "unknown run", args: []string{"--server", env.url, "run_nope"}, wantText: "run run_nope not found", wantCode: 1},
		{name: "no run id", args: []string{"--server", env.url}, wantText: "tail needs a run id", wantCode: 2},
		{name: "two run ids", args: []string{"--server", env.url, "run_tail", "run_other"}, wantText: "unexpected arguments", wantCode: 2},
		{name: "bad server URL", args: []string{"--server", "127.0.0.1:8780", "run_tail"}, wantText: "--server", wantCode: 2},
		{name: "negative after", args: []string{"--server", env.url, "--after", "-1", "run_tail"}, wantText: "--after", wantCode: 2},
		{name: "unknown flag", args: []string{"--follow", "run_tail"}, wantText: "flag provided but not defined", wantCode: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, stderr, done := startTail(nil, tt.args...)
			err := wait(t, done, stderr)
			if err == nil {
				t.Fatal("tail succeeded")
			}
			if !strings.Contains(err.Error(), tt.wantText) || exitCode(err) != tt.wantCode {
				t.Errorf("error %q (exit %d), want one containing %q (exit %d)", err, exitCode(err), tt.wantText, tt.wantCode)
			}
		})
	}
}

func TestSplitRunID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args     []string
		wantRun  string
		wantRest []string
	}{
		{args: []string{"run_1", "--json"}, wantRun: "run_1", wantRest: []string{"--json"}},
		{args: []string{"--json", "run_1"}, wantRun: "run_1", wantRest: []string{"--json"}},
		{args: []string{"--server", "http://x", "run_1", "--after", "3"}, wantRun: "run_1", wantRest: []string{"--server", "http://x", "--after", "3"}},
		{args: []string{"-server=http://x", "run_1"}, wantRun: "run_1", wantRest: []string{"-server=http://x"}},
		{args: []string{"--json", "--", "-run"}, wantRun: "-run", wantRest: []string{"--json"}},
		{args: []string{"run_1", "--", "run_2"}, wantRun: "run_1", wantRest: []string{"--", "run_2"}},
		{args: []string{"run_1", "run_2"}, wantRun: "run_1", wantRest: []string{"run_2"}},
		{args: []string{"--json"}, wantRest: []string{"--json"}},
	}
	for _, tt := range tests {
		run, rest := splitRunID(newTailFlags(&tailConfig{}), tt.args)
		if run != tt.wantRun || !slices.Equal(rest, tt.wantRest) {
			t.Errorf("splitRunID(%q) = %q, %q; want %q, %q", tt.args, run, rest, tt.wantRun, tt.wantRest)
		}
	}
}

func TestFormatEvent(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 8, 26, 10, 0, 1, 123e6, time.UTC)
	clock := at.Local().Format("15:04:05.000")
	envelope := func(event workflow.EventType, node, data string) workflow.Envelope {
		return workflow.Envelope{SchemaVersion: "1.0", RunID: "run_1", WorkflowID: "wf_1", VersionID: "wv_1", Seq: 7,
			Event: event, NodeID: node, Timestamp: at, Data: json.RawMessage(data)}
	}
	tests := []struct {
		name string
		env  workflow.Envelope
		want string
	}{{
		name: "synthesised run.failed",
		env: envelope(workflow.EventRunFailed, "", `{"synthesised":true,"finishedAt":"2026-08-26T10:00:01+00:00",`+
			`"error":{"code":"WORKFLOW_WORKER_LOST","message":"the run ended without a terminal event","retryable":true},"failedNodeId":null}`),
		want: `#7  ` + clock + `  run.failed  -  (synthesised) WORKFLOW_WORKER_LOST: "the run ended without a terminal event"`,
	}, {
		name: "run.failed with its node",
		env:  envelope(workflow.EventRunFailed, "", `{"error":{"code":"WORKFLOW_NODE_TIMEOUT","message":"too slow","retryable":true},"failedNodeId":"sql_1"}`),
		want: `#7  ` + clock + `  run.failed  -  WORKFLOW_NODE_TIMEOUT: "too slow" (node sql_1)`,
	}, {
		name: "a long delta cut by runes",
		env:  envelope(workflow.EventNodeOutputDelta, "w", `{"channel":"text","delta":"`+strings.Repeat("é", 200)+`"}`),
		want: `#7  ` + clock + `  node.output.delta  w  text: "` + strings.Repeat("é", 119-len(`text: "`)) + "…",
	}, {
		name: "a delta with a newline",
		env:  envelope(workflow.EventNodeOutputDelta, "w", `{"channel":"reasoning","delta":"a\nb"}`),
		want: `#7  ` + clock + `  node.output.delta  w  reasoning: "a\nb"`,
	}, {
		name: "awaiting input with undecodable actions hides the token",
		env:  envelope(workflow.EventRunAwaitingInput, "r", `{"actions":"approve","resumeToken":"`+tailToken+`"}`),
		want: `#7  ` + clock + `  run.awaiting_input  r  actions: ?`,
	}, {
		name: "progress without percent",
		env:  envelope(workflow.EventNodeProgress, "n", `{"phase":"fetch","message":"page 2","percent":null}`),
		want: `#7  ` + clock + `  node.progress  n  fetch: page 2`,
	}}
	for _, tt := range tests {
		got, err := formatEvent(tt.env, false, false)
		if err != nil || got != tt.want {
			t.Errorf("%s: formatEvent = %q, %v\nwant %q", tt.name, got, err, tt.want)
		}
	}
}
