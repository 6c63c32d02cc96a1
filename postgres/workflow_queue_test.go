package postgres

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
	"github.com/runstream/runstream/workflowtest"
)

func TestWorkflowQueueConformance(t *testing.T) {
	testURL(t)
	workflowtest.RunQueue(t, workflowtest.Harness{
		Open: func(t *testing.T) workflow.Store { return openDB(t, newSchema(t)).Workflows() },
	})
}

// TestClaimAcrossInstances claims runs through two DBs over one schema
// (two pools, as two engine processes would have), with several workers
// each: every run is claimed exactly once, and its stored lease names the
// worker that got it.
func TestClaimAcrossInstances(t *testing.T) {
	schema := newSchema(t)
	stores := []*WorkflowStore{openDB(t, schema).Workflows(), openDB(t, schema).Workflows()}
	const runs, workersPerDB = 40, 4
	created := map[string]bool{}
	for range runs {
		created[newTestRun(t, stores[0], "alice").ID] = true
	}
	now := time.Now()
	var (
		mu     sync.Mutex
		claims = map[string][]string{}
		wg     sync.WaitGroup
	)
	for i, s := range stores {
		for j := range workersPerDB {
			worker := fmt.Sprintf("db%d-worker%d", i, j)
			wg.Go(func() {
				for {
					r, ok, err := s.Claim(t.Context(), worker, now, now.Add(time.Minute))
					if err != nil {
						t.Errorf("Claim(%s): %v", worker, err)
						return
					}
					if !ok {
						return
					}
					mu.Lock()
					claims[r.ID] = append(claims[r.ID], worker)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if len(claims) != runs {
		t.Errorf("%d runs claimed, want %d", len(claims), runs)
	}
	byDB := map[string]int{}
	for id, by := range claims {
		if !created[id] {
			t.Errorf("claimed run %s was never created", id)
		}
		if len(by) != 1 {
			t.Errorf("run %s claimed by %v, want exactly one worker", id, by)
			continue
		}
		got, err := stores[1].GetRun(t.Context(), id, runstream.AnyOwner)
		if err != nil {
			t.Fatal(err)
		}
		if got.LeaseOwner != by[0] {
			t.Errorf("run %s leased to %q, claimed by %q", id, got.LeaseOwner, by[0])
		}
		db, _, _ := strings.Cut(by[0], "-")
		byDB[db]++
	}
	t.Logf("claims by instance: %v", byDB)
}

// TestClaimSkipsLockedRun holds the row lock of the oldest claimable run
// in an open transaction: Claim does not wait for it, it takes the next
// run.
func TestClaimSkipsLockedRun(t *testing.T) {
	db := openDB(t, newSchema(t))
	s := db.Workflows()
	first := newTestRun(t, s, "alice")
	second := newTestRun(t, s, "alice")
	tx, err := db.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(t.Context())
	if _, err := tx.Exec(t.Context(), `SELECT 1 FROM workflow_runs WHERE id = $1 FOR UPDATE`, first.ID); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	r, ok, err := s.Claim(t.Context(), "w1", now, now.Add(time.Minute))
	if err != nil || !ok || r.ID != second.ID {
		t.Fatalf("Claim with the oldest run locked = %q, %t, %v; want %q", r.ID, ok, err, second.ID)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	r, ok, err = s.Claim(t.Context(), "w2", now, now.Add(time.Minute))
	if err != nil || !ok || r.ID != first.ID {
		t.Fatalf("Claim after the lock ended = %q, %t, %v; want %q", r.ID, ok, err, first.ID)
	}
}

// TestClaimUsesIndex checks that the claim reads the partial index of
// claimable runs, in (created_at, id) order, without a sort.
func TestClaimUsesIndex(t *testing.T) {
	db := openDB(t, newSchema(t))
	for range 3 {
		newTestRun(t, db.Workflows(), "alice")
	}
	ctx := t.Context()
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// A table this small is cheaper to scan; with sequential scans off the
	// plan shows the index the query can use. Claim runs with sorting off
	// (see queryPage).
	if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off"); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, "EXPLAIN "+claimSQL, "w", time.Now(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if !strings.Contains(plan, "workflow_runs_claimable") || strings.Contains(plan, "Sort") {
		t.Errorf("claim plan does not read workflow_runs_claimable in order:\n%s", plan)
	}
}

// TestNodeOutputsInGroup commits two appends to one run in one group
// transaction, both with an output of node n1: the later one is stored
// (the upsert never meets a key twice).
func TestNodeOutputsInGroup(t *testing.T) {
	db := openDB(t, newSchema(t))
	s := db.Workflows()
	run := newTestRun(t, s, "alice")
	outs := func(v string) map[string]json.RawMessage { return map[string]json.RawMessage{"n1": json.RawMessage(v)} }
	completed := workflow.NewEvent{Event: workflow.EventNodeCompleted, NodeID: "n1", NodeRunID: "n1-r1", Data: json.RawMessage(`{"durationMs":1}`)}
	errs := commitGroup(s.committers[0],
		workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{completed}, NodeOutputs: outs(`"first"`)},
		workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{completed}, NodeOutputs: outs(`"second"`)})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	got, err := s.NodeOutputs(t.Context(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || string(got["n1"]) != `"second"` {
		t.Errorf("NodeOutputs = %s; want n1 = \"second\"", got)
	}
}

// TestNodeOutputsUnstorable refuses outputs PostgreSQL cannot hold, before
// anything is written.
func TestNodeOutputsUnstorable(t *testing.T) {
	db := openDB(t, newSchema(t))
	s := db.Workflows()
	run := newTestRun(t, s, "alice")
	for name, outputs := range map[string]map[string]json.RawMessage{
		"NUL in node id":        {"n\x001": json.RawMessage(`1`)},
		"invalid UTF-8 node id": {"n\xff": json.RawMessage(`1`)},
		"invalid UTF-8 output":  {"n1": json.RawMessage("\"\xff\"")},
	} {
		_, err := s.Append(t.Context(), workflow.AppendParams{RunID: run.ID, NodeOutputs: outputs,
			Events: []workflow.NewEvent{progressEvent(`{}`)}})
		if runstream.ErrorCodeOf(err) != runstream.CodeInvalidArgument {
			t.Errorf("%s: Append = %v, want CodeInvalidArgument", name, err)
		}
	}
	if got, err := s.NodeOutputs(t.Context(), run.ID); err != nil || len(got) != 0 {
		t.Errorf("NodeOutputs = %v, %v; want none", got, err)
	}
}

// TestLeaseRefusesUnstorableWorker refuses a worker id PostgreSQL cannot
// store with CodeInvalidArgument, in every lease call.
func TestLeaseRefusesUnstorableWorker(t *testing.T) {
	db := openDB(t, newSchema(t))
	s, ctx := db.Workflows(), t.Context()
	run := newTestRun(t, s, "alice")
	now := time.Now()
	for _, worker := range []string{"w\x00", "w\xff"} {
		_, _, err := s.Claim(ctx, worker, now, now.Add(time.Minute))
		wantInvalid(t, err, fmt.Sprintf("Claim(%q)", worker))
		wantInvalid(t, s.RenewLease(ctx, run.ID, worker, now.Add(time.Minute)), fmt.Sprintf("RenewLease(%q)", worker))
		wantInvalid(t, s.ReleaseLease(ctx, run.ID, worker), fmt.Sprintf("ReleaseLease(%q)", worker))
	}
	if got, err := s.GetRun(ctx, run.ID, runstream.AnyOwner); err != nil || got.LeaseOwner != "" {
		t.Errorf("run after refused claims: lease %q, %v; want none", got.LeaseOwner, err)
	}
}
