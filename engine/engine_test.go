package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/runstream/runstream/engine/enginetest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/workflow"
)

var validator = func() *contracts.Validator {
	v, err := contracts.NewValidator()
	if err != nil {
		panic(err)
	}
	return v
}()

// env is a memory store with its event log, for engines under test.
type env struct {
	store *memory.WorkflowStore
	log   *eventlog.WorkflowLog
}

func newEnv(t testing.TB) *env {
	t.Helper()
	s := memory.NewWorkflowStore()
	t.Cleanup(func() { s.Close() })
	return &env{store: s, log: eventlog.NewWorkflowLog(s, validator, nil, nil)}
}

// start starts an engine over the env; edit, if not nil, changes its
// config. The engine is stopped when the test ends.
func (e *env) start(t *testing.T, edit func(*engine.Config)) *engine.Engine {
	t.Helper()
	cfg := engine.Config{Store: e.store, Log: e.log, PollInterval: 20 * time.Millisecond, LeaseDuration: 3 * time.Second}
	if edit != nil {
		edit(&cfg)
	}
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Stop(context.Background()) })
	return eng
}

var ids atomic.Int64

// createRun stores a workflow of alice with definition def and a queued
// run of it, as the API does.
func (e *env) createRun(t testing.TB, def, input string) workflow.Run {
	t.Helper()
	return e.createRunOf(t, "alice", def, input)
}

// createRunOf is createRun for the workflows and runs of owner.
func (e *env) createRunOf(t testing.TB, owner, def, input string) workflow.Run {
	t.Helper()
	n := ids.Add(1)
	ctx := context.Background()
	w, v, err := e.store.CreateWorkflow(ctx, workflow.Workflow{ID: fmt.Sprintf("wf_%d", n), OwnerID: owner, Name: "test"},
		workflow.Version{ID: fmt.Sprintf("wv_%d", n), Definition: json.RawMessage(def)})
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := e.log.CreateRun(ctx, workflow.Run{ID: fmt.Sprintf("run_%d", n), WorkflowID: w.ID, VersionID: v.ID, OwnerID: owner, Input: json.RawMessage(input)},
		[]workflow.NewEvent{
			{Event: workflow.EventRunCreated, Data: engine.RunCreatedData(v, json.RawMessage(input))},
			{Event: workflow.EventRunQueued, Data: engine.RunQueuedData()},
		})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// wait polls the stored run until ok accepts it, for at most a minute (of
// the bubble's clock under synctest).
func (e *env) wait(t *testing.T, runID string, what string, ok func(workflow.Run, []workflow.Envelope) bool) (workflow.Run, []workflow.Envelope) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		run, err := e.store.GetRun(context.Background(), runID, runstream.AnyOwner)
		if err != nil {
			t.Fatal(err)
		}
		events := e.events(t, runID)
		if ok(run, events) {
			return run, events
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: gave up waiting for %s; status %s, events:\n%s", runID, what, run.Status, strings.Join(enginetest.Sequence(events), "\n"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *env) waitTerminal(t *testing.T, runID string) (workflow.Run, []workflow.Envelope) {
	t.Helper()
	return e.wait(t, runID, "a terminal status", func(r workflow.Run, _ []workflow.Envelope) bool { return r.Status.Terminal() })
}

func (e *env) events(t *testing.T, runID string) []workflow.Envelope {
	t.Helper()
	envs, err := e.store.ListEvents(context.Background(), runID, 0, workflow.MaxEventPageLimit)
	if err != nil {
		t.Fatal(err)
	}
	return envs
}

type failedData struct {
	Error struct {
		Code      runstream.ErrorCode `json:"code"`
		Retryable bool                `json:"retryable"`
		NodeID    string              `json:"nodeId"`
		Details   struct {
			Reason string `json:"reason"`
		} `json:"details"`
	} `json:"error"`
	Attempt   int     `json:"attempt"`
	WillRetry bool    `json:"willRetry"`
	Failed    *string `json:"failedNodeId"`
}
