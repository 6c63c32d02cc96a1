package sqlite

import (
	"bufio"
	"bytes"
	"encoding/json"
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
)

// The environment of TestWorkflowHelperProcess, set by
// TestWorkflowTwoProcesses.
const (
	wfHelperDBEnv   = "RUNSTREAM_SQLITE_HELPER_DB"
	wfHelperRunEnv  = "RUNSTREAM_SQLITE_HELPER_RUN"
	wfHelperNameEnv = "RUNSTREAM_SQLITE_HELPER_NAME"
)

// Each helper process appends wfHelperWriters*wfHelperAppends single events.
const wfHelperWriters, wfHelperAppends = 4, 50

// TestWorkflowHelperProcess is the body of the processes that
// TestWorkflowTwoProcesses starts; run directly, it does nothing. It opens
// the database, prints "ready", waits for a line on stdin, then appends
// from wfHelperWriters goroutines, each event's data naming its process,
// goroutine and index.
func TestWorkflowHelperProcess(t *testing.T) {
	path := os.Getenv(wfHelperDBEnv)
	if path == "" {
		return
	}
	runID, name := os.Getenv(wfHelperRunEnv), os.Getenv(wfHelperNameEnv)
	// The other process may hold the write lock for many of its groups in
	// a row (SQLite's busy handler backs off): wait long enough for it.
	s := openWorkflowStore(t, Config{Path: path, BusyTimeout: time.Minute})
	defer s.Close()
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatalf("wait for the start: %v", err)
	}
	var wg sync.WaitGroup
	for g := range wfHelperWriters {
		wg.Go(func() {
			for i := range wfHelperAppends {
				e := workflow.NewEvent{Event: workflow.EventNodeProgress, NodeID: name,
					Data: json.RawMessage(fmt.Sprintf(`{"p":%q,"g":%d,"i":%d}`, name, g, i))}
				if _, err := s.Append(t.Context(), workflow.AppendParams{RunID: runID, Events: []workflow.NewEvent{e}}); err != nil {
					t.Errorf("%s writer %d: Append: %v", name, g, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// workflowHelper is a started TestWorkflowHelperProcess.
type workflowHelper struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr bytes.Buffer
}

func startWorkflowHelper(t *testing.T, path, runID, name string) *workflowHelper {
	t.Helper()
	h := &workflowHelper{cmd: exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestWorkflowHelperProcess$", "-test.count=1")}
	h.cmd.Env = append(os.Environ(), wfHelperDBEnv+"="+path, wfHelperRunEnv+"="+runID, wfHelperNameEnv+"="+name)
	h.cmd.Stderr = &h.stderr
	var err error
	if h.stdin, err = h.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := h.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	h.stdout = bufio.NewReader(out)
	if err := h.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	for {
		line, err := h.stdout.ReadString('\n')
		if err != nil {
			h.cmd.Wait()
			t.Fatalf("%s did not get ready: %v\n%s", name, err, h.stderr.String())
		}
		if strings.TrimSpace(line) == "ready" {
			return h
		}
	}
}

// TestWorkflowTwoProcesses appends to one run from two processes at once:
// the seqs are 1..2N, each once, and every writer's events are stored in
// the order it appended them.
func TestWorkflowTwoProcesses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "runstream.db")
	s := openWorkflowStore(t, Config{Path: path})
	defer s.Close()
	w, v, err := s.CreateWorkflow(t.Context(), workflow.Workflow{ID: "wf-1", OwnerID: "alice"}, workflow.Version{ID: "wv-1"})
	if err != nil {
		t.Fatalf("CreateWorkflow: %v", err)
	}
	run, _, err := s.CreateRun(t.Context(), workflow.Run{ID: "run-1", WorkflowID: w.ID, VersionID: v.ID, OwnerID: "alice"}, nil)
	if err != nil {
		t.Fatalf("CreateRun: %v", err)
	}

	names := []string{"p1", "p2"}
	helpers := make([]*workflowHelper, len(names))
	for i, name := range names {
		helpers[i] = startWorkflowHelper(t, path, run.ID, name)
	}
	for _, h := range helpers { // both are ready: start them together
		if _, err := io.WriteString(h.stdin, "go\n"); err != nil {
			t.Fatalf("start helper: %v", err)
		}
	}
	for i, h := range helpers {
		rest, _ := io.ReadAll(h.stdout)
		if err := h.cmd.Wait(); err != nil {
			t.Fatalf("%s: %v\n%s%s", names[i], err, rest, h.stderr.String())
		}
	}

	const total = 2 * wfHelperWriters * wfHelperAppends
	var events []workflow.Envelope
	for {
		page, err := s.ListEvents(t.Context(), run.ID, int64(len(events)), workflow.MaxEventPageLimit)
		if err != nil {
			t.Fatalf("ListEvents: %v", err)
		}
		events = append(events, page...)
		if len(page) < workflow.MaxEventPageLimit {
			break
		}
	}
	if len(events) != total {
		t.Fatalf("%d events stored, want %d", len(events), total)
	}
	next := map[string]int{} // writer → index of its next event
	switches := 0
	for i, e := range events {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d, want %d", i, e.Seq, i+1)
		}
		var d struct {
			P    string
			G, I int
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatalf("seq %d: data %s: %v", e.Seq, e.Data, err)
		}
		writer := fmt.Sprintf("%s/%d", d.P, d.G)
		if d.I != next[writer] {
			t.Errorf("seq %d: event %d of %s, want %d", e.Seq, d.I, writer, next[writer])
		}
		next[writer] = d.I + 1
		if i > 0 && e.NodeID != events[i-1].NodeID {
			switches++
		}
	}
	for _, name := range names {
		for g := range wfHelperWriters {
			if n := next[fmt.Sprintf("%s/%d", name, g)]; n != wfHelperAppends {
				t.Errorf("%s writer %d: %d events stored, want %d", name, g, n, wfHelperAppends)
			}
		}
	}
	if got, err := s.GetRun(t.Context(), run.ID, runstream.AnyOwner); err != nil || got.LastSeq != total {
		t.Errorf("run LastSeq %d, %v; want %d", got.LastSeq, err, total)
	}
	t.Logf("the processes' events alternate %d times in seq order", switches)
}

// workflowPlan returns the details of the query plan of q.
func workflowPlan(t *testing.T, db *DB, q query) []string {
	t.Helper()
	rows, err := db.readers.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q.sql, q.args...)
	if err != nil {
		t.Fatalf("EXPLAIN QUERY PLAN %s: %v", q.sql, err)
	}
	defer rows.Close()
	var details []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		details = append(details, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return details
}

// TestWorkflowQueryPlans checks that the reads search indexes in their
// order: no full table scan and no sort.
func TestWorkflowQueryPlans(t *testing.T) {
	t.Parallel()
	s := openWorkflowStore(t, Config{Path: filepath.Join(t.TempDir(), "runstream.db")})
	defer s.Close()
	alice := runstream.OwnedBy("alice")
	cases := []struct {
		name string
		q    query
		want string // a plan line that must appear, if not ""
	}{
		{"ListEvents", query{listEventsSQL, []any{100, "run-1", 500}}, "SEARCH e USING PRIMARY KEY (run_id=? AND seq>?)"},
		{"ListWorkflows", workflowsQuery(workflow.ListWorkflowsParams{Owner: alice, Limit: 10}, 0), "workflows_owner_created"},
		{"ListWorkflows after a cursor", workflowsQuery(workflow.ListWorkflowsParams{Owner: alice, BeforeID: "wf-9", Limit: 10}, 5), "workflows_owner_created"},
		{"ListWorkflows of every owner", workflowsQuery(workflow.ListWorkflowsParams{Owner: runstream.AnyOwner, BeforeID: "wf-9", Limit: 10}, 5), "workflows_created"},
		{"ListRuns", runsQuery(workflow.ListRunsParams{Owner: alice, BeforeID: "run-9", Limit: 10}, 5), "workflow_runs_owner_created"},
		{"ListRuns of a workflow", runsQuery(workflow.ListRunsParams{Owner: alice, WorkflowID: "wf-1", Limit: 10}, 0), "workflow_runs_owner_workflow"},
		{"ListRuns of a status", runsQuery(workflow.ListRunsParams{Owner: alice, Status: workflow.StatusQueued, Limit: 10}, 0), "workflow_runs_owner_status"},
		{"ListRuns of every owner", runsQuery(workflow.ListRunsParams{Owner: runstream.AnyOwner, Limit: 10}, 0), "workflow_runs_created"},
		{"ListRuns of every owner of a status", runsQuery(workflow.ListRunsParams{Owner: runstream.AnyOwner, Status: workflow.StatusQueued, BeforeID: "run-9", Limit: 10}, 5), "workflow_runs_status"},
		{"ListRuns of every owner of a workflow", runsQuery(workflow.ListRunsParams{Owner: runstream.AnyOwner, WorkflowID: "wf-1", Limit: 10}, 0), "workflow_runs_workflow"},
	}
	for _, c := range cases {
		plan := workflowPlan(t, s.db, c.q)
		text := strings.Join(plan, "\n")
		for _, line := range plan {
			if strings.HasPrefix(line, "SCAN ") && !strings.Contains(line, " USING ") {
				t.Errorf("%s: full table scan %q in plan:\n%s", c.name, line, text)
			}
			if strings.Contains(line, "TEMP B-TREE") {
				t.Errorf("%s: sort %q in plan:\n%s", c.name, line, text)
			}
		}
		if !strings.Contains(text, c.want) {
			t.Errorf("%s: plan does not use %q:\n%s", c.name, c.want, text)
		}
	}
}
