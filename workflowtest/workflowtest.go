package workflowtest

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

// Harness opens stores for the suite.
type Harness struct {
	// Open returns a new, empty store. The suite closes it. It is called
	// once per subtest, from parallel subtests.
	Open func(t *testing.T) workflow.Store
	// OpenReopenable, if not nil, returns a new, empty store and a function
	// that closes it and opens a new store over the same data (same file,
	// directory or schema): the step proving data survives a restart. The
	// suite closes the store reopen returns. nil for backends that keep
	// nothing (memory); the suite then logs that it skipped the step.
	OpenReopenable func(t *testing.T) (s workflow.Store, reopen func() workflow.Store)
}

// Run runs the conformance tests against the stores h opens.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Open == nil {
		t.Fatal("workflowtest: Harness.Open is nil")
	}
	for _, g := range []struct {
		name  string
		tests []test
	}{
		{"Workflows", workflowTests},
		{"Runs", runTests},
		{"ListRuns", listRunTests},
		{"Append", appendTests},
		{"Events", eventTests},
		{"Copies", copyTests},
		{"Resume", resumeTests},
		{"Artifacts", artifactTests},
		{"Concurrency", concurrencyTests},
		{"IDs", idTests},
		{"Owner", ownerTests},
	} {
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.run(t, open(t, h))
				})
			}
		})
	}
	t.Run("Reopen", func(t *testing.T) { testReopen(t, h) })
}

// test is one conformance check on a fresh store.
type test struct {
	name string
	run  func(t *testing.T, s workflow.Store)
}

func open(t *testing.T, h Harness) workflow.Store {
	t.Helper()
	s := h.Open(t)
	if s == nil {
		t.Fatal("workflowtest: Harness.Open returned nil")
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

const (
	alice = "alice"
	bob   = "bob"
	// lessee holds the lease of the runs newRun creates.
	lessee = "worker-1"
)

var (
	asAlice = runstream.OwnedBy(alice)
	asBob   = runstream.OwnedBy(bob)
)

var lastID atomic.Int64

// newID returns an id unique in the test binary; ids of one prefix sort in
// creation order, as the time-ordered ids of the service do.
func newID(prefix string) string {
	return fmt.Sprintf("%s-%09d", prefix, lastID.Add(1))
}

// base is a fixed, microsecond-exact instant for times the tests give.
var base = time.Date(2026, 8, 26, 10, 0, 0, 0, time.UTC)

// newWorkflow stores a workflow of owner with its first version.
func newWorkflow(t *testing.T, s workflow.Store, owner string) (workflow.Workflow, workflow.Version) {
	t.Helper()
	w := workflow.Workflow{ID: newID("wf"), OwnerID: owner, Name: "review", Description: "reviews a draft"}
	v := workflow.Version{ID: newID("wv"), Definition: json.RawMessage(`{"name":"review","nodes":[{"id":"n1","type":"delay"}]}`)}
	gw, gv, err := s.CreateWorkflow(t.Context(), w, v)
	if err != nil {
		t.Fatalf("CreateWorkflow(%s): %v", w.ID, err)
	}
	return gw, gv
}

// newRun stores a run of a new workflow of alice, leased to lessee, with
// run.created and run.queued (seqs 1 and 2). edit, if not nil, changes the
// run before it is stored.
func newRun(t *testing.T, s workflow.Store, edit func(*workflow.Run)) workflow.Run {
	t.Helper()
	w, v := newWorkflow(t, s, alice)
	return newRunOf(t, s, w, v, edit)
}

func newRunOf(t *testing.T, s workflow.Store, w workflow.Workflow, v workflow.Version, edit func(*workflow.Run)) workflow.Run {
	t.Helper()
	r := workflow.Run{
		ID: newID("run"), WorkflowID: w.ID, VersionID: v.ID, OwnerID: w.OwnerID,
		Input:      json.RawMessage(`{"draft":"hello"}`),
		LeaseOwner: lessee, LeaseExpiresAt: base.Add(time.Hour),
	}
	if edit != nil {
		edit(&r)
	}
	got, envs, err := s.CreateRun(t.Context(), r, initialEvents())
	if err != nil {
		t.Fatalf("CreateRun(%s): %v", r.ID, err)
	}
	if len(envs) != 2 {
		t.Fatalf("CreateRun(%s) returned %d envelopes, want 2", r.ID, len(envs))
	}
	return got
}

func initialEvents() []workflow.NewEvent {
	return []workflow.NewEvent{
		runEvent(workflow.EventRunCreated, `{"version":1}`),
		runEvent(workflow.EventRunQueued, `{"queue":"default"}`),
	}
}

func runEvent(typ workflow.EventType, data string) workflow.NewEvent {
	e := workflow.NewEvent{Event: typ}
	if data != "" {
		e.Data = json.RawMessage(data)
	}
	return e
}

func nodeEvent(typ workflow.EventType, node, data string) workflow.NewEvent {
	e := runEvent(typ, data)
	e.NodeID, e.NodeRunID = node, node+"-r1"
	return e
}

func progress(i int) workflow.NewEvent {
	return nodeEvent(workflow.EventNodeProgress, "n1", fmt.Sprintf(`{"percent":%d}`, i))
}

func appendEvents(t *testing.T, s workflow.Store, p workflow.AppendParams) []workflow.Envelope {
	t.Helper()
	envs, err := s.Append(t.Context(), p)
	if err != nil {
		t.Fatalf("Append(%s, %d events): %v", p.RunID, len(p.Events), err)
	}
	if len(envs) != len(p.Events) {
		t.Fatalf("Append(%s, %d events) returned %d envelopes", p.RunID, len(p.Events), len(envs))
	}
	return envs
}

func getRun(t *testing.T, s workflow.Store, id string) workflow.Run {
	t.Helper()
	r, err := s.GetRun(t.Context(), id, runstream.AnyOwner)
	if err != nil {
		t.Fatalf("GetRun(%s): %v", id, err)
	}
	return r
}

// allEvents reads every event of a run, page by page.
func allEvents(t *testing.T, s workflow.Store, runID string) []workflow.Envelope {
	t.Helper()
	var out []workflow.Envelope
	for {
		page, err := s.ListEvents(t.Context(), runID, int64(len(out)), workflow.MaxEventPageLimit)
		if err != nil {
			t.Fatalf("ListEvents(%s, %d): %v", runID, len(out), err)
		}
		out = append(out, page...)
		if len(page) < workflow.MaxEventPageLimit {
			return out
		}
	}
}

// unchanged fails unless the run row and its events are what they were.
func unchanged(t *testing.T, s workflow.Store, what string, run workflow.Run, events []workflow.Envelope) {
	t.Helper()
	sameRun(t, what+": run", getRun(t, s, run.ID), run)
	sameEnvelopes(t, what+": events", allEvents(t, s, run.ID), events)
}

func hashOf(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// wantCode fails unless err is a *runstream.Error with code.
func wantCode(t *testing.T, err error, code runstream.ErrorCode, what string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: got no error, want %s", what, code)
		return
	}
	var e *runstream.Error
	if !errors.As(err, &e) {
		t.Errorf("%s: error %v (%T) is not a *runstream.Error", what, err, err)
		return
	}
	if e.Code != code {
		t.Errorf("%s: code %s, want %s (%v)", what, e.Code, code, err)
	}
}

func seqsOf(envs []workflow.Envelope) []int64 {
	out := make([]int64, len(envs))
	for i, e := range envs {
		out[i] = e.Seq
	}
	return out
}

// span returns from, from+1, …, to.
func span(from, to int64) []int64 {
	out := []int64{}
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// checkDefaultTime fails unless a time the store chose is UTC, whole
// microseconds, and within [before, after].
func checkDefaultTime(t *testing.T, what string, got, before, after time.Time) {
	t.Helper()
	if _, off := got.Zone(); off != 0 {
		t.Errorf("%s %s: offset %ds, want UTC", what, got, off)
	}
	if got.Nanosecond()%1000 != 0 {
		t.Errorf("%s %s: not whole microseconds", what, got)
	}
	if got.Before(before.Truncate(time.Microsecond)) || got.After(after) {
		t.Errorf("%s %s: outside the call [%s, %s]", what, got, before, after)
	}
}
