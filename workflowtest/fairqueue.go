package workflowtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

// The conformance tests of the fair claim and of the cap per owner (see
// workflow.Queue): a run of an owner that executes fewer runs comes first,
// a run past its owner's cap waits until one of the owner's runs ends, a
// run taken over (expired lease, cancelling) is never held back, and with
// more than workflow.ClaimWindow owners the claims go round them, a
// window at a time.

const carol = "carol"

// ownRun stores a queued run of owner without a lease, created at base+at.
func ownRun(t *testing.T, s workflow.Store, owner string, at time.Duration) workflow.Run {
	t.Helper()
	w, v := newWorkflow(t, s, owner)
	return newRunOf(t, s, w, v, func(r *workflow.Run) { unleased(r); r.CreatedAt = base.Add(at) })
}

// claimCapped claims under the cap maxPerOwner.
func claimCapped(t *testing.T, s QueueStore, worker string, now time.Time, maxPerOwner int) (workflow.Run, bool) {
	t.Helper()
	r, ok, err := s.Claim(t.Context(), worker, now, now.Add(lease), maxPerOwner)
	if err != nil {
		t.Fatalf("Claim(%s, %s, cap %d): %v", worker, now, maxPerOwner, err)
	}
	return r, ok
}

// mustClaimCapped claims under the cap and fails unless it got the run
// want.
func mustClaimCapped(t *testing.T, s QueueStore, worker string, now time.Time, maxPerOwner int, want workflow.Run) {
	t.Helper()
	r, ok := claimCapped(t, s, worker, now, maxPerOwner)
	if !ok || r.ID != want.ID {
		t.Fatalf("Claim(%s, %s, cap %d) = %q (owner %q), %t; want %q of %s", worker, now, maxPerOwner, r.ID, r.OwnerID, ok, want.ID, want.OwnerID)
	}
	if r.LeaseOwner != worker || !r.LeaseExpiresAt.Equal(now.Add(lease)) {
		t.Errorf("claimed run: lease %q until %s; want %q until %s", r.LeaseOwner, r.LeaseExpiresAt, worker, now.Add(lease))
	}
}

func noClaimCapped(t *testing.T, s QueueStore, worker string, now time.Time, maxPerOwner int, what string) {
	t.Helper()
	if r, ok := claimCapped(t, s, worker, now, maxPerOwner); ok {
		t.Fatalf("%s: Claim(%s, %s, cap %d) got run %q of %s (status %s), want none", what, worker, now, maxPerOwner, r.ID, r.OwnerID, r.Status)
	}
}

// complete ends a run claimed by worker with run.completed.
func complete(t *testing.T, s QueueStore, run workflow.Run, worker string) {
	t.Helper()
	appendEvents(t, s, workflow.AppendParams{RunID: run.ID, LeaseOwner: worker, Events: []workflow.NewEvent{
		runEvent(workflow.EventRunCompleted, `{"output":null,"artifacts":[]}`),
	}})
}

var fairQueueTests = []queueTest{
	{"ClaimFairAmongOwners", func(t *testing.T, s QueueStore) {
		// alice queued four runs before bob queued two: bob's come first
		// whenever alice executes more runs than bob.
		a1, a2 := ownRun(t, s, alice, 0), ownRun(t, s, alice, time.Minute)
		a3, a4 := ownRun(t, s, alice, 2*time.Minute), ownRun(t, s, alice, 3*time.Minute)
		b1, b2 := ownRun(t, s, bob, 4*time.Minute), ownRun(t, s, bob, 5*time.Minute)
		for i, want := range []workflow.Run{a1, b1, a2, b2, a3, a4} {
			worker := fmt.Sprintf("worker-%d", i)
			mustClaimCapped(t, s, worker, base, 0, want)
		}
		noClaimCapped(t, s, worker1, base, 0, "every run leased")
	}},
	{"ClaimCapPerOwner", func(t *testing.T, s QueueStore) {
		const maxPerOwner = 2
		a1, a2, a3 := ownRun(t, s, alice, 0), ownRun(t, s, alice, time.Minute), ownRun(t, s, alice, 2*time.Minute)
		b1 := ownRun(t, s, bob, 3*time.Minute)
		mustClaimCapped(t, s, worker1, base, maxPerOwner, a1)
		mustClaimCapped(t, s, worker2, base, maxPerOwner, b1)
		mustClaimCapped(t, s, worker2, base, maxPerOwner, a2)
		// alice executes two runs, on two workers: her third waits, queued.
		noClaimCapped(t, s, worker1, base, maxPerOwner, "alice at her cap")
		if got := getRun(t, s, a3.ID); got.Status != workflow.StatusQueued || got.LeaseOwner != "" {
			t.Errorf("the run past the cap: status %s, lease %q; want queued without a lease", got.Status, got.LeaseOwner)
		}
		// Without a cap it would be claimed; with a higher one too.
		if r, ok := claimCapped(t, s, worker1, base, 3); !ok || r.ID != a3.ID {
			t.Fatalf("Claim with cap 3 = %q, %t; want %q", r.ID, ok, a3.ID)
		}
		if err := s.ReleaseLease(t.Context(), a3.ID, worker1); err != nil {
			t.Fatalf("ReleaseLease: %v", err)
		}
		// One of alice's runs ends: her third is claimed.
		complete(t, s, a1, worker1)
		mustClaimCapped(t, s, worker1, base.Add(time.Second), maxPerOwner, a3)
		noClaimCapped(t, s, worker1, base.Add(time.Second), maxPerOwner, "every run leased or ended")
	}},
	{"ClaimCapExpiredLease", func(t *testing.T, s QueueStore) {
		a1 := ownRun(t, s, alice, 0)
		ownRun(t, s, alice, time.Minute) // held back by the cap throughout
		mustClaimCapped(t, s, worker1, base, 1, a1)
		noClaimCapped(t, s, worker2, base.Add(lease-time.Microsecond), 1, "alice at her cap")
		// a1's lease expired: it no longer counts, and is taken over first
		// (it is the oldest); then alice is at her cap again.
		mustClaimCapped(t, s, worker2, base.Add(lease), 1, a1)
		noClaimCapped(t, s, worker2, base.Add(lease), 1, "alice at her cap again")
	}},
	{"ClaimTakeOverIgnoresCap", func(t *testing.T, s QueueStore) {
		// lost: alice's run leased to lessee until base+1h, whose worker
		// is lost; cancelling: alice's run, started and released, then
		// asked to cancel.
		w, v := newWorkflow(t, s, alice)
		lost := newRunOf(t, s, w, v, func(r *workflow.Run) { r.CreatedAt = base.Add(3 * time.Minute) })
		cancelling := ownRun(t, s, alice, 4*time.Minute)
		appendEvents(t, s, workflow.AppendParams{RunID: cancelling.ID, Events: []workflow.NewEvent{
			runEvent(workflow.EventRunStarted, ""), runEvent(workflow.EventRunCancelRequested, `{"requestedBy":"alice"}`),
		}})
		a1 := ownRun(t, s, alice, 0)
		ownRun(t, s, alice, time.Minute) // held back by the cap throughout
		b1 := ownRun(t, s, bob, 2*time.Minute)
		// At base lost's lease holds: alice executes one run, her queued
		// runs wait, her cancelling run does not.
		mustClaimCapped(t, s, worker1, base, 1, b1)
		mustClaimCapped(t, s, worker1, base, 1, cancelling)
		noClaimCapped(t, s, worker1, base, 1, "alice past her cap")
		appendEvents(t, s, workflow.AppendParams{RunID: cancelling.ID, LeaseOwner: worker1, Events: []workflow.NewEvent{runEvent(workflow.EventRunCancelled, `{}`)}})
		complete(t, s, b1, worker1)
		// At base+1h lost's lease expired: alice executes nothing, her
		// oldest run is claimed, then lost is taken over past the cap.
		later := base.Add(time.Hour)
		mustClaimCapped(t, s, worker2, later, 1, a1)
		mustClaimCapped(t, s, worker2, later, 1, lost)
		noClaimCapped(t, s, worker2, later, 1, "alice past her cap")
	}},
	{"ClaimTakeOverRanksFirst", func(t *testing.T, s QueueStore) {
		// alice executes a run (busy); her run whose lease expired (lost)
		// ranks 0 all the same: it is taken over before bob's newer run.
		w, v := newWorkflow(t, s, alice)
		newRunOf(t, s, w, v, func(r *workflow.Run) { r.CreatedAt = base.Add(5 * time.Minute) }) // busy, leased until base+1h
		lost := newRunOf(t, s, w, v, func(r *workflow.Run) { r.CreatedAt = base; r.LeaseExpiresAt = base.Add(time.Minute) })
		a1 := ownRun(t, s, alice, time.Minute)
		b1 := ownRun(t, s, bob, 2*time.Minute)
		now := base.Add(2 * time.Minute)
		mustClaimCapped(t, s, worker1, now, 0, lost)
		mustClaimCapped(t, s, worker1, now, 0, b1)
		mustClaimCapped(t, s, worker1, now, 0, a1)
	}},
	{"ClaimFloodFair", func(t *testing.T, s QueueStore) {
		// alice queued a backlog and executes two of its runs; bob queues
		// a run after the backlog: the next claim takes it, then alice's
		// backlog goes on.
		const backlog = 200
		w, v := newWorkflow(t, s, alice)
		var a []workflow.Run
		for i := range backlog {
			a = append(a, newRunOf(t, s, w, v, func(r *workflow.Run) { unleased(r); r.CreatedAt = base.Add(time.Duration(i) * time.Second) }))
		}
		mustClaimCapped(t, s, worker1, base, 0, a[0])
		mustClaimCapped(t, s, worker1, base, 0, a[1])
		b1 := ownRun(t, s, bob, time.Hour)
		mustClaimCapped(t, s, worker2, base, 0, b1)
		mustClaimCapped(t, s, worker2, base, 0, a[2])
	}},
	{"ClaimRoundRobinPastTheWindow", func(t *testing.T, s QueueStore) {
		// Two windows of owners with one queued run each: the runs of the
		// first window (a000…) are all older than those of the second
		// (b000…). A claim visits one window and moves on: b000, past the
		// first window, is claimed at the second claim
		// (ceil(owners/ClaimWindow) = 2), not after every older run; then
		// every other run is claimed once.
		const k = workflow.ClaimWindow
		var a, b []workflow.Run
		for i := range k {
			a = append(a, ownRun(t, s, fmt.Sprintf("a%03d", i), time.Duration(i)*time.Second))
			b = append(b, ownRun(t, s, fmt.Sprintf("b%03d", i), time.Hour+time.Duration(i)*time.Second))
		}
		mustClaimCapped(t, s, worker1, base, 0, a[0])
		mustClaimCapped(t, s, worker1, base, 0, b[0])
		claimed := map[string]bool{a[0].ID: true, b[0].ID: true}
		for range 2*k - 2 {
			r, ok, err := s.Claim(t.Context(), worker1, base, base.Add(lease), 0)
			if err != nil || !ok || claimed[r.ID] {
				t.Fatalf("Claim = %q, %t, %v; want a run not claimed before", r.ID, ok, err)
			}
			claimed[r.ID] = true
		}
		noClaimCapped(t, s, worker1, base, 0, "every run leased")
	}},
	{"ClaimBusyOwnersTakeNoWindowSlot", func(t *testing.T, s QueueStore) {
		// ClaimWindow owners a000… each execute a run and have nothing
		// waiting; zoe, whose id sorts after all of them, queues a run and
		// alice a newer one. Only owners with a waiting run
		// are in the ring: the first claim takes zoe's run, the older of
		// the two, though a window of the busy owners would hold neither.
		for i := range workflow.ClaimWindow {
			w, v := newWorkflow(t, s, fmt.Sprintf("a%03d", i))
			newRunOf(t, s, w, v, func(r *workflow.Run) { r.CreatedAt = base.Add(-time.Hour) }) // leased until base+1h
		}
		z := ownRun(t, s, "zoe", time.Minute)
		a := ownRun(t, s, alice, 2*time.Minute)
		mustClaimCapped(t, s, worker1, base, 0, z)
		mustClaimCapped(t, s, worker1, base, 0, a)
	}},
	{"ClaimFloodPastTheWindow", func(t *testing.T, s QueueStore) {
		// More owners than a claim visits: ClaimWindow owners aa000… each
		// execute a run and have one queued; alice has a backlog and
		// executes two of its runs; bob, whose id sorts after all of them,
		// queues one run last. bob's run is claimed within
		// ceil(owners/ClaimWindow) claims, before alice's backlog.
		const k = workflow.ClaimWindow
		for i := range k {
			owner := fmt.Sprintf("aa%03d", i)
			w, v := newWorkflow(t, s, owner)
			newRunOf(t, s, w, v, func(r *workflow.Run) { r.CreatedAt = base.Add(-time.Hour) }) // leased until base+1h
			newRunOf(t, s, w, v, func(r *workflow.Run) { unleased(r); r.CreatedAt = base.Add(time.Duration(i) * time.Second) })
		}
		w, v := newWorkflow(t, s, alice)
		for i := range 50 {
			newRunOf(t, s, w, v, func(r *workflow.Run) {
				if i >= 2 { // alice executes her two oldest runs
					unleased(r)
				}
				r.CreatedAt = base.Add(-time.Hour + time.Duration(i)*time.Second)
			})
		}
		b1 := ownRun(t, s, bob, time.Hour)
		const owners = k + 2
		bound := (owners + k - 1) / k
		for i := range bound {
			r, ok := claimCapped(t, s, worker1, base, 0)
			if !ok {
				t.Fatalf("claim %d: none", i+1)
			}
			if r.OwnerID == alice {
				t.Fatalf("claim %d took alice's run %s before bob's", i+1, r.ID)
			}
			if r.ID == b1.ID {
				return
			}
		}
		t.Errorf("bob's run not claimed within %d claims", bound)
	}},
	{"ClaimNegativeCap", func(t *testing.T, s QueueStore) {
		queuedRun(t, s)
		_, _, err := s.Claim(t.Context(), worker1, base, base.Add(lease), -1)
		wantCode(t, err, runstream.CodeInvalidArgument, "Claim with a negative cap")
	}},
	{"ConcurrentClaimsCapped", func(t *testing.T, s QueueStore) {
		const perOwner, maxPerOwner, workers = 5, 2, 6
		owners := []string{alice, bob, carol}
		for _, owner := range owners {
			w, v := newWorkflow(t, s, owner)
			for range perOwner {
				newRunOf(t, s, w, v, unleased)
			}
		}
		claimers := workersOf(s, workers)
		claims := map[string][]string{} // run id → workers
		count := map[string]int{}       // owner → runs claimed
		for _, c := range ClaimUntilEmpty(t, claimers, base, base.Add(lease), maxPerOwner) {
			claims[c.Run.ID] = append(claims[c.Run.ID], c.Worker)
			count[c.Run.OwnerID]++
		}
		for _, owner := range owners {
			if count[owner] != maxPerOwner {
				t.Errorf("%s: %d runs claimed, want %d (the cap)", owner, count[owner], maxPerOwner)
			}
		}
		for id, by := range claims {
			if len(by) != 1 {
				t.Errorf("run %s claimed by %v, want exactly one worker", id, by)
			}
		}
	}},
}
