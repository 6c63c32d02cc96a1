package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
	"github.com/runstream/runstream/workflowtest"
)

// ownedWorkflowStore is a workflow store that closes its DB when closed,
// as the conformance suite expects of the stores it opens.
type ownedWorkflowStore struct {
	*WorkflowStore
	db *DB
}

func (s ownedWorkflowStore) Close() error { return errors.Join(s.WorkflowStore.Close(), s.db.Close()) }

// openWorkflowStore opens a DB with cfg and returns its workflow store.
func openWorkflowStore(tb testing.TB, cfg Config) ownedWorkflowStore {
	tb.Helper()
	db, err := Open(tb.Context(), cfg)
	if err != nil {
		tb.Fatalf("Open(%+v): %v", cfg, err)
	}
	return ownedWorkflowStore{WorkflowStore: db.Workflows(), db: db}
}

func TestWorkflowStoreConformance(t *testing.T) {
	t.Parallel()
	workflowtest.Run(t, workflowtest.Harness{
		Open: func(t *testing.T) workflow.Store {
			return openWorkflowStore(t, Config{Path: filepath.Join(t.TempDir(), "runstream.db"), Synchronous: SynchronousFull})
		},
		OpenReopenable: func(t *testing.T) (workflow.Store, func() workflow.Store) {
			cfg := Config{Path: filepath.Join(t.TempDir(), "runstream.db"), Synchronous: SynchronousFull}
			cur := openWorkflowStore(t, cfg)
			return cur, func() workflow.Store {
				if err := cur.Close(); err != nil {
					t.Fatalf("Close before reopen: %v", err)
				}
				cur = openWorkflowStore(t, cfg)
				return cur
			}
		},
	})
}

// wantWorkflowCode fails unless err is a *runstream.Error with code.
func wantWorkflowCode(t *testing.T, err error, code runstream.ErrorCode, what string) {
	t.Helper()
	if got := runstream.ErrorCodeOf(err); got != code {
		t.Errorf("%s: error %v (code %q), want code %s", what, err, got, code)
	}
}

// newWorkflowRun creates a workflow of alice and a run of it without
// events.
func newWorkflowRun(t *testing.T, s ownedWorkflowStore, runID string) workflow.Run {
	t.Helper()
	w, v, err := s.CreateWorkflow(t.Context(), workflow.Workflow{ID: "wf-" + runID, OwnerID: "alice"}, workflow.Version{ID: "wv-" + runID})
	if err != nil {
		t.Fatalf("CreateWorkflow: %v", err)
	}
	r, _, err := s.CreateRun(t.Context(), workflow.Run{ID: runID, WorkflowID: w.ID, VersionID: v.ID, OwnerID: "alice", LeaseOwner: "worker-1"}, nil)
	if err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	return r
}

func workflowProgress(i int) workflow.NewEvent {
	return workflow.NewEvent{Event: workflow.EventNodeProgress, NodeID: "n1", Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
}

// TestWorkflowGroupedRequests queues writes while the write loop is busy,
// so that they are committed as one group transaction: the appends get
// consecutive seqs, and a refused request, which wrote rows before it
// failed, leaves nothing behind without failing the others.
func TestWorkflowGroupedRequests(t *testing.T) {
	t.Parallel()
	s := openWorkflowStore(t, Config{Path: filepath.Join(t.TempDir(), "runstream.db")})
	defer s.Close()
	ctx := t.Context()
	run := newWorkflowRun(t, s, "run-1")
	if _, err := s.Append(ctx, workflow.AppendParams{RunID: run.ID, Artifacts: []workflow.Artifact{{ID: "a1"}},
		Events: []workflow.NewEvent{{Event: workflow.EventArtifactCreated, NodeID: "n1"}}}); err != nil {
		t.Fatalf("Append: %v", err)
	}

	// Occupy the write loop until every request below is queued.
	started, release := make(chan struct{}, 1), make(chan struct{})
	blocker := make(chan error, 1)
	go func() {
		blocker <- s.db.write(ctx, func(context.Context, *sql.Tx) error {
			select {
			case started <- struct{}{}:
			default:
			}
			<-release
			return nil
		})
	}()
	<-started
	before := s.db.stats.transactions.Load()

	const appends = 20
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		seqs    []int64
		refused = map[string]error{}
	)
	refuse := func(name string, f func() error) {
		wg.Go(func() {
			err := f()
			mu.Lock()
			refused[name] = err
			mu.Unlock()
		})
	}
	for i := range appends {
		wg.Go(func() {
			envs, err := s.Append(ctx, workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{workflowProgress(i)}})
			if err != nil {
				t.Errorf("append %d: %v", i, err)
				return
			}
			mu.Lock()
			seqs = append(seqs, envs[0].Seq)
			mu.Unlock()
		})
	}
	refuse("artifact the run has", func() error {
		_, err := s.Append(ctx, workflow.AppendParams{RunID: run.ID,
			Artifacts: []workflow.Artifact{{ID: "fresh"}, {ID: "a1"}},
			Events:    []workflow.NewEvent{{Event: workflow.EventArtifactCreated, NodeID: "n1"}, {Event: workflow.EventArtifactCreated, NodeID: "n1"}}})
		return err
	})
	refuse("another lessee", func() error {
		_, err := s.Append(ctx, workflow.AppendParams{RunID: run.ID, LeaseOwner: "worker-2", Events: []workflow.NewEvent{workflowProgress(-1)}})
		return err
	})
	refuse("used version id", func() error {
		_, _, err := s.CreateWorkflow(ctx, workflow.Workflow{ID: "wf-refused", OwnerID: "alice"}, workflow.Version{ID: "wv-" + run.ID})
		return err
	})
	const requests = appends + 3
	for len(s.db.queue) < requests {
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	if err := <-blocker; err != nil {
		t.Fatalf("blocking write: %v", err)
	}

	if got := s.db.stats.transactions.Load() - before; got != 0 {
		t.Errorf("%d requests took %d transactions of their own, want none: they join the blocker's", requests, got)
	}
	slices.Sort(seqs)
	if want := []int64{2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21}; !slices.Equal(seqs, want) {
		t.Errorf("appended seqs %v, want %v", seqs, want)
	}
	for name, err := range refused {
		wantWorkflowCode(t, err, runstream.CodeConflict, name)
	}
	_, err := s.GetArtifact(ctx, run.ID, "fresh")
	wantWorkflowCode(t, err, runstream.CodeNotFound, "artifact of the refused append")
	_, err = s.GetWorkflow(ctx, "wf-refused", runstream.AnyOwner)
	wantWorkflowCode(t, err, runstream.CodeWorkflowNotFound, "workflow of the refused create")
	if got, err := s.GetRun(ctx, run.ID, runstream.AnyOwner); err != nil || got.LastSeq != 1+appends {
		t.Errorf("run LastSeq %d, %v; want %d", got.LastSeq, err, 1+appends)
	}
	if got, err := s.ListEvents(ctx, run.ID, 0, 100); err != nil || len(got) != 1+appends {
		t.Errorf("%d events stored, %v; want %d", len(got), err, 1+appends)
	}
}

// TestWorkflowIDLength refuses ids longer than 128 bytes, which a call
// would store, and accepts 128.
func TestWorkflowIDLength(t *testing.T) {
	t.Parallel()
	s := openWorkflowStore(t, Config{Path: filepath.Join(t.TempDir(), "runstream.db")})
	defer s.Close()
	ctx := t.Context()
	long, max := strings.Repeat("x", 129), strings.Repeat("y", 128)
	run := newWorkflowRun(t, s, "run-1")
	cases := []struct {
		name string
		call func() error
	}{
		{"workflow id", func() error {
			_, _, err := s.CreateWorkflow(ctx, workflow.Workflow{ID: long, OwnerID: "alice"}, workflow.Version{ID: "wv-a"})
			return err
		}},
		{"workflow owner", func() error {
			_, _, err := s.CreateWorkflow(ctx, workflow.Workflow{ID: "wf-b", OwnerID: long}, workflow.Version{ID: "wv-b"})
			return err
		}},
		{"first version id", func() error {
			_, _, err := s.CreateWorkflow(ctx, workflow.Workflow{ID: "wf-c", OwnerID: "alice"}, workflow.Version{ID: long})
			return err
		}},
		{"version id", func() error {
			_, err := s.AddVersion(ctx, workflow.Version{ID: long, WorkflowID: run.WorkflowID}, runstream.AnyOwner)
			return err
		}},
		{"run id", func() error {
			_, _, err := s.CreateRun(ctx, workflow.Run{ID: long, WorkflowID: run.WorkflowID, VersionID: run.VersionID, OwnerID: "alice"}, nil)
			return err
		}},
		{"run owner", func() error {
			_, _, err := s.CreateRun(ctx, workflow.Run{ID: "run-d", WorkflowID: run.WorkflowID, VersionID: run.VersionID, OwnerID: long}, nil)
			return err
		}},
		{"artifact id", func() error {
			_, err := s.Append(ctx, workflow.AppendParams{RunID: run.ID, Artifacts: []workflow.Artifact{{ID: long}},
				Events: []workflow.NewEvent{{Event: workflow.EventArtifactCreated, NodeID: "n1"}}})
			return err
		}},
	}
	for _, c := range cases {
		wantWorkflowCode(t, c.call(), runstream.CodeInvalidArgument, c.name)
	}
	w, v, err := s.CreateWorkflow(ctx, workflow.Workflow{ID: max, OwnerID: max}, workflow.Version{ID: max})
	if err != nil {
		t.Fatalf("CreateWorkflow with 128-byte ids: %v", err)
	}
	if _, _, err := s.CreateRun(ctx, workflow.Run{ID: max, WorkflowID: w.ID, VersionID: v.ID, OwnerID: max}, nil); err != nil {
		t.Errorf("CreateRun with 128-byte ids: %v", err)
	}
	if _, err := s.Append(ctx, workflow.AppendParams{RunID: max, Artifacts: []workflow.Artifact{{ID: max}},
		Events: []workflow.NewEvent{{Event: workflow.EventArtifactCreated, NodeID: "n1"}}}); err != nil {
		t.Errorf("Append of an artifact with a 128-byte id: %v", err)
	}
}

// TestWorkflowVerbatimJSON reads JSON values back byte for byte, white
// space included, after a reopen.
func TestWorkflowVerbatimJSON(t *testing.T) {
	t.Parallel()
	cfg := Config{Path: filepath.Join(t.TempDir(), "runstream.db")}
	s := openWorkflowStore(t, cfg)
	ctx := t.Context()
	const (
		definition = "{ \"nodes\" : [ ],\n  \"name\":\"r\u00e9view\" }"
		input      = `{"q" : "\u00e9", "n": 1.50}`
		data       = "{\"delta\" :\t\"a\\u2028b\"}"
		output     = `{"output": { "ok" : true } }`
	)
	w, v, err := s.CreateWorkflow(ctx, workflow.Workflow{ID: "wf-1", OwnerID: "alice"}, workflow.Version{ID: "wv-1", Definition: json.RawMessage(definition)})
	if err != nil {
		t.Fatalf("CreateWorkflow: %v", err)
	}
	if _, _, err := s.CreateRun(ctx, workflow.Run{ID: "run-1", WorkflowID: w.ID, VersionID: v.ID, OwnerID: "alice", Input: json.RawMessage(input)}, nil); err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	if _, err := s.Append(ctx, workflow.AppendParams{RunID: "run-1", Events: []workflow.NewEvent{
		{Event: workflow.EventNodeOutputDelta, NodeID: "n1", Data: json.RawMessage(data)},
		{Event: workflow.EventRunCompleted, Data: json.RawMessage(output)},
	}}); err != nil {
		t.Fatalf("Append: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s = openWorkflowStore(t, cfg)
	defer s.Close()
	gv, err := s.GetVersion(ctx, w.ID, v.ID, runstream.AnyOwner)
	if err != nil || string(gv.Definition) != definition {
		t.Errorf("definition %q, %v; want %q", gv.Definition, err, definition)
	}
	r, err := s.GetRun(ctx, "run-1", runstream.AnyOwner)
	if err != nil || string(r.Input) != input || string(r.Output) != `{ "ok" : true }` {
		t.Errorf("run input %q, output %q, %v; want %q and %q", r.Input, r.Output, err, input, `{ "ok" : true }`)
	}
	events, err := s.ListEvents(ctx, "run-1", 0, 10)
	if err != nil || len(events) != 2 || string(events[0].Data) != data || string(events[1].Data) != output {
		t.Errorf("events %+v, %v; want data %q and %q", events, err, data, output)
	}
}

// TestWorkflowClosedDB fails calls with CodeUnavailable once the DB is
// closed.
func TestWorkflowClosedDB(t *testing.T) {
	t.Parallel()
	s := openWorkflowStore(t, Config{Path: filepath.Join(t.TempDir(), "runstream.db")})
	run := newWorkflowRun(t, s, "run-1")
	if err := s.db.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, err := s.GetRun(t.Context(), run.ID, runstream.AnyOwner)
	wantWorkflowCode(t, err, runstream.CodeUnavailable, "GetRun")
	_, err = s.ListEvents(t.Context(), run.ID, 0, 10)
	wantWorkflowCode(t, err, runstream.CodeUnavailable, "ListEvents")
	_, err = s.Append(t.Context(), workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{workflowProgress(1)}})
	wantWorkflowCode(t, err, runstream.CodeUnavailable, "Append")
}
