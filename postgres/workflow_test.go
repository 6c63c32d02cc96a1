package postgres

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
	"github.com/runstream/runstream/workflowtest"
)

func TestWorkflowConformance(t *testing.T) {
	testURL(t)
	workflowtest.Run(t, workflowtest.Harness{
		Open: func(t *testing.T) workflow.Store { return openDB(t, newSchema(t)).Workflows() },
		OpenReopenable: func(t *testing.T) (workflow.Store, func() workflow.Store) {
			schema := newSchema(t)
			db := openDB(t, schema)
			return db.Workflows(), func() workflow.Store {
				// Each reopen closes the DB the previous call opened.
				if err := db.Close(); err != nil {
					t.Errorf("Close before reopen: %v", err)
				}
				db = openDB(t, schema)
				return db.Workflows()
			}
		},
	})
}

// uniqueID returns an id no other test, in this or a concurrent test
// binary, uses: notifications are per database, shared by every schema.
func uniqueID(prefix string) string {
	return prefix + "-" + strings.ToLower(rand.Text()[:12])
}

// newTestRun stores a workflow of owner and a run of it with events.
func newTestRun(t testing.TB, s workflow.Store, owner string, events ...workflow.NewEvent) workflow.Run {
	t.Helper()
	w, v, err := s.CreateWorkflow(context.Background(), workflow.Workflow{ID: uniqueID("wf"), OwnerID: owner, Name: "test"},
		workflow.Version{ID: uniqueID("wv"), Definition: json.RawMessage(`{"name":"test","nodes":[]}`)})
	if err != nil {
		t.Fatalf("CreateWorkflow: %v", err)
	}
	r, _, err := s.CreateRun(context.Background(), workflow.Run{ID: uniqueID("run"), WorkflowID: w.ID, VersionID: v.ID, OwnerID: owner, Input: json.RawMessage(`{}`)}, events)
	if err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	return r
}

func progressEvent(data string) workflow.NewEvent {
	return workflow.NewEvent{Event: workflow.EventNodeProgress, NodeID: "n1", NodeRunID: "n1-r1", Data: json.RawMessage(data)}
}

// Environment of TestWorkflowHelperProcess, set by
// TestWorkflowTwoProcessesAppend.
const (
	wfHelperEnv       = "RUNSTREAM_PG_WF_HELPER"        // the process number in a helper process
	wfHelperSchemaEnv = "RUNSTREAM_PG_WF_HELPER_SCHEMA" // schema of the run
	wfHelperRunEnv    = "RUNSTREAM_PG_WF_HELPER_RUN"    // run to append to
	wfHelperGateEnv   = "RUNSTREAM_PG_WF_HELPER_GATE"   // advisory lock key to wait on
)

const (
	wfHelperWriters = 4  // goroutines per helper process
	wfHelperAppends = 50 // appends of one event per goroutine
	wfHelperEvents  = wfHelperWriters * wfHelperAppends
)

// TestWorkflowHelperProcess is the body of the appending processes of
// TestWorkflowTwoProcessesAppend; it does nothing in a normal run.
func TestWorkflowHelperProcess(t *testing.T) {
	proc := os.Getenv(wfHelperEnv)
	if proc == "" {
		t.Skip("helper process of TestWorkflowTwoProcessesAppend")
	}
	ctx := t.Context()
	url := testURL(t)
	db, err := Open(ctx, Config{URL: url, Schema: os.Getenv(wfHelperSchemaEnv), MaxConns: 4})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer db.Close()
	// Wait until the parent opens the gate, so that both processes append
	// at the same time.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	gate, err := strconv.ParseInt(os.Getenv(wfHelperGateEnv), 10, 64)
	if err != nil {
		t.Fatalf("gate key: %v", err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock_shared($1)", gate); err != nil {
		t.Fatalf("wait for the gate: %v", err)
	}
	conn.Close(ctx)

	runID := os.Getenv(wfHelperRunEnv)
	var wg sync.WaitGroup
	for g := range wfHelperWriters {
		wg.Go(func() {
			for i := range wfHelperAppends {
				data := fmt.Sprintf(`{"p":%s,"g":%d,"i":%d}`, proc, g, i)
				if _, err := db.Workflows().Append(ctx, workflow.AppendParams{RunID: runID, Events: []workflow.NewEvent{progressEvent(data)}}); err != nil {
					t.Errorf("writer %d: Append: %v", g, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestWorkflowTwoProcessesAppend appends to one run from two OS processes
// at once: the run's seqs are 1..2N, each event once, and each writer's
// events in its order.
func TestWorkflowTwoProcessesAppend(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	db := openDB(t, schema)
	run := newTestRun(t, db.Workflows(), "alice")
	ctx := t.Context()

	gate := time.Now().UnixNano()
	gateConn, err := pgx.Connect(ctx, testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer gateConn.Close(context.Background())
	if _, err := gateConn.Exec(ctx, "SELECT pg_advisory_lock($1)", gate); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for p := range 2 {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestWorkflowHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), wfHelperEnv+"="+strconv.Itoa(p), wfHelperSchemaEnv+"="+schema,
			wfHelperRunEnv+"="+run.ID, wfHelperGateEnv+"="+strconv.FormatInt(gate, 10))
		wg.Go(func() {
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("helper process %d: %v\n%s", p, err, out)
			}
		})
	}
	waitForGate(t, gateConn, gate, 2)
	if _, err := gateConn.Exec(ctx, "SELECT pg_advisory_unlock($1)", gate); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	var events []workflow.Envelope
	for {
		page, err := db.Workflows().ListEvents(ctx, run.ID, int64(len(events)), workflow.MaxEventPageLimit)
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, page...)
		if len(page) < workflow.MaxEventPageLimit {
			break
		}
	}
	if len(events) != 2*wfHelperEvents {
		t.Fatalf("%d events, want %d", len(events), 2*wfHelperEvents)
	}
	next := map[[2]int]int{} // next i of each (process, writer)
	for k, e := range events {
		if e.Seq != int64(k+1) {
			t.Fatalf("event %d has seq %d, want %d", k, e.Seq, k+1)
		}
		var d struct{ P, G, I int }
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatalf("seq %d: data %s: %v", e.Seq, e.Data, err)
		}
		if key := [2]int{d.P, d.G}; d.I != next[key] {
			t.Errorf("seq %d: event %d of writer %v, want %d", e.Seq, d.I, key, next[key])
		} else {
			next[key]++
		}
	}
	got, err := db.Workflows().GetRun(ctx, run.ID, runstream.AnyOwner)
	if err != nil || got.LastSeq != 2*wfHelperEvents {
		t.Errorf("run LastSeq %d, %v; want %d", got.LastSeq, err, 2*wfHelperEvents)
	}
}

// waitForGate waits until n sessions wait for the advisory lock gate.
func waitForGate(t *testing.T, conn *pgx.Conn, gate int64, n int) {
	t.Helper()
	for range 1500 {
		var waiting int
		err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND (classid::bigint << 32 | objid::bigint) = $1`, gate).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the helper processes did not reach the gate")
}

// notifications listens on NotifyChannel with a raw connection, as any
// other PostgreSQL client would.
type notifications struct {
	conn *pgx.Conn
}

func listenRaw(t *testing.T) *notifications {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(t.Context(), "LISTEN "+NotifyChannel); err != nil {
		t.Fatal(err)
	}
	return &notifications{conn: conn}
}

// next returns the payload of the next notification about runID (those of
// other tests' runs are skipped).
func (n *notifications) next(t *testing.T, runID string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		msg, err := n.conn.WaitForNotification(ctx)
		if err != nil {
			t.Fatalf("no notification about run %s: %v", runID, err)
		}
		if strings.HasPrefix(msg.Payload, runID+":") {
			return msg.Payload
		}
	}
}

// TestWorkflowNotifyPayload: every append notifies the run id and the last
// seq of its batch, and nothing else.
func TestWorkflowNotifyPayload(t *testing.T) {
	t.Parallel()
	s := openDB(t, newSchema(t)).Workflows()
	n := listenRaw(t)
	secret := `{"secret":"do-not-broadcast"}`
	run := newTestRun(t, s, "alice", workflow.NewEvent{Event: workflow.EventRunCreated, Data: json.RawMessage(secret)},
		workflow.NewEvent{Event: workflow.EventRunQueued})
	if got, want := n.next(t, run.ID), run.ID+":2"; got != want {
		t.Fatalf("notification of CreateRun: %q, want %q", got, want)
	}
	for _, batch := range [][]workflow.NewEvent{
		{progressEvent(secret)},
		{progressEvent(`{}`), progressEvent(`{}`), progressEvent(secret)},
	} {
		envs, err := s.Append(t.Context(), workflow.AppendParams{RunID: run.ID, Events: batch})
		if err != nil {
			t.Fatal(err)
		}
		last := envs[len(envs)-1].Seq
		if got, want := n.next(t, run.ID), run.ID+":"+strconv.FormatInt(last, 10); got != want {
			t.Errorf("notification of a batch ending at seq %d: %q, want %q", last, got, want)
		}
	}
}

// TestWorkflowNotifyOnlyOnCommit: refused appends and resumes, and an
// append whose transaction fails at commit, after its pg_notify ran,
// notify nobody. Notifications arrive in commit order, so the next one
// about the run after them must be the one of the next successful append.
func TestWorkflowNotifyOnlyOnCommit(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s := openDB(t, schema).Workflows()
	// A deferred constraint trigger fails the commit of any transaction
	// that inserted an event marked failAtCommit.
	q := pgx.Identifier{schema}.Sanitize()
	execSQL(t, testURL(t), `CREATE FUNCTION `+q+`.fail_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.data LIKE '%"failAtCommit":true%' THEN RAISE EXCEPTION 'refused at commit'; END IF;
			RETURN NULL;
		END $$`)
	execSQL(t, testURL(t), `CREATE CONSTRAINT TRIGGER fail_at_commit AFTER INSERT ON `+q+`.workflow_run_events
		DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION `+q+`.fail_at_commit()`)
	n := listenRaw(t)
	ctx := t.Context()

	done := newTestRun(t, s, "alice", workflow.NewEvent{Event: workflow.EventRunCreated}, workflow.NewEvent{Event: workflow.EventRunCompleted})
	paused := newTestRun(t, s, "alice", workflow.NewEvent{Event: workflow.EventRunCreated})
	tok := workflow.ResumeToken{NodeID: "ask", NodeRunID: "ask-r1", Hash: []byte("0123456789abcdef0123456789abcdef"), ExpiresAt: time.Now().Add(time.Hour)}
	if _, err := s.Append(ctx, workflow.AppendParams{RunID: paused.ID, ResumeToken: &tok,
		Events: []workflow.NewEvent{{Event: workflow.EventRunAwaitingInput, NodeID: "ask", NodeRunID: "ask-r1"}}}); err != nil {
		t.Fatal(err)
	}
	n.next(t, done.ID)
	for _, want := range []string{paused.ID + ":1", paused.ID + ":2"} {
		if got := n.next(t, paused.ID); got != want {
			t.Fatalf("notification %q, want %s", got, want)
		}
	}

	// Refused before anything is written.
	_, err := s.Append(ctx, workflow.AppendParams{RunID: done.ID, Events: []workflow.NewEvent{progressEvent(`{}`)}})
	if runstream.ErrorCodeOf(err) != runstream.CodeConflict {
		t.Fatalf("append to a completed run: %v, want %s", err, runstream.CodeConflict)
	}
	resumed := []workflow.NewEvent{{Event: workflow.EventRunResumed, NodeID: "ask"}}
	_, err = s.Resume(ctx, workflow.ResumeParams{RunID: paused.ID, Owner: runstream.AnyOwner, Hash: []byte("wrong"), Now: time.Now(), Events: resumed})
	if runstream.ErrorCodeOf(err) != runstream.CodeWorkflowResumeTokenInvalid {
		t.Fatalf("resume with a wrong token: %v", err)
	}
	_, err = s.Resume(ctx, workflow.ResumeParams{RunID: paused.ID, Owner: runstream.AnyOwner, Hash: tok.Hash, Now: time.Now().Add(2 * time.Hour), Events: resumed})
	if runstream.ErrorCodeOf(err) != runstream.CodeWorkflowResumeTokenExpired {
		t.Fatalf("resume with an expired token: %v", err)
	}
	// Rolled back at commit, after the transaction ran pg_notify: had it
	// been delivered, the next notification would say seq 4.
	_, err = s.Append(ctx, workflow.AppendParams{RunID: paused.ID, Events: []workflow.NewEvent{progressEvent(`{}`), progressEvent(`{"failAtCommit":true}`)}})
	if err == nil {
		t.Fatal("append failing at commit succeeded")
	}
	if msg := runstream.ErrorMessage(err); strings.Contains(msg, "refused at commit") {
		t.Errorf("error message %q shows the driver's text", msg)
	}

	envs, err := s.Resume(ctx, workflow.ResumeParams{RunID: paused.ID, Owner: runstream.AnyOwner, Hash: tok.Hash, Now: time.Now(), Events: resumed})
	if err != nil {
		t.Fatal(err)
	}
	if envs[0].Seq != 3 {
		t.Errorf("resume after the rolled-back append: seq %d, want 3", envs[0].Seq)
	}
	if got := n.next(t, paused.ID); got != paused.ID+":3" {
		t.Errorf("first notification after the refused calls: %q, want %s:3", got, paused.ID)
	}
	if _, err := s.Append(ctx, workflow.AppendParams{RunID: paused.ID, Events: []workflow.NewEvent{{Event: workflow.EventRunCompleted}}}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Append(ctx, workflow.AppendParams{RunID: done.ID, Events: []workflow.NewEvent{progressEvent(`{}`)}})
	if runstream.ErrorCodeOf(err) != runstream.CodeConflict {
		t.Fatalf("second append to a completed run: %v", err)
	}
	if got := n.next(t, paused.ID); got != paused.ID+":4" {
		t.Errorf("notification of the completion: %q, want %s:4", got, paused.ID)
	}
	// The completed run was never notified after its creation: a probe
	// append to a third run, made last, is heard before anything of it.
	probe := newTestRun(t, s, "alice", workflow.NewEvent{Event: workflow.EventRunCreated})
	ctxWait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		msg, err := n.conn.WaitForNotification(ctxWait)
		if err != nil {
			t.Fatalf("no notification of the probe run: %v", err)
		}
		if strings.HasPrefix(msg.Payload, done.ID+":") {
			t.Errorf("notification %q about the completed run after its refused appends", msg.Payload)
		}
		if msg.Payload == probe.ID+":1" {
			break
		}
	}
}

// createTrigger adds to schema a deferred constraint trigger on
// workflow_run_events that runs body (plpgsql, NEW is the event row) at
// commit.
func createTrigger(t *testing.T, schema, name, body string) {
	t.Helper()
	q := pgx.Identifier{schema}.Sanitize()
	execSQL(t, testURL(t), `CREATE FUNCTION `+q+`.`+name+`() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN `+body+` RETURN NULL; END $$`)
	execSQL(t, testURL(t), `CREATE CONSTRAINT TRIGGER `+name+` AFTER INSERT ON `+q+`.workflow_run_events
		DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION `+q+`.`+name+`()`)
}

// commitGroup hands the appends ps to committer c as one group, as its
// queue would, and returns each caller's answer.
func commitGroup(c *appendCommitter, ps ...workflow.AppendParams) []error {
	group := make([]*appendRequest, len(ps))
	for i, p := range ps {
		group[i] = &appendRequest{ctx: context.Background(), p: p, done: make(chan error, 1)}
	}
	c.commit(group)
	errs := make([]error, len(ps))
	for i, r := range group {
		errs[i] = <-r.done
	}
	return errs
}

// TestWorkflowGroupRefusedRetriesAlone: when the server refuses a group's
// transaction, each append is retried alone, so that the one at fault does
// not fail the others; a refused append (terminal run) is refused alone.
func TestWorkflowGroupRefusedRetriesAlone(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	db := openDB(t, schema)
	createTrigger(t, schema, "fail_at_commit", `IF NEW.data LIKE '%"failAtCommit":true%' THEN RAISE EXCEPTION 'refused at commit'; END IF;`)
	s := db.Workflows()
	run := newTestRun(t, s, "alice", workflow.NewEvent{Event: workflow.EventRunCreated})
	done := newTestRun(t, s, "alice", workflow.NewEvent{Event: workflow.EventRunCompleted})
	c := &appendCommitter{pool: db.pool, timeout: appendTimeout}
	errs := commitGroup(c,
		workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{progressEvent(`{"n":1}`)}},
		workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{progressEvent(`{"failAtCommit":true}`)}},
		workflow.AppendParams{RunID: done.ID, Events: []workflow.NewEvent{progressEvent(`{}`)}},
		workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{progressEvent(`{"n":2}`)}},
	)
	if errs[0] != nil || errs[3] != nil {
		t.Errorf("good appends of the refused group: %v, %v; want success", errs[0], errs[3])
	}
	if code := runstream.ErrorCodeOf(errs[1]); code != runstream.CodeInternal {
		t.Errorf("append refused at commit: %v, want %s", errs[1], runstream.CodeInternal)
	}
	if code := runstream.ErrorCodeOf(errs[2]); code != runstream.CodeConflict {
		t.Errorf("append to a completed run: %v, want %s", errs[2], runstream.CodeConflict)
	}
	events, err := s.ListEvents(t.Context(), run.ID, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	var data []string
	for _, e := range events {
		data = append(data, string(e.Data))
	}
	if got := strings.Join(data, " "); got != `{} {"n":1} {"n":2}` {
		t.Errorf("stored data %s, want {} {\"n\":1} {\"n\":2}", got)
	}
}

// TestWorkflowGroupUnknownOutcome: when a group's commit times out, it may
// have committed (or been cancelled: pgx cancels on timeout, racing the
// commit). Every append gets the error and none is retried, since a retry
// could store it twice: the group is stored whole or not at all.
func TestWorkflowGroupUnknownOutcome(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	db := openDB(t, schema)
	createTrigger(t, schema, "slow_commit", `IF NEW.data LIKE '%"slowCommit":true%' THEN PERFORM pg_sleep(2); END IF;`)
	s := db.Workflows()
	run := newTestRun(t, s, "alice", workflow.NewEvent{Event: workflow.EventRunCreated})
	c := &appendCommitter{pool: db.pool, timeout: 500 * time.Millisecond}
	errs := commitGroup(c,
		workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{progressEvent(`{"slowCommit":true}`)}},
		workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{progressEvent(`{}`)}},
	)
	for i, err := range errs {
		if code := runstream.ErrorCodeOf(err); code != runstream.CodeUnavailable {
			t.Errorf("append %d of a group whose commit timed out: %v, want %s", i, err, runstream.CodeUnavailable)
		}
	}
	// Wait for every transaction that may still insert events (they hold
	// ROW EXCLUSIVE until they end), then count.
	conn, err := pgx.Connect(t.Context(), testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	q := pgx.Identifier{schema}.Sanitize()
	if _, err := tx.Exec(t.Context(), "LOCK TABLE "+q+".workflow_run_events IN SHARE MODE"); err != nil {
		t.Fatal(err)
	}
	var stored string
	if err := tx.QueryRow(t.Context(), "SELECT coalesce(string_agg(data, ' ' ORDER BY seq), '') FROM "+q+".workflow_run_events WHERE run_id = $1 AND seq > 1",
		run.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != "" && stored != `{"slowCommit":true} {}` {
		t.Errorf("stored after the run's first event: %s; want the group once or nothing", stored)
	}
}

// TestWorkflowTextLimits: ids longer than workflow.MaxIDBytes and text PostgreSQL
// cannot hold are refused with CodeInvalidArgument; reads of such ids find
// nothing.
func TestWorkflowTextLimits(t *testing.T) {
	t.Parallel()
	s := openDB(t, newSchema(t)).Workflows()
	ctx := t.Context()
	long := strings.Repeat("x", workflow.MaxIDBytes+1)
	run := newTestRun(t, s, "alice", workflow.NewEvent{Event: workflow.EventRunCreated})
	cases := []struct {
		name string
		call func() error
	}{
		{"long workflow id", func() error {
			_, _, err := s.CreateWorkflow(ctx, workflow.Workflow{ID: long, OwnerID: "alice"}, workflow.Version{ID: uniqueID("wv")})
			return err
		}},
		{"NUL in a name", func() error {
			_, _, err := s.CreateWorkflow(ctx, workflow.Workflow{ID: uniqueID("wf"), OwnerID: "alice", Name: "a\x00b"}, workflow.Version{ID: uniqueID("wv")})
			return err
		}},
		{"invalid UTF-8 in a definition", func() error {
			_, _, err := s.CreateWorkflow(ctx, workflow.Workflow{ID: uniqueID("wf"), OwnerID: "alice"}, workflow.Version{ID: uniqueID("wv"), Definition: []byte("{\"a\":\"\xff\"}")})
			return err
		}},
		{"long run id", func() error {
			_, _, err := s.CreateRun(ctx, workflow.Run{ID: long, WorkflowID: run.WorkflowID, VersionID: run.VersionID, OwnerID: "alice"}, nil)
			return err
		}},
		{"invalid UTF-8 in event data", func() error {
			_, err := s.Append(ctx, workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{progressEvent("{\"a\":\"\xff\"}")}})
			return err
		}},
		{"NUL in a node id", func() error {
			_, err := s.Append(ctx, workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{{Event: workflow.EventNodeStarted, NodeID: "n\x00"}}})
			return err
		}},
		{"long artifact id", func() error {
			_, err := s.Append(ctx, workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{progressEvent(`{}`)}, Artifacts: []workflow.Artifact{{ID: long}}})
			return err
		}},
	}
	for _, c := range cases {
		if code := runstream.ErrorCodeOf(c.call()); code != runstream.CodeInvalidArgument {
			t.Errorf("%s: code %q, want %s", c.name, code, runstream.CodeInvalidArgument)
		}
	}
	if _, err := s.GetRun(ctx, long, runstream.AnyOwner); runstream.ErrorCodeOf(err) != runstream.CodeWorkflowRunNotFound {
		t.Errorf("GetRun of a long id: %v, want %s", err, runstream.CodeWorkflowRunNotFound)
	}
	if _, err := s.ListEvents(ctx, "bad\xff", 0, 10); runstream.ErrorCodeOf(err) != runstream.CodeWorkflowRunNotFound {
		t.Errorf("ListEvents of an invalid id: %v, want %s", err, runstream.CodeWorkflowRunNotFound)
	}
	if got, err := s.ListEvents(ctx, run.ID, 0, 10); err != nil || len(got) != 1 {
		t.Errorf("events after refused appends: %d, %v; want 1", len(got), err)
	}
}

// TestWorkflowClosed: a closed store refuses every call with
// CodeUnavailable, including appends queued for its committers.
func TestWorkflowClosed(t *testing.T) {
	t.Parallel()
	db := openDB(t, newSchema(t))
	s := db.Workflows()
	run := newTestRun(t, s, "alice", workflow.NewEvent{Event: workflow.EventRunCreated})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err := s.Append(t.Context(), workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{progressEvent(`{}`)}})
	if runstream.ErrorCodeOf(err) != runstream.CodeUnavailable {
		t.Errorf("Append after Close: %v, want %s", err, runstream.CodeUnavailable)
	}
	_, err = s.GetRun(t.Context(), run.ID, runstream.AnyOwner)
	if runstream.ErrorCodeOf(err) != runstream.CodeUnavailable {
		t.Errorf("GetRun after Close: %v, want %s", err, runstream.CodeUnavailable)
	}
}

// BenchmarkWorkflowAppend appends one event per call to one run, from one
// goroutine (commit latency) and from many (group commit).
func BenchmarkWorkflowAppend(b *testing.B) {
	testURL(b)
	for _, parallel := range []bool{false, true} {
		name := map[bool]string{false: "serial", true: "parallel"}[parallel]
		b.Run(name, func(b *testing.B) {
			s := openDB(b, newSchema(b)).Workflows()
			run := newTestRun(b, s, "alice", workflow.NewEvent{Event: workflow.EventRunCreated})
			p := workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{progressEvent(`{"phase":"work","message":"step","percent":50}`)}}
			ctx := context.Background()
			if !parallel {
				for b.Loop() {
					if _, err := s.Append(ctx, p); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := s.Append(ctx, p); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
