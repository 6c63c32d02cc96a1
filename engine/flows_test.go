package engine_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"github.com/runstream/runstream/engine/enginetest"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/workflow"
)

// The flows run inside synctest bubbles: delays, backoff, timeouts, pacing
// and leases take no real time and their order is deterministic.

func TestLinearFlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.start(t, nil)
		run := e.createRun(t, `{"name":"linear","nodes":[
			{"id":"draft","type":"llm","config":{"provider":"scripted","text":"Hello {{ input.who }}, welcome.","tokensPerSecond":50}},
			{"id":"shout","type":"transform","needs":["draft"],"config":{"expression":"upper(nodes.draft.output.text)"}}],
			"output":"shout"}`, `{"who":"Ada"}`)
		got, events := e.waitTerminal(t, run.ID)
		enginetest.CheckSequence(t, events,
			"run.created", "run.queued", "run.started",
			"node.queued:draft", "node.started:draft", "node.output.delta:draft", "node.completed:draft",
			"node.queued:shout", "node.started:shout", "node.completed:shout",
			"run.completed")
		if got.Status != workflow.StatusCompleted || string(got.Output) != `"HELLO ADA, WELCOME."` {
			t.Errorf("run %s with output %s", got.Status, got.Output)
		}
		var text strings.Builder
		for _, env := range events {
			if env.Event == workflow.EventNodeOutputDelta {
				var d struct{ Channel, Delta string }
				json.Unmarshal(env.Data, &d)
				if d.Channel != "text" {
					t.Errorf("delta on channel %q", d.Channel)
				}
				text.WriteString(d.Delta)
			}
		}
		if text.String() != "Hello Ada, welcome." {
			t.Errorf("deltas concatenate to %q", text.String())
		}
		var completed struct {
			Attempt       int
			OutputSummary json.RawMessage
		}
		enginetest.Data(t, events, workflow.EventNodeCompleted, "draft", 0, &completed)
		if completed.Attempt != 1 || string(completed.OutputSummary) != `{"text":"Hello Ada, welcome."}` {
			t.Errorf("node.completed of draft: %+v", completed)
		}
		var queued struct {
			NodeType string
			Needs    []string
		}
		enginetest.Data(t, events, workflow.EventNodeQueued, "shout", 0, &queued)
		if queued.NodeType != "transform" || !slices.Equal(queued.Needs, []string{"draft"}) {
			t.Errorf("node.queued of shout: %+v", queued)
		}
	})
}

func TestParallelBranches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.start(t, nil)
		run := e.createRun(t, `{"name":"fan","nodes":[
			{"id":"left","type":"delay","config":{"ms":1000,"progressEveryMs":500}},
			{"id":"right","type":"delay","config":{"ms":1000,"progressEveryMs":500}},
			{"id":"join","type":"transform","needs":["left","right"],"config":{"expression":"nodes.left.output.waitedMs + nodes.right.output.waitedMs"}}],
			"output":"join"}`, `{}`)
		start := time.Now()
		got, events := e.waitTerminal(t, run.ID)
		if got.Status != workflow.StatusCompleted || string(got.Output) != "2000" {
			t.Fatalf("run %s with output %s", got.Status, got.Output)
		}
		// Both branches start before either completes, and they take one
		// delay together, not two.
		seq := enginetest.Sequence(events)
		lastStart := max(slices.Index(seq, "node.started:left"), slices.Index(seq, "node.started:right"))
		firstDone := min(slices.Index(seq, "node.completed:left"), slices.Index(seq, "node.completed:right"))
		if lastStart < 0 || firstDone < 0 || lastStart > firstDone {
			t.Errorf("branches did not overlap:\n%s", strings.Join(seq, "\n"))
		}
		if join := slices.Index(seq, "node.queued:join"); join < max(slices.Index(seq, "node.completed:left"), slices.Index(seq, "node.completed:right")) {
			t.Errorf("join queued before both branches completed:\n%s", strings.Join(seq, "\n"))
		}
		if took := time.Since(start); took >= 2*time.Second {
			t.Errorf("the branches took %s, as if run one after the other", took)
		}
		var progress struct {
			Phase   string
			Message string
			Percent *float64
		}
		enginetest.Data(t, events, workflow.EventNodeProgress, "left", 1, &progress)
		if progress.Phase != "waiting" || progress.Percent == nil || *progress.Percent != 50 || progress.Message != "waited 500 of 1000 ms" {
			t.Errorf("second progress of left: %+v", progress)
		}
	})
}

func TestRetryAfterTransientFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.start(t, nil)
		run := e.createRun(t, `{"name":"retry","nodes":[
			{"id":"draft","type":"llm","retry":{"maxAttempts":3,"backoffMs":1000},
			 "config":{"provider":"scripted","text":"one two three","failAttempts":[1],"failAfterTokens":2}}],
			"output":"draft"}`, `{}`)
		got, events := e.waitTerminal(t, run.ID)
		enginetest.CheckSequence(t, events,
			"run.created", "run.queued", "run.started",
			"node.queued:draft", "node.started:draft", "node.output.delta:draft", "node.failed:draft",
			"node.started:draft", "node.output.delta:draft", "node.completed:draft",
			"run.completed")
		if got := enginetest.Attempts(t, events, "draft"); !slices.Equal(got, []int{1, 2}) {
			t.Errorf("attempts %v, want [1 2]", got)
		}
		var failed failedData
		failedAt := enginetest.Data(t, events, workflow.EventNodeFailed, "draft", 0, &failed)
		if failed.Error.Code != runstream.CodeWorkflowLLMProviderError || !failed.Error.Retryable || failed.Attempt != 1 || !failed.WillRetry || failed.Error.NodeID != "draft" {
			t.Errorf("node.failed: %+v", failed)
		}
		retriedAt := enginetest.Data(t, events, workflow.EventNodeStarted, "draft", 1, &struct{}{})
		if gap := retriedAt.Timestamp.Sub(failedAt.Timestamp); gap < time.Second {
			t.Errorf("attempt 2 started %s after the failure, want the 1 s backoff", gap)
		}
		var completed struct{ Attempt int }
		enginetest.Data(t, events, workflow.EventNodeCompleted, "draft", 0, &completed)
		if completed.Attempt != 2 || string(got.Output) != `{"text":"one two three"}` {
			t.Errorf("completed attempt %d with output %s", completed.Attempt, got.Output)
		}
	})
}

func TestNodeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.start(t, nil)
		run := e.createRun(t, `{"name":"slow","nodes":[
			{"id":"wait","type":"delay","timeoutMs":250,"retry":{"maxAttempts":2,"backoffMs":10},"config":{"ms":60000,"progressEveryMs":100}}]}`, `{}`)
		got, events := e.waitTerminal(t, run.ID)
		if got.Status != workflow.StatusFailed {
			t.Fatalf("run %s, want failed", got.Status)
		}
		if a := enginetest.Attempts(t, events, "wait"); !slices.Equal(a, []int{1, 2}) {
			t.Errorf("attempts %v, want [1 2]", a)
		}
		for i, willRetry := range []bool{true, false} {
			var failed failedData
			enginetest.Data(t, events, workflow.EventNodeFailed, "wait", i, &failed)
			if failed.Error.Code != runstream.CodeWorkflowNodeTimeout || !failed.Error.Retryable || failed.Attempt != i+1 || failed.WillRetry != willRetry {
				t.Errorf("node.failed #%d: %+v", i, failed)
			}
		}
		var runFailed failedData
		enginetest.Data(t, events, workflow.EventRunFailed, "", 0, &runFailed)
		if runFailed.Error.Code != runstream.CodeWorkflowNodeTimeout || runFailed.Failed == nil || *runFailed.Failed != "wait" {
			t.Errorf("run.failed: %+v", runFailed)
		}
	})
}

func TestCancelMidStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		eng := e.start(t, nil)
		run := e.createRun(t, `{"name":"long","nodes":[
			{"id":"talk","type":"llm","config":{"provider":"scripted","text":"`+strings.Repeat("word ", 1000)+`","tokensPerSecond":10}},
			{"id":"after","type":"transform","needs":["talk"],"config":{"expression":"1"}}]}`, `{}`)
		e.wait(t, run.ID, "some deltas", func(_ workflow.Run, envs []workflow.Envelope) bool {
			return slices.Contains(enginetest.Sequence(envs), "node.output.delta:talk")
		})
		if _, err := e.log.Append(t.Context(), workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{
			{Event: workflow.EventRunCancelRequested, Data: engine.CancelRequestedData("alice")},
		}}); err != nil {
			t.Fatal(err)
		}
		eng.Notify(run.ID)
		got, events := e.waitTerminal(t, run.ID)
		enginetest.CheckSequence(t, events,
			"run.created", "run.queued", "run.started",
			"node.queued:talk", "node.started:talk", "node.output.delta:talk",
			"run.cancel_requested", "run.cancelled")
		if got.Status != workflow.StatusCancelled {
			t.Errorf("run %s, want cancelled", got.Status)
		}
		var cancelled struct{ FinishedAt string }
		enginetest.Data(t, events, workflow.EventRunCancelled, "", 0, &cancelled)
		if _, err := time.Parse(time.RFC3339Nano, cancelled.FinishedAt); err != nil {
			t.Errorf("finishedAt %q: %v", cancelled.FinishedAt, err)
		}
	})
}

// A queued run whose cancellation was requested before any engine claimed
// it is cancelled by the engine that claims it, without starting.
func TestCancelRequestedBeforeClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		run := e.createRun(t, `{"name":"x","nodes":[{"id":"a","type":"delay","config":{"ms":10}}]}`, `{}`)
		if _, err := e.log.Append(t.Context(), workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{
			{Event: workflow.EventRunCancelRequested, Data: engine.CancelRequestedData("alice")},
		}}); err != nil {
			t.Fatal(err)
		}
		e.start(t, nil)
		_, events := e.waitTerminal(t, run.ID)
		enginetest.CheckSequence(t, events, "run.created", "run.queued", "run.cancel_requested", "run.cancelled")
	})
}

// A cancellation requested while the run's last steps are under way, and
// not yet seen by the engine (the API may live in another process; here
// the engine polls hourly), ends the run cancelled. The status cancelling
// is not replaced by the run.awaiting_input of a node that parks next
// (which would park a cancelled run and release it for good), nor by the
// run.completed or run.failed of the run's last node. Deltas a parking
// node streamed before it asked for input are kept.
func TestCancelRequestedBeforeRunEnds(t *testing.T) {
	tests := []struct {
		name string
		// def starts with node p, which ends when the test lets it.
		def string
		// fail: p fails for good.
		fail bool
		// tail: the events between run.cancel_requested and run.cancelled.
		tail []string
	}{
		{
			name: "HumanInputParks",
			def: `{"name":"x","nodes":[{"id":"p","type":"probe"},
				{"id":"ask","type":"human_input","needs":["p"]}]}`,
			tail: []string{"node.completed:p", "node.queued:ask", "node.started:ask"},
		},
		{
			name: "NodeParksAfterDeltas",
			def: `{"name":"x","nodes":[{"id":"p","type":"probe"},
				{"id":"ask","type":"probe","needs":["p"]}]}`,
			tail: []string{"node.completed:p", "node.queued:ask", "node.started:ask", "node.output.delta:ask"},
		},
		{
			name: "LastNodeCompletes",
			def:  probeDefinition,
			tail: []string{"node.completed:p"},
		},
		{
			name: "LastNodeFails",
			def:  probeDefinition,
			fail: true,
			tail: []string{"node.failed:p"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				gate := make(chan struct{})
				reg := probeRegistry(t, func(ctx context.Context, n *engine.NodeRun) error {
					if n.NodeID == "ask" {
						if err := n.Delta(ctx, "text", "let me ask"); err != nil {
							return err
						}
						return n.AwaitInput(ctx, json.RawMessage(`{"type":"object"}`), []string{"ok"}, 0)
					}
					select {
					case <-gate:
					case <-ctx.Done():
						return ctx.Err()
					}
					if tc.fail {
						return runstream.Errorf(runstream.CodeInvalidArgument, "p refuses")
					}
					return nil
				})
				run := e.createRun(t, tc.def, `{}`)
				eng := e.start(t, func(c *engine.Config) {
					c.Registry, c.PollInterval, c.LeaseDuration = reg, time.Hour, time.Hour
				})
				e.wait(t, run.ID, "p started", func(_ workflow.Run, envs []workflow.Envelope) bool {
					return slices.Contains(enginetest.Sequence(envs), "node.started:p")
				})
				// What POST /cancel does for a running run, without telling
				// the engine.
				if _, err := e.log.Append(t.Context(), workflow.AppendParams{RunID: run.ID, IfStatus: workflow.StatusRunning,
					Events: []workflow.NewEvent{{Event: workflow.EventRunCancelRequested, Data: engine.CancelRequestedData("alice")}}}); err != nil {
					t.Fatal(err)
				}
				close(gate)
				got, events := e.waitTerminal(t, run.ID)
				want := []string{"run.created", "run.queued", "run.started", "node.queued:p", "node.started:p", "run.cancel_requested"}
				want = append(append(want, tc.tail...), "run.cancelled")
				enginetest.CheckSequence(t, events, want...)
				if got.Status != workflow.StatusCancelled || got.LeaseOwner != "" {
					t.Errorf("run %s leased to %q, want cancelled and released", got.Status, got.LeaseOwner)
				}
				synctest.Wait()
				if n := eng.Running(); n != 0 {
					t.Errorf("the engine still runs %d runs", n)
				}
			})
		})
	}
}

func TestPauseResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		eng := e.start(t, nil)
		run := e.createRun(t, `{"name":"approve","nodes":[
			{"id":"ask","type":"human_input","config":{"actions":["approve","reject"],"formSchema":{"type":"object","properties":{"note":{"type":"string"}}}}},
			{"id":"decide","type":"transform","needs":["ask"],"config":{"expression":"nodes.ask.output.action + ': ' + nodes.ask.output.values.note"}}],
			"output":"decide"}`, `{}`)
		_, events := e.wait(t, run.ID, "awaiting input", func(r workflow.Run, _ []workflow.Envelope) bool { return r.Status == workflow.StatusAwaitingInput })
		var awaiting struct {
			FormSchema  json.RawMessage
			Actions     []string
			ResumeToken string
			ExpiresAt   string
		}
		env := enginetest.Data(t, events, workflow.EventRunAwaitingInput, "ask", 0, &awaiting)
		if len(awaiting.ResumeToken) != 43 || !slices.Equal(awaiting.Actions, []string{"approve", "reject"}) || !strings.Contains(string(awaiting.FormSchema), `"note"`) {
			t.Errorf("run.awaiting_input: %+v", awaiting)
		}
		expires, err := time.Parse(time.RFC3339Nano, awaiting.ExpiresAt)
		if err != nil || expires.Sub(env.Timestamp) < 23*time.Hour || expires.Sub(env.Timestamp) > 25*time.Hour {
			t.Errorf("expiresAt %q (%v), want a day after %s", awaiting.ExpiresAt, err, env.Timestamp)
		}
		// The run is parked: its lease is released.
		synctest.Wait()
		if r, _ := e.store.GetRun(t.Context(), run.ID, runstream.AnyOwner); r.LeaseOwner != "" || eng.Running() != 0 {
			t.Errorf("parked run leased to %q; engine runs %d", r.LeaseOwner, eng.Running())
		}
		tok, err := e.store.PendingResumeToken(t.Context(), run.ID)
		if err != nil {
			t.Fatal(err)
		}
		hash := sha256.Sum256([]byte(awaiting.ResumeToken))
		if string(tok.Hash) != string(hash[:]) || tok.NodeID != "ask" || tok.NodeRunID != env.NodeRunID {
			t.Errorf("stored token %+v does not match the event's", tok)
		}
		if _, err := e.log.Resume(t.Context(), workflow.ResumeParams{
			RunID: run.ID, Owner: runstream.AnyOwner, Hash: hash[:], Now: time.Now(),
			Events:      []workflow.NewEvent{{Event: workflow.EventRunResumed, NodeID: "ask", NodeRunID: tok.NodeRunID, Data: engine.ResumedData("approve")}},
			NodeOutputs: map[string]json.RawMessage{"ask": engine.ResumeOutput("approve", json.RawMessage(`{"note":"fine"}`))},
		}); err != nil {
			t.Fatal(err)
		}
		eng.Notify(run.ID)
		got, events := e.waitTerminal(t, run.ID)
		enginetest.CheckSequence(t, events,
			"run.created", "run.queued", "run.started",
			"node.queued:ask", "node.started:ask", "run.awaiting_input:ask", "run.resumed:ask", "node.completed:ask",
			"node.queued:decide", "node.started:decide", "node.completed:decide",
			"run.completed")
		if string(got.Output) != `"approve: fine"` {
			t.Errorf("output %s", got.Output)
		}
		var completed struct {
			Attempt       int
			OutputSummary json.RawMessage
		}
		done := enginetest.Data(t, events, workflow.EventNodeCompleted, "ask", 0, &completed)
		if completed.Attempt != 1 || string(completed.OutputSummary) != `{"action":"approve","values":{"note":"fine"}}` || done.NodeRunID != env.NodeRunID {
			t.Errorf("node.completed of ask: %+v (node run %s)", completed, done.NodeRunID)
		}
	})
}

// node.started summarises what the node reads: the run's input and the
// outputs of the nodes it needs.
func TestNodeStartedSummarisesItsInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.start(t, nil)
		run := e.createRun(t, `{"name":"inputs","nodes":[
			{"id":"a","type":"transform","config":{"expression":"{\"n\": input.n + 1}"}},
			{"id":"b","type":"transform","needs":["a"],"config":{"expression":"nodes.a.output.n * 2"}}],
			"output":"b"}`, `{"n":1}`)
		_, events := e.waitTerminal(t, run.ID)
		for node, want := range map[string]string{"a": `{"input":{"n":1},"nodes":{}}`, "b": `{"input":{"n":1},"nodes":{"a":{"n":2}}}`} {
			var started struct {
				Attempt      int
				InputSummary json.RawMessage
			}
			enginetest.Data(t, events, workflow.EventNodeStarted, node, 0, &started)
			if started.Attempt != 1 || string(started.InputSummary) != want {
				t.Errorf("node.started of %s: attempt %d, inputSummary %s; want 1 and %s", node, started.Attempt, started.InputSummary, want)
			}
		}
	})
}

// TestStreamedSecretRedacted: a model that streams a credential token by
// token (each token flushed on its own) stores none of it in its deltas.
func TestStreamedSecretRedacted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.start(t, nil)
		const token = "q8Zt3LmN0pXv7Rk2Yb5WcJ4hQ9"
		run := e.createRun(t, `{"name":"leak","nodes":[
			{"id":"a","type":"llm","config":{"provider":"scripted","text":"use Authorization: Bearer `+token+` and ok","tokensPerSecond":4}}],
			"output":"a"}`, `{}`)
		_, events := e.waitTerminal(t, run.ID)
		var joined strings.Builder
		n := 0
		for _, env := range events {
			if env.Event != workflow.EventNodeOutputDelta {
				continue
			}
			n++
			var d struct{ Delta string }
			json.Unmarshal(env.Data, &d)
			if strings.Contains(d.Delta, token[:8]) {
				t.Errorf("delta %d holds the token: %q", env.Seq, d.Delta)
			}
			joined.WriteString(d.Delta)
		}
		if n < 3 || joined.String() != "use Authorization: Bearer [REDACTED:bearer] and ok" {
			t.Errorf("%d deltas join to %q", n, joined.String())
		}
	})
}

// TestPromptWrittenBeforeTheForm: a node's text, to its last word, is
// stored before the run.awaiting_input it parks with.
func TestPromptWrittenBeforeTheForm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		reg := probeRegistry(t, func(ctx context.Context, n *engine.NodeRun) error {
			if err := n.Delta(ctx, "text", "Approve the transfer to account DE89370400440532013000"); err != nil {
				return err
			}
			return n.AwaitInput(ctx, json.RawMessage(`{"type":"object"}`), []string{"ok"}, 0)
		})
		run := e.createRun(t, probeDefinition, `{}`)
		e.start(t, func(c *engine.Config) { c.Registry = reg })
		_, events := e.wait(t, run.ID, "awaiting input", func(r workflow.Run, _ []workflow.Envelope) bool {
			return r.Status == workflow.StatusAwaitingInput
		})
		var text strings.Builder
		for _, env := range events {
			if env.Event == workflow.EventRunAwaitingInput {
				break
			}
			if env.Event == workflow.EventNodeOutputDelta {
				var d struct{ Delta string }
				json.Unmarshal(env.Data, &d)
				text.WriteString(d.Delta)
			}
		}
		if text.String() != "Approve the transfer to account DE89370400440532013000" {
			t.Errorf("before the form: %q", text.String())
		}
	})
}
