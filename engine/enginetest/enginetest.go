// Package enginetest runs workflow definitions on an engine over a store
// the test gives (the memory store, typically), for the tests of node
// types and llm providers that live in their own packages, and checks the
// events of their runs.
package enginetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/workflow"
)

// Env is a store, its event log (which validates every event against the
// contract) and a running engine.
type Env struct {
	Store  workflow.Store
	Log    *eventlog.WorkflowLog
	Engine *engine.Engine
}

var ids atomic.Int64

// Start starts an engine with reg over store, which must be empty and
// which the test closes; edit, when not nil, changes the engine's config.
// The engine stops when the test ends.
func Start(t testing.TB, store workflow.Store, reg *engine.Registry, edit func(*engine.Config)) *Env {
	t.Helper()
	v, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{Store: store}
	e.Log = eventlog.NewWorkflowLog(e.Store, v, nil, nil)
	cfg := engine.Config{Store: e.Store, Log: e.Log, Registry: reg, PollInterval: 10 * time.Millisecond}
	if edit != nil {
		edit(&cfg)
	}
	if e.Engine, err = engine.New(cfg); err != nil {
		t.Fatal(err)
	}
	if err := e.Engine.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Engine.Stop(context.Background()) })
	return e
}

// Run stores the definition (which must compile), queues a run with input
// as the API does, and returns the run and its events once it ended (at
// most a minute later).
func (e *Env) Run(t testing.TB, def, input string) (workflow.Run, []workflow.Envelope) {
	t.Helper()
	ctx := context.Background()
	n := ids.Add(1)
	w, v, err := e.Store.CreateWorkflow(ctx, workflow.Workflow{ID: fmt.Sprintf("wf_%d", n), OwnerID: "alice", Name: "test"},
		workflow.Version{ID: fmt.Sprintf("wv_%d", n), Definition: json.RawMessage(def)})
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := e.Log.CreateRun(ctx, workflow.Run{ID: fmt.Sprintf("run_%d", n), WorkflowID: w.ID, VersionID: v.ID, OwnerID: "alice", Input: json.RawMessage(input)},
		[]workflow.NewEvent{
			{Event: workflow.EventRunCreated, Data: engine.RunCreatedData(v, json.RawMessage(input))},
			{Event: workflow.EventRunQueued, Data: engine.RunQueuedData()},
		})
	if err != nil {
		t.Fatal(err)
	}
	e.Engine.Notify(run.ID)
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := e.Store.GetRun(ctx, run.ID, runstream.AnyOwner)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Terminal() {
			return got, e.Events(t, run.ID)
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still %s after a minute; events:\n%s", run.ID, got.Status, strings.Join(Sequence(e.Events(t, run.ID)), "\n"))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Events returns every stored event of a run.
func (e *Env) Events(t testing.TB, runID string) []workflow.Envelope {
	t.Helper()
	var out []workflow.Envelope
	for {
		page, err := e.Store.ListEvents(context.Background(), runID, int64(len(out)), workflow.MaxEventPageLimit)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		if len(page) < workflow.MaxEventPageLimit {
			return out
		}
	}
}

// Sequence names each event "type" or "type:node", merging consecutive
// node.output.delta events of one node into one entry.
func Sequence(events []workflow.Envelope) []string {
	var out []string
	for _, e := range events {
		s := string(e.Event)
		if e.NodeID != "" {
			s += ":" + e.NodeID
		}
		if e.Event == workflow.EventNodeOutputDelta && len(out) > 0 && out[len(out)-1] == s {
			continue
		}
		out = append(out, s)
	}
	return out
}

// Data decodes the data of the i-th event of type typ (and node, when not
// empty) into v, failing the test when there is none.
func Data(t testing.TB, events []workflow.Envelope, typ workflow.EventType, node string, i int, v any) workflow.Envelope {
	t.Helper()
	n := 0
	for _, e := range events {
		if e.Event != typ || (node != "" && e.NodeID != node) {
			continue
		}
		if n == i {
			if err := json.Unmarshal(e.Data, v); err != nil {
				t.Fatalf("seq %d: %v", e.Seq, err)
			}
			return e
		}
		n++
	}
	t.Fatalf("no %s event #%d of node %q in:\n%s", typ, i, node, strings.Join(Sequence(events), "\n"))
	return workflow.Envelope{}
}

// Text concatenates the node.output.delta text of node on channel.
func Text(events []workflow.Envelope, node, channel string) string {
	var b strings.Builder
	for _, e := range events {
		if e.Event != workflow.EventNodeOutputDelta || e.NodeID != node {
			continue
		}
		var d struct{ Channel, Delta string }
		if json.Unmarshal(e.Data, &d) == nil && d.Channel == channel {
			b.WriteString(d.Delta)
		}
	}
	return b.String()
}

// CheckSequence fails the test unless events is a whole run (CheckRun)
// whose events, named by Sequence, are want. It reports whether every
// check passed.
func CheckSequence(t testing.TB, events []workflow.Envelope, want ...string) bool {
	t.Helper()
	ok := CheckRun(t, events)
	return SameSequence(t, Sequence(events), want) && ok
}

// CheckRun fails the test unless events is a whole run as the protocol
// streams it: seqs 1..N, no synthesised frame, node.started attempts
// counting 1, 2, … per node, and a terminal event last. It reports whether
// every check passed.
func CheckRun(t testing.TB, events []workflow.Envelope) bool {
	t.Helper()
	ok := true
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf(format, args...)
		ok = false
	}
	started := map[string]int{}
	for i, e := range events {
		if e.Seq != int64(i+1) {
			fail("event %d has seq %d", i, e.Seq)
		}
		if bytes.Contains(e.Data, []byte("synthesised")) {
			fail("seq %d is synthesised: %s", e.Seq, e.Data)
		}
		if e.Event == workflow.EventNodeStarted {
			var d struct{ Attempt int }
			json.Unmarshal(e.Data, &d)
			if started[e.NodeID]++; d.Attempt != started[e.NodeID] {
				fail("seq %d: node.started of %s with attempt %d, want %d", e.Seq, e.NodeID, d.Attempt, started[e.NodeID])
			}
		}
	}
	if len(events) == 0 || !events[len(events)-1].Event.Terminal() {
		fail("the events do not end with a terminal event")
	}
	return ok
}

// SameSequence fails the test unless got equals want, and says whether it
// does.
func SameSequence(t testing.TB, got, want []string) bool {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("events:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		return false
	}
	return true
}

// Attempts returns the attempt numbers of a node's node.started events.
func Attempts(t testing.TB, events []workflow.Envelope, node string) []int {
	t.Helper()
	var out []int
	for _, e := range events {
		if e.Event == workflow.EventNodeStarted && e.NodeID == node {
			var d struct{ Attempt int }
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatalf("seq %d: %v", e.Seq, err)
			}
			out = append(out, d.Attempt)
		}
	}
	return out
}
