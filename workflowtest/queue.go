package workflowtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

// QueueStore is a store with the capabilities the workflow engine needs.
type QueueStore interface {
	workflow.Store
	workflow.Queue
	workflow.NodeOutputStore
}

// RunQueue runs the conformance tests of workflow.Queue and
// workflow.NodeOutputStore against the stores h opens. It fails (it does
// not skip) when a store lacks either capability: call it only for
// backends that claim to have them.
//
// Besides the doc comments of the interfaces, it pins down: a lease
// expires at LeaseExpiresAt (a claim at that instant wins); Claim,
// RenewLease and ReleaseLease reject an empty worker id and RenewLease and
// Claim a zero expiry with CodeInvalidArgument; node outputs read back
// byte for byte, a refused Append or Resume stores none, and an output
// given again replaces the older one. Claim's choice among owners and its
// cap are checked with several workers, owners and claim times, with
// concurrent claims under a cap, and its round robin with more than
// workflow.ClaimWindow owners, from a store's first claim (a new store's
// cursor is before every owner id).
func RunQueue(t *testing.T, h Harness) {
	t.Helper()
	if h.Open == nil {
		t.Fatal("workflowtest: Harness.Open is nil")
	}
	for _, tc := range slices.Concat(queueTests, fairQueueTests) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := open(t, h)
			qs, ok := s.(QueueStore)
			if !ok {
				t.Fatalf("workflowtest: %T does not implement workflow.Queue and workflow.NodeOutputStore", s)
			}
			tc.run(t, qs)
		})
	}
}

type queueTest struct {
	name string
	run  func(t *testing.T, s QueueStore)
}

const (
	worker1 = "worker-1"
	worker2 = "worker-2"
	lease   = 30 * time.Second
)

// unleased clears the lease newRun gives a run.
func unleased(r *workflow.Run) { r.LeaseOwner, r.LeaseExpiresAt = "", time.Time{} }

// queuedRun stores a queued run of alice without a lease.
func queuedRun(t *testing.T, s workflow.Store) workflow.Run {
	t.Helper()
	return newRun(t, s, unleased)
}

func claim(t *testing.T, s QueueStore, worker string, now time.Time) (workflow.Run, bool) {
	t.Helper()
	r, ok, err := s.Claim(t.Context(), worker, now, now.Add(lease), 0)
	if err != nil {
		t.Fatalf("Claim(%s, %s): %v", worker, now, err)
	}
	return r, ok
}

// mustClaim claims and fails unless it got the run with id want.
func mustClaim(t *testing.T, s QueueStore, worker string, now time.Time, want string) workflow.Run {
	t.Helper()
	r, ok := claim(t, s, worker, now)
	if !ok || r.ID != want {
		t.Fatalf("Claim(%s, %s) = %q, %t; want %q", worker, now, r.ID, ok, want)
	}
	if r.LeaseOwner != worker || !r.LeaseExpiresAt.Equal(now.Add(lease)) {
		t.Errorf("claimed run: lease %q until %s; want %q until %s", r.LeaseOwner, r.LeaseExpiresAt, worker, now.Add(lease))
	}
	return r
}

func noClaim(t *testing.T, s QueueStore, worker string, now time.Time, what string) {
	t.Helper()
	if r, ok := claim(t, s, worker, now); ok {
		t.Errorf("%s: Claim(%s, %s) got run %q (status %s, lease %q until %s), want none",
			what, worker, now, r.ID, r.Status, r.LeaseOwner, r.LeaseExpiresAt)
	}
}

func nodeOutputs(t *testing.T, s QueueStore, runID string) map[string]json.RawMessage {
	t.Helper()
	out, err := s.NodeOutputs(t.Context(), runID)
	if err != nil {
		t.Fatalf("NodeOutputs(%s): %v", runID, err)
	}
	if out == nil {
		t.Fatalf("NodeOutputs(%s) = nil, want a map", runID)
	}
	return out
}

func sameOutputs(t *testing.T, what string, got map[string]json.RawMessage, want map[string]string) {
	t.Helper()
	var d diffs
	d.int("count", int64(len(got)), int64(len(want)))
	for id, w := range want {
		d.json(id, got[id], []byte(w))
	}
	d.report(t, what)
}

func completed(node string) workflow.NewEvent {
	return nodeEvent(workflow.EventNodeCompleted, node, `{"durationMs":1}`)
}

var queueTests = []queueTest{
	{"ClaimEmpty", func(t *testing.T, s QueueStore) {
		noClaim(t, s, worker1, base, "empty store")
	}},
	{"ClaimLeases", func(t *testing.T, s QueueStore) {
		run := queuedRun(t, s)
		mustClaim(t, s, worker1, base, run.ID)
		got := getRun(t, s, run.ID)
		if got.LeaseOwner != worker1 || !got.LeaseExpiresAt.Equal(base.Add(lease)) {
			t.Errorf("stored lease %q until %s, want %q until %s", got.LeaseOwner, got.LeaseExpiresAt, worker1, base.Add(lease))
		}
		if got.Status != workflow.StatusQueued || got.LastSeq != run.LastSeq {
			t.Errorf("claim changed the run: status %s, LastSeq %d", got.Status, got.LastSeq)
		}
		noClaim(t, s, worker2, base.Add(lease-time.Microsecond), "lease held")
		noClaim(t, s, worker1, base.Add(time.Second), "lease held by the claimer itself")
	}},
	{"ClaimExpired", func(t *testing.T, s QueueStore) {
		run := queuedRun(t, s)
		mustClaim(t, s, worker1, base, run.ID)
		mustClaim(t, s, worker2, base.Add(lease), run.ID)
		wantCode(t, s.RenewLease(t.Context(), run.ID, worker1, base.Add(time.Hour)), runstream.CodeConflict, "RenewLease by the worker that lost the lease")
		before := allEvents(t, s, run.ID)
		_, err := s.Append(t.Context(), workflow.AppendParams{RunID: run.ID, LeaseOwner: worker1, Events: []workflow.NewEvent{runEvent(workflow.EventRunStarted, "")}})
		wantCode(t, err, runstream.CodeConflict, "Append fenced by the lost lease")
		sameEnvelopes(t, "events after the fenced append", allEvents(t, s, run.ID), before)
		appendEvents(t, s, workflow.AppendParams{RunID: run.ID, LeaseOwner: worker2, Events: []workflow.NewEvent{runEvent(workflow.EventRunStarted, "")}})
	}},
	{"ClaimOldestFirst", func(t *testing.T, s QueueStore) {
		w, v := newWorkflow(t, s, alice)
		var ids []string
		for _, at := range []time.Duration{2 * time.Minute, 0, time.Minute} {
			r := newRunOf(t, s, w, v, func(r *workflow.Run) { unleased(r); r.CreatedAt = base.Add(at) })
			ids = append(ids, r.ID)
		}
		for _, i := range []int{1, 2, 0} {
			mustClaim(t, s, worker1, base, ids[i])
		}
		noClaim(t, s, worker1, base, "every run leased")
	}},
	{"ClaimableStatuses", func(t *testing.T, s QueueStore) {
		for _, tc := range []struct {
			events    []workflow.NewEvent
			claimable bool
		}{
			{nil, true},
			{[]workflow.NewEvent{runEvent(workflow.EventRunStarted, "")}, true},
			{[]workflow.NewEvent{runEvent(workflow.EventRunCancelRequested, `{"requestedBy":"alice"}`)}, true},
			{[]workflow.NewEvent{nodeEvent(workflow.EventRunAwaitingInput, "ask", `{}`)}, false},
			{[]workflow.NewEvent{runEvent(workflow.EventRunCompleted, `{"output":null,"artifacts":[]}`)}, false},
			{[]workflow.NewEvent{runEvent(workflow.EventRunFailed, `{}`)}, false},
			{[]workflow.NewEvent{runEvent(workflow.EventRunCancelled, `{}`)}, false},
		} {
			run := queuedRun(t, s)
			if tc.events != nil {
				appendEvents(t, s, workflow.AppendParams{RunID: run.ID, Events: tc.events})
			}
			status := getRun(t, s, run.ID).Status
			r, ok := claim(t, s, worker1, base)
			switch {
			case tc.claimable && (!ok || r.ID != run.ID):
				t.Errorf("a %s run without a lease: Claim = %q, %t; want it", status, r.ID, ok)
			case !tc.claimable && ok:
				t.Errorf("a %s run: Claim got %q (status %s), want none", status, r.ID, r.Status)
			}
		}
	}},
	{"ParkedUntilResumed", func(t *testing.T, s QueueStore) {
		run := pausedRun(t, s) // leased to lessee until base+1h
		later := base.Add(2 * time.Hour)
		noClaim(t, s, worker1, later, "run awaiting input")
		resume(t, s, resumeParams(run.ID, "secret"))
		mustClaim(t, s, worker1, later, run.ID)
	}},
	{"RenewLease", func(t *testing.T, s QueueStore) {
		run := queuedRun(t, s)
		mustClaim(t, s, worker1, base, run.ID)
		if err := s.RenewLease(t.Context(), run.ID, worker1, base.Add(2*lease)); err != nil {
			t.Fatalf("RenewLease: %v", err)
		}
		if got := getRun(t, s, run.ID); got.LeaseOwner != worker1 || !got.LeaseExpiresAt.Equal(base.Add(2*lease)) {
			t.Errorf("after renewal: lease %q until %s, want %q until %s", got.LeaseOwner, got.LeaseExpiresAt, worker1, base.Add(2*lease))
		}
		noClaim(t, s, worker2, base.Add(lease), "renewed lease")
		wantCode(t, s.RenewLease(t.Context(), run.ID, worker2, base.Add(time.Hour)), runstream.CodeConflict, "RenewLease by another worker")
		wantCode(t, s.RenewLease(t.Context(), "run-unknown", worker1, base.Add(time.Hour)), runstream.CodeWorkflowRunNotFound, "RenewLease of an unknown run")
		wantCode(t, s.RenewLease(t.Context(), run.ID, "", base.Add(time.Hour)), runstream.CodeInvalidArgument, "RenewLease without worker")
		wantCode(t, s.RenewLease(t.Context(), run.ID, worker1, time.Time{}), runstream.CodeInvalidArgument, "RenewLease without expiry")
		appendEvents(t, s, workflow.AppendParams{RunID: run.ID, LeaseOwner: worker1, Events: []workflow.NewEvent{
			runEvent(workflow.EventRunCompleted, `{"output":null,"artifacts":[]}`),
		}})
		if got := getRun(t, s, run.ID); got.LeaseOwner != "" || !got.LeaseExpiresAt.IsZero() {
			t.Errorf("terminal run keeps the lease %q until %s", got.LeaseOwner, got.LeaseExpiresAt)
		}
		wantCode(t, s.RenewLease(t.Context(), run.ID, worker1, base.Add(time.Hour)), runstream.CodeConflict, "RenewLease of a terminal run")
	}},
	{"ReleaseLease", func(t *testing.T, s QueueStore) {
		run := queuedRun(t, s)
		mustClaim(t, s, worker1, base, run.ID)
		wantCode(t, s.ReleaseLease(t.Context(), run.ID, worker2), runstream.CodeConflict, "ReleaseLease by another worker")
		wantCode(t, s.ReleaseLease(t.Context(), "run-unknown", worker1), runstream.CodeWorkflowRunNotFound, "ReleaseLease of an unknown run")
		wantCode(t, s.ReleaseLease(t.Context(), run.ID, ""), runstream.CodeInvalidArgument, "ReleaseLease without worker")
		if err := s.ReleaseLease(t.Context(), run.ID, worker1); err != nil {
			t.Fatalf("ReleaseLease: %v", err)
		}
		if got := getRun(t, s, run.ID); got.LeaseOwner != "" || !got.LeaseExpiresAt.IsZero() {
			t.Errorf("after release: lease %q until %s", got.LeaseOwner, got.LeaseExpiresAt)
		}
		wantCode(t, s.ReleaseLease(t.Context(), run.ID, worker1), runstream.CodeConflict, "second ReleaseLease")
		mustClaim(t, s, worker2, base.Add(time.Second), run.ID)
	}},
	{"ClaimArguments", func(t *testing.T, s QueueStore) {
		queuedRun(t, s)
		_, _, err := s.Claim(t.Context(), "", base, base.Add(lease), 0)
		wantCode(t, err, runstream.CodeInvalidArgument, "Claim without worker")
		_, _, err = s.Claim(t.Context(), worker1, base, time.Time{}, 0)
		wantCode(t, err, runstream.CodeInvalidArgument, "Claim without expiry")
	}},
	{"ConcurrentClaims", func(t *testing.T, s QueueStore) {
		const runs, workers = 12, 6
		w, v := newWorkflow(t, s, alice)
		for range runs {
			newRunOf(t, s, w, v, unleased)
		}
		claimers := workersOf(s, workers)
		claims := map[string][]string{} // run id → workers
		for _, c := range ClaimUntilEmpty(t, claimers, base, base.Add(lease), 0) {
			claims[c.Run.ID] = append(claims[c.Run.ID], c.Worker)
		}
		if len(claims) != runs {
			t.Errorf("%d runs claimed, want %d", len(claims), runs)
		}
		for id, by := range claims {
			if len(by) != 1 {
				t.Errorf("run %s claimed by %v, want exactly one worker", id, by)
			} else if got := getRun(t, s, id); got.LeaseOwner != by[0] {
				t.Errorf("run %s leased to %q, claimed by %q", id, got.LeaseOwner, by[0])
			}
		}
	}},
	{"NodeOutputs", func(t *testing.T, s QueueStore) {
		run := queuedRun(t, s)
		sameOutputs(t, "a new run", nodeOutputs(t, s, run.ID), nil)
		outputs := map[string]json.RawMessage{"n1": json.RawMessage(`{"text":"héllo"}`)}
		appendEvents(t, s, workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{completed("n1")}, NodeOutputs: outputs})
		outputs["n1"][2] = 'X' // the store keeps its own copy
		got := nodeOutputs(t, s, run.ID)
		sameOutputs(t, "after n1", got, map[string]string{"n1": `{"text":"héllo"}`})
		got["n1"][2] = 'Y'
		delete(got, "n1")
		sameOutputs(t, "after changing a returned map", nodeOutputs(t, s, run.ID), map[string]string{"n1": `{"text":"héllo"}`})
		appendEvents(t, s, workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{completed("n1"), completed("n2")},
			NodeOutputs: map[string]json.RawMessage{"n1": json.RawMessage(`2`), "n2": json.RawMessage(`[null,"x"]`)}})
		sameOutputs(t, "after n1 again and n2", nodeOutputs(t, s, run.ID), map[string]string{"n1": `2`, "n2": `[null,"x"]`})
		_, err := s.NodeOutputs(t.Context(), "run-unknown")
		wantCode(t, err, runstream.CodeWorkflowRunNotFound, "NodeOutputs of an unknown run")
	}},
	{"NodeOutputsRefused", func(t *testing.T, s QueueStore) {
		run := queuedRun(t, s)
		mustClaim(t, s, worker1, base, run.ID)
		refused := []struct {
			what string
			p    workflow.AppendParams
			code runstream.ErrorCode
		}{
			{"fenced", workflow.AppendParams{LeaseOwner: worker2, NodeOutputs: map[string]json.RawMessage{"n1": json.RawMessage(`1`)}}, runstream.CodeConflict},
			{"invalid JSON", workflow.AppendParams{NodeOutputs: map[string]json.RawMessage{"n1": json.RawMessage(`{`)}}, runstream.CodeInvalidArgument},
			{"empty node id", workflow.AppendParams{NodeOutputs: map[string]json.RawMessage{"": json.RawMessage(`1`)}}, runstream.CodeInvalidArgument},
		}
		for _, tc := range refused {
			before := allEvents(t, s, run.ID)
			tc.p.RunID, tc.p.Events = run.ID, []workflow.NewEvent{completed("n1")}
			_, err := s.Append(t.Context(), tc.p)
			wantCode(t, err, tc.code, tc.what+" append")
			sameEnvelopes(t, tc.what+" append: events", allEvents(t, s, run.ID), before)
			sameOutputs(t, tc.what+" append: outputs", nodeOutputs(t, s, run.ID), nil)
		}
		appendEvents(t, s, workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{runEvent(workflow.EventRunCancelled, `{}`)}})
		_, err := s.Append(t.Context(), workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{completed("n1")},
			NodeOutputs: map[string]json.RawMessage{"n1": json.RawMessage(`1`)}})
		wantCode(t, err, runstream.CodeConflict, "append to a terminal run")
		sameOutputs(t, "append to a terminal run: outputs", nodeOutputs(t, s, run.ID), nil)
	}},
	{"NodeOutputsWithResume", func(t *testing.T, s QueueStore) {
		run := pausedRun(t, s)
		output := map[string]json.RawMessage{"ask": json.RawMessage(`{"action":"approve","values":{"note":"ok"}}`)}
		wrong := resumeParams(run.ID, "wrong")
		wrong.NodeOutputs = output
		_, err := s.Resume(t.Context(), wrong)
		wantCode(t, err, runstream.CodeWorkflowResumeTokenInvalid, "Resume with a wrong token")
		sameOutputs(t, "after a refused resume", nodeOutputs(t, s, run.ID), nil)
		bad := resumeParams(run.ID, "secret")
		bad.NodeOutputs = map[string]json.RawMessage{"ask": json.RawMessage(`nope`)}
		_, err = s.Resume(t.Context(), bad)
		wantCode(t, err, runstream.CodeInvalidArgument, "Resume with an invalid output")
		if _, err := s.PendingResumeToken(t.Context(), run.ID); err != nil {
			t.Errorf("the invalid resume consumed the token: PendingResumeToken: %v", err)
		}
		ok := resumeParams(run.ID, "secret")
		ok.NodeOutputs = output
		resume(t, s, ok)
		sameOutputs(t, "after resume", nodeOutputs(t, s, run.ID), map[string]string{"ask": `{"action":"approve","values":{"note":"ok"}}`})
	}},
}

// Claimed is one claim made by ClaimUntilEmpty: the run and the worker
// that got it.
type Claimed struct {
	Worker string
	Run    workflow.Run
}

// workersOf returns n workers, "worker-0" on, that claim from q, for
// ClaimUntilEmpty.
func workersOf(q workflow.Queue, n int) map[string]workflow.Queue {
	claimers := make(map[string]workflow.Queue, n)
	for i := range n {
		claimers[fmt.Sprintf("worker-%d", i)] = q
	}
	return claimers
}

// ClaimUntilEmpty has each worker of claimers (worker id → the queue it
// claims from) claim runs on a goroutine of its own, at now, leased until
// until, under the cap maxPerOwner, until one of its claims finds none,
// and returns every claim made. A claim that fails is reported with
// t.Errorf and ends its worker.
func ClaimUntilEmpty(t testing.TB, claimers map[string]workflow.Queue, now, until time.Time, maxPerOwner int) []Claimed {
	t.Helper()
	var (
		mu     sync.Mutex
		claims []Claimed
		wg     sync.WaitGroup
	)
	for worker, q := range claimers {
		wg.Go(func() {
			for {
				r, ok, err := q.Claim(t.Context(), worker, now, until, maxPerOwner)
				if err != nil {
					t.Errorf("Claim(%s): %v", worker, err)
					return
				}
				if !ok {
					return
				}
				mu.Lock()
				claims = append(claims, Claimed{Worker: worker, Run: r})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return claims
}

// ClaimRelease claims a run of q as worker "w" at now, under the cap
// maxPerOwner, releases its lease and returns it: one step of a claim
// benchmark, which leaves the queue as it found it. It fails t when no
// run is claimable.
func ClaimRelease(t testing.TB, q workflow.Queue, now time.Time, maxPerOwner int) workflow.Run {
	t.Helper()
	r, ok, err := q.Claim(t.Context(), "w", now, now.Add(time.Minute), maxPerOwner)
	if !ok || err != nil {
		t.Fatalf("Claim = %s, %t, %v; want a run", r.ID, ok, err)
	}
	if err := q.ReleaseLease(t.Context(), r.ID, "w"); err != nil {
		t.Fatal(err)
	}
	return r
}
