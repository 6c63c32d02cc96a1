package sqlite

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
	"github.com/runstream/runstream/workflowtest"
)

func TestWorkflowQueueConformance(t *testing.T) {
	t.Parallel()
	workflowtest.RunQueue(t, workflowtest.Harness{
		Open: func(t *testing.T) workflow.Store {
			return openWorkflowStore(t, Config{Path: filepath.Join(t.TempDir(), "runstream.db"), Synchronous: SynchronousNormal})
		},
	})
}

// TestClaimQueryPlan checks that Claim reads the indexes it is written
// for: one search per visited owner in workflow_runs_waiting_owner
// (after the cursor, from the first up to it, and each owner's oldest
// waiting run), one per visited owner and the expired leases in
// workflow_runs_leased, the cancelling
// ones in workflow_runs_status, and no other scan of the runs (which
// would read an owner's whole backlog, or every run); then the lease is
// one search by id.
func TestClaimQueryPlan(t *testing.T) {
	t.Parallel()
	s := openWorkflowStore(t, Config{Path: filepath.Join(t.TempDir(), "runstream.db")})
	defer s.Close()
	for _, tc := range []struct {
		q    query
		want []string
	}{
		{query{sql: claimableSQL, args: []any{1, 3, "alice", workflow.ClaimWindow}}, []string{
			"SEARCH workflow_runs USING INDEX workflow_runs_waiting_owner (owner_id>?)",
			"SEARCH workflow_runs USING INDEX workflow_runs_waiting_owner (owner_id<?)",
			"SEARCH workflow_runs USING INDEX workflow_runs_waiting_owner (owner_id>? AND owner_id<?)",
			"SEARCH workflow_runs USING INDEX workflow_runs_waiting_owner (owner_id=?)",
			"SEARCH workflow_runs USING INDEX workflow_runs_leased (owner_id=?)",
			"SCAN workflow_runs USING INDEX workflow_runs_leased",
			"SEARCH workflow_runs USING INDEX workflow_runs_status (status=?)",
			"SEARCH r USING INDEX sqlite_autoindex_workflow_runs_1 (id=?)",
		}},
		{query{sql: claimSQL, args: []any{"worker-1", 2, "run-1"}}, []string{
			"SEARCH workflow_runs USING INDEX sqlite_autoindex_workflow_runs_1 (id=?)",
		}},
	} {
		plan := workflowPlan(t, s.db, tc.q)
		text := strings.Join(plan, "\n")
		for _, want := range tc.want {
			if !strings.Contains(text, want) {
				t.Errorf("the plan of %s lacks %q:\n%s", tc.q.sql, want, text)
			}
		}
		for _, line := range plan {
			if (strings.HasPrefix(line, "SCAN workflow_runs") || strings.HasPrefix(line, "SCAN r")) && !strings.Contains(line, "USING INDEX workflow_runs_leased") {
				t.Errorf("the plan of %s has %q:\n%s", tc.q.sql, line, text)
			}
		}
	}
}

// BenchmarkClaimBacklog claims with a backlog of alice's queued runs while
// alice executes 3 runs: "capped" (cap 3) finds nothing to claim, "fair"
// takes bob's run queued after the backlog (and releases it), "uncapped"
// takes alice's oldest (and releases it). The cost must not grow with the
// backlog: Claim searches once per owner, it does not read the backlog.
func BenchmarkClaimBacklog(b *testing.B) {
	for _, backlog := range []int{1000, 10000, 100000} {
		s := openWorkflowStore(b, Config{Path: filepath.Join(b.TempDir(), "runstream.db"), Synchronous: SynchronousNormal})
		b.Cleanup(func() { s.Close() })
		ctx := b.Context()
		create := func(owner string, n int) {
			w, v, err := s.CreateWorkflow(ctx, workflow.Workflow{ID: "wf-" + owner, OwnerID: owner}, workflow.Version{ID: "wv-" + owner})
			if err != nil {
				b.Fatal(err)
			}
			err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `WITH RECURSIVE i(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM i WHERE n < ?1)
					INSERT INTO workflow_runs (`+runColumns+`)
					SELECT ?2 || '-' || printf('%07d', n), ?3, ?4, ?2, 'queued', '{}', NULL, NULL, 2, n, n, NULL, NULL, '', NULL FROM i`,
					n, owner, w.ID, v.ID)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		create("alice", backlog)
		now := time.UnixMicro(int64(backlog) + 1)
		for i := range 3 {
			if _, ok, err := s.Claim(ctx, fmt.Sprintf("busy-%d", i), now, now.Add(time.Hour), 0); !ok || err != nil {
				b.Fatalf("Claim: %t, %v", ok, err)
			}
		}
		b.Run(fmt.Sprintf("backlog=%d/capped", backlog), func(b *testing.B) {
			for b.Loop() {
				if _, ok, err := s.Claim(ctx, "w", now, now.Add(time.Minute), 3); ok || err != nil {
					b.Fatalf("Claim: %t, %v", ok, err)
				}
			}
		})
		claimRelease := func(b *testing.B, maxPerOwner int, want string) {
			for b.Loop() {
				if r := workflowtest.ClaimRelease(b, s, now, maxPerOwner); !strings.HasPrefix(r.ID, want) {
					b.Fatalf("claimed %s, want a run of %s", r.ID, want)
				}
			}
		}
		b.Run(fmt.Sprintf("backlog=%d/uncapped", backlog), func(b *testing.B) { claimRelease(b, 0, "alice") })
		create("bob", 1)
		b.Run(fmt.Sprintf("backlog=%d/fair", backlog), func(b *testing.B) { claimRelease(b, 3, "bob") })
	}
}

// BenchmarkClaimManyOwners claims, and releases, with 10,000 owners of
// two queued runs each, none executing: a claim visits
// workflow.ClaimWindow owners after the store's cursor, whatever their
// number (a claim that visited every owner took 34 ms here).
func BenchmarkClaimManyOwners(b *testing.B) {
	const owners, runsPerOwner = 10000, 2
	s := openWorkflowStore(b, Config{Path: filepath.Join(b.TempDir(), "runstream.db"), Synchronous: SynchronousNormal})
	b.Cleanup(func() { s.Close() })
	ctx := b.Context()
	w, v, err := s.CreateWorkflow(ctx, workflow.Workflow{ID: "wf-1", OwnerID: "alice"}, workflow.Version{ID: "wv-1"})
	if err != nil {
		b.Fatal(err)
	}
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `WITH RECURSIVE i(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM i WHERE n + 1 < ?1)
			INSERT INTO workflow_runs (`+runColumns+`)
			SELECT printf('run-%07d', n), ?3, ?4, printf('user-%05d', n % ?2), 'queued', '{}', NULL, NULL, 2, n, n, NULL, NULL, '', NULL FROM i`,
			owners*runsPerOwner, owners, w.ID, v.ID)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	now := time.UnixMicro(owners*runsPerOwner + 1)
	for b.Loop() {
		workflowtest.ClaimRelease(b, s, now, 0)
	}
}

// The environment of TestQueueHelperProcess, set by
// TestQueueTwoProcesses.
const (
	queueHelperDBEnv   = "RUNSTREAM_SQLITE_QUEUE_HELPER_DB"
	queueHelperNameEnv = "RUNSTREAM_SQLITE_QUEUE_HELPER_NAME"
)

// queueClaimers is the number of goroutines that claim in each process.
const queueClaimers = 4

// queueNow and queueLease are the claim time and lease length of the
// two-process test: no lease expires while it runs.
var queueNow = time.Date(2026, 8, 26, 10, 0, 0, 0, time.UTC)

const queueLease = time.Hour

// claimAll claims runs from queueClaimers goroutines, workers name/0,
// name/1…, until none is claimable. As an engine does, each worker starts
// the run it claimed with an append fenced by its lease, then calls
// claimed.
func claimAll(t *testing.T, s ownedWorkflowStore, name string, claimed func(runID, worker string)) {
	var wg sync.WaitGroup
	for g := range queueClaimers {
		worker := fmt.Sprintf("%s/%d", name, g)
		wg.Go(func() {
			for {
				r, ok, err := s.Claim(t.Context(), worker, queueNow, queueNow.Add(queueLease), 0)
				if err != nil {
					t.Errorf("%s: Claim: %v", worker, err)
					return
				}
				if !ok {
					return
				}
				if r.LeaseOwner != worker {
					t.Errorf("%s: claimed run %s leased to %q", worker, r.ID, r.LeaseOwner)
				}
				started := []workflow.NewEvent{{Event: workflow.EventRunStarted}}
				if _, err := s.Append(t.Context(), workflow.AppendParams{RunID: r.ID, LeaseOwner: worker, Events: started}); err != nil {
					t.Errorf("%s: Append to claimed run %s: %v", worker, r.ID, err)
				}
				claimed(r.ID, worker)
			}
		})
	}
	wg.Wait()
}

// TestQueueHelperProcess is the body of the process that
// TestQueueTwoProcesses starts; run directly, it does nothing. It opens
// the database, prints "ready", waits for a line on stdin, then claims
// until no run is claimable, printing "claimed RUN WORKER" for each run.
func TestQueueHelperProcess(t *testing.T) {
	path := os.Getenv(queueHelperDBEnv)
	if path == "" {
		return
	}
	s := openWorkflowStore(t, Config{Path: path, BusyTimeout: time.Minute})
	defer s.Close()
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatalf("wait for the start: %v", err)
	}
	var mu sync.Mutex
	claimAll(t, s, os.Getenv(queueHelperNameEnv), func(runID, worker string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Println("claimed", runID, worker)
	})
}

// TestQueueTwoProcesses claims the runs of one file from two processes at
// once, with several goroutines each: every run is claimed exactly once,
// stays leased to the worker that claimed it and is started once. (How
// the claims split between the processes depends on SQLite's busy
// handler: it is logged, not checked.)
func TestQueueTwoProcesses(t *testing.T) {
	t.Parallel()
	const runs = 300
	path := filepath.Join(t.TempDir(), "runstream.db")
	s := openWorkflowStore(t, Config{Path: path, BusyTimeout: time.Minute})
	defer s.Close()
	w, v, err := s.CreateWorkflow(t.Context(), workflow.Workflow{ID: "wf-1", OwnerID: "alice"}, workflow.Version{ID: "wv-1"})
	if err != nil {
		t.Fatalf("CreateWorkflow: %v", err)
	}
	for i := range runs {
		r := workflow.Run{ID: fmt.Sprintf("run-%02d", i), WorkflowID: w.ID, VersionID: v.ID, OwnerID: "alice", CreatedAt: queueNow.Add(time.Duration(i) * time.Second)}
		if _, _, err := s.CreateRun(t.Context(), r, nil); err != nil {
			t.Fatalf("CreateRun: %v", err)
		}
	}

	child := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestQueueHelperProcess$", "-test.count=1")
	child.Env = append(os.Environ(), queueHelperDBEnv+"="+path, queueHelperNameEnv+"=child")
	var stderr strings.Builder
	child.Stderr = &stderr
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatalf("start the child: %v", err)
	}
	out := bufio.NewReader(stdout)
	if line, err := out.ReadString('\n'); err != nil || line != "ready\n" {
		child.Wait()
		t.Fatalf("child: %q, %v; want ready\n%s", line, err, stderr.String())
	}

	var (
		mu     sync.Mutex
		claims = map[string][]string{} // run id → the workers that claimed it
	)
	claimed := func(runID, worker string) {
		mu.Lock()
		defer mu.Unlock()
		claims[runID] = append(claims[runID], worker)
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil { // both processes claim at once
		t.Fatalf("start the child: %v", err)
	}
	claimAll(t, s, "parent", claimed)
	rest, _ := io.ReadAll(out) // read before Wait closes the pipe
	if err := child.Wait(); err != nil {
		t.Fatalf("child: %v\n%s%s", err, rest, stderr.String())
	}
	byProcess := map[string]int{}
	for _, line := range strings.Split(string(rest), "\n") {
		var runID, worker string
		if _, err := fmt.Sscanf(line, "claimed %s %s", &runID, &worker); err == nil {
			claimed(runID, worker)
		}
	}

	if len(claims) != runs {
		t.Errorf("%d runs claimed, want %d", len(claims), runs)
	}
	for id, by := range claims {
		if len(by) != 1 {
			t.Errorf("run %s claimed by %v, want exactly one worker", id, by)
			continue
		}
		byProcess[strings.Split(by[0], "/")[0]]++
		got, err := s.GetRun(t.Context(), id, runstream.AnyOwner)
		if err != nil {
			t.Fatalf("GetRun(%s): %v", id, err)
		}
		if got.LeaseOwner != by[0] || !got.LeaseExpiresAt.Equal(queueNow.Add(queueLease)) {
			t.Errorf("run %s leased to %q until %s, claimed by %q until %s", id, got.LeaseOwner, got.LeaseExpiresAt, by[0], queueNow.Add(queueLease))
		}
		if got.Status != workflow.StatusRunning || got.LastSeq != 1 {
			t.Errorf("run %s: status %s, LastSeq %d; want started once", id, got.Status, got.LastSeq)
		}
	}
	t.Logf("runs claimed by process: %v", byProcess)
}
