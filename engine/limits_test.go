package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/engine/enginetest"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/workflow"
)

// nodeFailure returns the error of the first node.failed of node.
func nodeFailure(t *testing.T, events []workflow.Envelope, node string) (code runstream.ErrorCode, limit any, retryable bool) {
	t.Helper()
	var failed struct {
		Error struct {
			Code      runstream.ErrorCode
			Retryable bool
			Details   map[string]any
		}
	}
	enginetest.Data(t, events, workflow.EventNodeFailed, node, 0, &failed)
	return failed.Error.Code, failed.Error.Details["limit"], failed.Error.Retryable
}

// wantLimit checks that node failed once, for good, with the bound limit,
// and that the run failed.
func wantLimit(t *testing.T, run workflow.Run, events []workflow.Envelope, node, limit string) {
	t.Helper()
	if run.Status != workflow.StatusFailed {
		t.Errorf("run %s, want failed", run.Status)
	}
	code, got, retryable := nodeFailure(t, events, node)
	if code != runstream.CodeWorkflowNodeLimitExceeded || got != limit || retryable {
		t.Errorf("node.failed of %s: %s limit %v retryable %v, want %s %s not retryable", node, code, got, retryable, runstream.CodeWorkflowNodeLimitExceeded, limit)
	}
	if n := len(enginetest.Attempts(t, events, node)); n != 1 {
		t.Errorf("%s ran %d attempts, want 1", node, n)
	}
}

// TestNodeOutputBound: a node whose output exceeds MaxOutputBytes fails
// with the bound's error and is not retried.
func TestNodeOutputBound(t *testing.T) {
	t.Parallel()
	e := enginetest.Start(t, memory.NewWorkflowStore(), engine.DefaultRegistry(), func(c *engine.Config) { c.MaxOutputBytes = 1000 })
	run, events := e.Run(t, `{"name":"big","nodes":[
		{"id":"big","type":"transform","retry":{"maxAttempts":3},"config":{"expression":"repeat(\"x\", 2000)"}}]}`, `{}`)
	wantLimit(t, run, events, "big", engine.LimitOutputBytes)
}

// TestRunOutputBound: the node whose output takes the run's node outputs
// past MaxRunOutputBytes fails with the bound's error, though its own
// output is under MaxOutputBytes; the nodes before it completed, and
// nothing more was stored for it.
func TestRunOutputBound(t *testing.T) {
	t.Parallel()
	store := memory.NewWorkflowStore()
	e := enginetest.Start(t, store, engine.DefaultRegistry(), func(c *engine.Config) { c.MaxOutputBytes, c.MaxRunOutputBytes = 1000, 2500 })
	run, events := e.Run(t, `{"name":"many","nodes":[
		{"id":"a","type":"transform","config":{"expression":"repeat(\"x\", 900)"}},
		{"id":"b","type":"transform","needs":["a"],"config":{"expression":"repeat(\"x\", 900)"}},
		{"id":"c","type":"transform","needs":["b"],"retry":{"maxAttempts":3},"config":{"expression":"repeat(\"x\", 900)"}}]}`, `{}`)
	wantLimit(t, run, events, "c", engine.LimitRunOutputBytes)
	outs, err := store.NodeOutputs(t.Context(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 2 || outs["c"] != nil {
		t.Errorf("stored outputs of %d nodes, want a's and b's only", len(outs))
	}
}

// flakyBlobs fails its first fails Puts with a retryable error.
type flakyBlobs struct {
	engine.ArtifactBlobs
	fails atomic.Int32
}

func (b *flakyBlobs) Put(ctx context.Context, runID, artifactID string, data []byte) error {
	if b.fails.Add(-1) >= 0 {
		return runstream.Errorf(runstream.CodeUnavailable, "the blob store is down")
	}
	return b.ArtifactBlobs.Put(ctx, runID, artifactID, data)
}

// TestRunOutputBoundCountsKeptOutputs: the output of an attempt that
// failed after it (its artifact not stored) does not count against the
// run's bound, so its retries are not refused.
func TestRunOutputBoundCountsKeptOutputs(t *testing.T) {
	t.Parallel()
	blobs := &flakyBlobs{ArtifactBlobs: engine.NewMemoryBlobs()}
	blobs.fails.Store(2)
	e := enginetest.Start(t, memory.NewWorkflowStore(), engine.DefaultRegistry(), func(c *engine.Config) {
		c.MaxOutputBytes, c.MaxRunOutputBytes, c.Artifacts = 1000, 2500, blobs
	})
	run, events := e.Run(t, `{"name":"retry","nodes":[
		{"id":"report","type":"transform","retry":{"maxAttempts":3,"backoffMs":1},"artifact":{"name":"r.txt","mimeType":"text/plain"},
		 "config":{"expression":"repeat(\"x\", 900)"}}]}`, `{}`)
	if run.Status != workflow.StatusCompleted {
		t.Errorf("run %s (%s), want completed on the third attempt", run.Status, run.Error)
	}
	if n := len(enginetest.Attempts(t, events, "report")); n != 3 {
		t.Errorf("%d attempts, want 3", n)
	}
}

// TestArtifactBound: an artifact past MaxArtifactBytes fails its node.
func TestArtifactBound(t *testing.T) {
	t.Parallel()
	e := enginetest.Start(t, memory.NewWorkflowStore(), engine.DefaultRegistry(), func(c *engine.Config) { c.MaxArtifactBytes = 100 })
	run, events := e.Run(t, `{"name":"art","nodes":[
		{"id":"report","type":"transform","retry":{"maxAttempts":3},"artifact":{"name":"r.txt","mimeType":"text/plain"},
		 "config":{"expression":"repeat(\"x\", 500)"}}]}`, `{}`)
	wantLimit(t, run, events, "report", engine.LimitArtifactBytes)
	for _, env := range events {
		if env.Event == workflow.EventArtifactCreated {
			t.Errorf("artifact.created was stored for an artifact past the bound")
		}
	}
}

// TestRunOutputMustFitItsEvent: a run whose output would make run.completed
// larger than an event may be fails, instead of being left running.
func TestRunOutputMustFitItsEvent(t *testing.T) {
	t.Parallel()
	e := enginetest.Start(t, memory.NewWorkflowStore(), engine.DefaultRegistry(), nil)
	e.Log.MaxEventBytes = 2000
	run, events := e.Run(t, `{"name":"out","nodes":[
		{"id":"big","type":"transform","config":{"expression":"repeat(\"x\", 3000)"}}],"output":"big"}`, `{}`)
	if run.Status != workflow.StatusFailed {
		t.Fatalf("run %s, want failed", run.Status)
	}
	var failed struct {
		Error struct {
			Code    runstream.ErrorCode
			Details map[string]any
		}
	}
	enginetest.Data(t, events, workflow.EventRunFailed, "", 0, &failed)
	if failed.Error.Code != runstream.CodeWorkflowNodeLimitExceeded || failed.Error.Details["limit"] != engine.LimitEventBytes {
		t.Errorf("run.failed: %+v", failed.Error)
	}
}

// shouter is a node type that reports progress with a message of n bytes.
func shouter(n int) engine.NodeType {
	return engine.NodeType{Name: "shout", Compile: func(json.RawMessage) (engine.NodeFunc, error) {
		return func(ctx context.Context, nr *engine.NodeRun) (json.RawMessage, error) {
			if err := nr.Progress(ctx, "shouting", strings.Repeat("a", n), -1); err != nil {
				return nil, err
			}
			return json.RawMessage(`"done"`), nil
		}, nil
	}}
}

// TestOversizedEventFailsItsNode: a node that writes an event past the
// log's bound fails with the bound's error, not retried; the run ends
// failed instead of being lost, and the engine runs the next run.
func TestOversizedEventFailsItsNode(t *testing.T) {
	t.Parallel()
	reg, err := engine.NewRegistry(append(engine.Builtins(), shouter(workflow.DefaultMaxEventBytes))...)
	if err != nil {
		t.Fatal(err)
	}
	e := enginetest.Start(t, memory.NewWorkflowStore(), reg, nil)
	run, events := e.Run(t, `{"name":"loud","nodes":[{"id":"loud","type":"shout","retry":{"maxAttempts":3},"config":{}}]}`, `{}`)
	wantLimit(t, run, events, "loud", engine.LimitEventBytes)
	if next, _ := e.Run(t, `{"name":"next","nodes":[{"id":"t","type":"transform","config":{"expression":"1"}}]}`, `{}`); next.Status != workflow.StatusCompleted {
		t.Errorf("the next run %s, want completed", next.Status)
	}
}

// TestProgressIsRateLimited: a delay reporting every millisecond stores
// at most one report per ProgressInterval (100 ms by default), plus its
// first and its final ones. It runs in a synctest bubble, so the 500 ms
// take no real time and the count does not depend on the machine.
func TestProgressIsRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.start(t, nil)
		run := e.createRun(t, `{"name":"flood","nodes":[{"id":"wait","type":"delay","config":{"ms":500,"progressEveryMs":1}}]}`, `{}`)
		got, events := e.waitTerminal(t, run.ID)
		if got.Status != workflow.StatusCompleted {
			t.Fatalf("run %s", got.Status)
		}
		n := 0
		var last struct{ Percent float64 }
		for _, env := range events {
			if env.Event == workflow.EventNodeProgress {
				n++
				json.Unmarshal(env.Data, &last)
			}
		}
		// One report at 0, one per 100 ms, and the final one.
		if n < 2 || n > 7 || last.Percent != 100 {
			t.Errorf("%d node.progress events stored, the last at %v%%; want 2 to 7, the last at 100%%", n, last.Percent)
		}
	})
}
