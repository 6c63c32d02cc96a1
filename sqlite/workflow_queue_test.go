package sqlite

import (
	"bufio"
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

// TestClaimQueryPlan checks that Claim reads the partial index in
// (created_at, id) order: no scan of every run, no sort.
func TestClaimQueryPlan(t *testing.T) {
	t.Parallel()
	s := openWorkflowStore(t, Config{Path: filepath.Join(t.TempDir(), "runstream.db")})
	defer s.Close()
	for _, q := range []string{claimableSQL, claimSQL} {
		plan := workflowPlan(t, s.db, query{sql: q, args: []any{"worker-1", 2, 1}})
		text := strings.Join(plan, "\n")
		if !strings.Contains(text, "USING INDEX workflow_runs_claimable") {
			t.Errorf("the plan of %s does not use workflow_runs_claimable:\n%s", q, text)
		}
		for _, line := range plan {
			if strings.HasPrefix(line, "SCAN ") && !strings.Contains(line, " USING ") || strings.Contains(line, "TEMP B-TREE") {
				t.Errorf("the plan of %s has %q:\n%s", q, line, text)
			}
		}
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
				r, ok, err := s.Claim(t.Context(), worker, queueNow, queueNow.Add(queueLease))
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
