package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
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
	claimers := map[string]workflow.Queue{}
	for i, s := range stores {
		for j := range workersPerDB {
			claimers[fmt.Sprintf("db%d-worker%d", i, j)] = s
		}
	}
	claims := map[string][]string{} // run id → workers
	for _, c := range workflowtest.ClaimUntilEmpty(t, claimers, now, now.Add(time.Minute), 0) {
		claims[c.Run.ID] = append(claims[c.Run.ID], c.Worker)
	}
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

// TestClaimSkipsLockedRun holds the row lock of the best claimable run
// (alice's, the oldest) in an open transaction: Claim does not wait for
// it, it takes another candidate (bob's run), and alice's once the lock
// ends.
func TestClaimSkipsLockedRun(t *testing.T) {
	db := openDB(t, newSchema(t))
	s := db.Workflows()
	first := newTestRun(t, s, "alice")
	second := newTestRun(t, s, "bob")
	tx, err := db.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(t.Context())
	if _, err := tx.Exec(t.Context(), `SELECT 1 FROM workflow_runs WHERE id = $1 FOR UPDATE`, first.ID); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	r, ok, err := s.Claim(t.Context(), "w1", now, now.Add(time.Minute), 0)
	if err != nil || !ok || r.ID != second.ID {
		t.Fatalf("Claim with the oldest run locked = %q, %t, %v; want %q", r.ID, ok, err, second.ID)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	r, ok, err = s.Claim(t.Context(), "w2", now, now.Add(time.Minute), 0)
	if err != nil || !ok || r.ID != first.ID {
		t.Fatalf("Claim after the lock ended = %q, %t, %v; want %q", r.ID, ok, err, first.ID)
	}
}

// TestClaimUsesIndex checks, on a table of many runs (alice's backlog of
// queued runs, her finished runs, a few runs of other owners) with fresh
// statistics, that the claim reads the indexes it is written for: one
// search per owner in workflow_runs_waiting_owner and the leased runs in
// workflow_runs_leased, never the table nor workflow_runs_claimable, which
// would walk alice's backlog to find another owner's run.
func TestClaimUsesIndex(t *testing.T) {
	db := openDB(t, newSchema(t))
	s, ctx := db.Workflows(), t.Context()
	now := time.Now()
	for _, owner := range []string{"alice", "bob", "carol"} {
		run := newTestRun(t, s, owner)
		if owner != "alice" {
			continue
		}
		// 20,000 runs of alice, every other one completed, all older than
		// the runs of bob and carol.
		if _, err := db.pool.Exec(ctx, `INSERT INTO workflow_runs
			(id, workflow_id, version_id, owner_id, status, input, last_seq, created_at, updated_at, lease_owner)
			SELECT 'backlog-' || n, $1, $2, 'alice', CASE WHEN n % 2 = 0 THEN 'completed' ELSE 'queued' END,
				'{}', 2, $3::timestamptz - interval '1 day' + n * interval '1 ms', $3, ''
			FROM generate_series(1, 20000) n`, run.WorkflowID, run.VersionID, now); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if _, ok, err := s.Claim(ctx, fmt.Sprintf("busy-%d", i), now, now.Add(time.Hour), 0); !ok || err != nil {
				t.Fatalf("Claim: %t, %v", ok, err)
			}
		}
	}
	if _, err := db.pool.Exec(ctx, "ANALYZE workflow_runs"); err != nil {
		t.Fatal(err)
	}
	rows, err := db.pool.Query(ctx, "EXPLAIN "+claimSQL, "w", now, now.Add(time.Minute), int64(3), "", workflow.ClaimWindow)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	for _, want := range []string{"using workflow_runs_waiting_owner on", "using workflow_runs_leased on"} {
		if !strings.Contains(plan, want) {
			t.Errorf("the claim plan lacks %q:\n%s", want, plan)
		}
	}
	for _, bad := range []string{"Seq Scan on workflow_runs", "using workflow_runs_claimable on"} {
		if strings.Contains(plan, bad) {
			t.Errorf("the claim plan has %q:\n%s", bad, plan)
		}
	}
	// And the claim takes bob's run, queued after alice's backlog.
	r, ok, err := s.Claim(ctx, "w", now, now.Add(time.Minute), 3)
	if err != nil || !ok || r.OwnerID != "bob" {
		t.Errorf("Claim = run %q of %q, %t, %v; want bob's run", r.ID, r.OwnerID, ok, err)
	}
}

// TestClaimCapSnapshotAfterLock: a claim under a cap waits for the claim
// lock, and counts the leases committed while it waited. alice executes
// one run and has two queued; while a claim with cap 2 waits for the lock,
// another session leases alice's newer queued run: the claim must find
// alice at her cap and take nothing (a snapshot taken before the lock
// would count one run and take her older one, a third).
func TestClaimCapSnapshotAfterLock(t *testing.T) {
	schema := newSchema(t)
	db := openDB(t, schema)
	s, ctx := db.Workflows(), t.Context()
	now := time.Now()
	first := newTestRun(t, s, "alice")
	older, newer := newTestRun(t, s, "alice"), newTestRun(t, s, "alice")
	if r, ok, err := s.Claim(ctx, "w1", now, now.Add(time.Hour), 2); err != nil || !ok || r.ID != first.ID {
		t.Fatalf("Claim = %q, %t, %v; want %q", r.ID, ok, err, first.ID)
	}
	gate, err := pgx.Connect(ctx, testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Close(ctx)
	key := claimLockKeyOf(t, gate, schema)
	if _, err := gate.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		t.Fatal(err)
	}
	type result struct {
		r   workflow.Run
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, ok, err := s.Claim(ctx, "w2", now, now.Add(time.Hour), 2)
		done <- result{r, ok, err}
	}()
	waitForGate(t, gate, key, 1)
	if _, err := gate.Exec(ctx, "UPDATE "+pgx.Identifier{schema, "workflow_runs"}.Sanitize()+" SET lease_owner = 'other', lease_expires_at = $2 WHERE id = $1",
		newer.ID, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := gate.Exec(ctx, "SELECT pg_advisory_unlock($1)", key); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil || got.ok {
		t.Errorf("Claim after the lock = %q, %t, %v; want none (alice at her cap of 2)", got.r.ID, got.ok, got.err)
	}
	if r, err := s.GetRun(ctx, older.ID, runstream.AnyOwner); err != nil || r.LeaseOwner != "" {
		t.Errorf("alice's older run: lease %q, %v; want none", r.LeaseOwner, err)
	}
}

// insertQueuedRuns inserts n queued runs of workflow w (version v)
// without a lease, of owners user-00000 … (n spread over owners owners),
// created a day before now, in order.
func insertQueuedRuns(tb testing.TB, db *DB, w workflow.Run, n, owners int, now time.Time) {
	tb.Helper()
	if _, err := db.pool.Exec(tb.Context(), `INSERT INTO workflow_runs
		(id, workflow_id, version_id, owner_id, status, input, last_seq, created_at, updated_at, lease_owner)
		SELECT 'many-' || i, $1, $2, 'user-' || lpad((i % $4)::text, 5, '0'), 'queued',
			'{}', 2, $3::timestamptz - interval '1 day' + i * interval '1 ms', $3, ''
		FROM generate_series(0, $5 - 1) i`, w.WorkflowID, w.VersionID, now, owners, n); err != nil {
		tb.Fatal(err)
	}
	if _, err := db.pool.Exec(tb.Context(), "ANALYZE workflow_runs"); err != nil {
		tb.Fatal(err)
	}
}

// TestClaimVisitsBoundedOwners: with 1,000 owners waiting, a claim
// searches workflow_runs_waiting_owner for at most
// workflow.ClaimWindow owners (each: the owner after the last one, then
// its oldest waiting run), as EXPLAIN ANALYZE counts the searches, not
// once per owner.
func TestClaimVisitsBoundedOwners(t *testing.T) {
	db := openDB(t, newSchema(t))
	s, ctx := db.Workflows(), t.Context()
	now := time.Now()
	const owners = 1000
	insertQueuedRuns(t, db, newTestRun(t, s, "alice"), 2*owners, owners, now)
	var plan []map[string]any
	if err := db.pool.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+claimSQL,
		"w", now, now.Add(time.Minute), int64(0), "", workflow.ClaimWindow).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	var searches func(node map[string]any) int
	searches = func(node map[string]any) int {
		n := 0
		if node["Index Name"] == "workflow_runs_waiting_owner" {
			n = int(node["Actual Loops"].(float64))
		}
		children, _ := node["Plans"].([]any)
		for _, c := range children {
			n += searches(c.(map[string]any))
		}
		return n
	}
	// ClaimWindow+1 searches for the next owner (the last finds none past
	// the window), one for the first owner, ClaimWindow for the oldest runs.
	got, most := searches(plan[0]["Plan"].(map[string]any)), 2*workflow.ClaimWindow+2
	t.Logf("%d searches of workflow_runs_waiting_owner", got)
	if got > most {
		t.Errorf("a claim searched workflow_runs_waiting_owner %d times, want at most %d", got, most)
	}
}

// BenchmarkClaimManyOwners claims, and releases, with 20,000 queued runs
// of 1 owner ("backlog") or of 10,000 owners ("owners"), none executing:
// a claim visits workflow.ClaimWindow owners after the store's cursor,
// whatever their number.
func BenchmarkClaimManyOwners(b *testing.B) {
	for _, owners := range []int{1, 10000} {
		db := openDB(b, newSchema(b))
		s := db.Workflows()
		now := time.Now()
		insertQueuedRuns(b, db, newTestRun(b, s, "alice"), 20000, owners, now)
		b.Run(fmt.Sprintf("owners=%d", owners), func(b *testing.B) {
			for b.Loop() {
				workflowtest.ClaimRelease(b, s, now, 0)
			}
		})
	}
}

// claimLockKeyOf returns the key of the claim lock of schema, computed by
// conn with schema as its search path (conn's is reset after).
func claimLockKeyOf(t *testing.T, conn *pgx.Conn, schema string) int64 {
	t.Helper()
	ctx := t.Context()
	if _, err := conn.Exec(ctx, "SET search_path = "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	var key int64
	if err := conn.QueryRow(ctx, "SELECT "+claimLockKey).Scan(&key); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "RESET search_path"); err != nil {
		t.Fatal(err)
	}
	return key
}

// TestClaimLockPerSchema: the claim lock is the schema's. While another
// session holds the claim lock of schema one, a claim in schema two (of
// the same database) does not wait, and a claim in schema one waits until
// the lock is released.
func TestClaimLockPerSchema(t *testing.T) {
	one, two := newSchema(t), newSchema(t)
	s1, s2 := openDB(t, one).Workflows(), openDB(t, two).Workflows()
	r1, r2 := newTestRun(t, s1, "alice"), newTestRun(t, s2, "alice")
	ctx := t.Context()
	gate, err := pgx.Connect(ctx, testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Close(ctx)
	key := claimLockKeyOf(t, gate, one)
	if key == claimLockKeyOf(t, gate, two) {
		t.Fatalf("schemas %s and %s share the claim lock key %d", one, two, key)
	}
	if _, err := gate.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	done := make(chan error, 1)
	go func() {
		r, ok, err := s1.Claim(ctx, "w1", now, now.Add(time.Minute), 0)
		if err == nil && (!ok || r.ID != r1.ID) {
			err = fmt.Errorf("got %q, %t; want %q", r.ID, ok, r1.ID)
		}
		done <- err
	}()
	waitForGate(t, gate, key, 1)
	short, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if r, ok, err := s2.Claim(short, "w2", now, now.Add(time.Minute), 0); err != nil || !ok || r.ID != r2.ID {
		t.Errorf("Claim in schema two while schema one's lock is held = %q, %t, %v; want %q", r.ID, ok, err, r2.ID)
	}
	select {
	case err := <-done:
		t.Fatalf("Claim in schema one returned while its lock is held: %v", err)
	default:
	}
	if _, err := gate.Exec(ctx, "SELECT pg_advisory_unlock($1)", key); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("Claim in schema one after the lock: %v", err)
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
		_, _, err := s.Claim(ctx, worker, now, now.Add(time.Minute), 0)
		wantInvalid(t, err, fmt.Sprintf("Claim(%q)", worker))
		wantInvalid(t, s.RenewLease(ctx, run.ID, worker, now.Add(time.Minute)), fmt.Sprintf("RenewLease(%q)", worker))
		wantInvalid(t, s.ReleaseLease(ctx, run.ID, worker), fmt.Sprintf("ReleaseLease(%q)", worker))
	}
	if got, err := s.GetRun(ctx, run.ID, runstream.AnyOwner); err != nil || got.LeaseOwner != "" {
		t.Errorf("run after refused claims: lease %q, %v; want none", got.LeaseOwner, err)
	}
}
