package workflow

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/runstream/runstream"
)

// ClaimWindow is the most owners one Queue.Claim visits: the work of a
// claim is bounded by it (one index search per owner), not by the number
// of owners with runs to execute nor by their backlogs.
const ClaimWindow = 64

// ClaimCursor is the cursor of a store's claims (see Queue): the last
// owner its previous claim visited, "" (before every owner id) at first.
// Its zero value is ready to use; it is safe for concurrent use.
type ClaimCursor struct {
	mu    sync.Mutex
	owner string
}

// Owner returns the owner the cursor is at.
func (c *ClaimCursor) Owner() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owner
}

// Move puts the cursor at owner.
func (c *ClaimCursor) Move(owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.owner = owner
}

// CheckClaimCap refuses a negative cap per owner (Queue.Claim's
// maxPerOwner) with CodeInvalidArgument.
func CheckClaimCap(maxPerOwner int) error {
	if maxPerOwner < 0 {
		return runstream.Errorf(runstream.CodeInvalidArgument, "claim: the cap per owner must not be negative")
	}
	return nil
}

// Queue is the optional capability of a Store that lets workflow engines
// share runs: a run is claimed with a lease that its worker renews while it
// executes the run. Several engine instances may call it concurrently.
//
// A run is claimable when its status is queued, running or cancelling and
// it has no lease or its lease expired (LeaseExpiresAt <= now). Runs that
// await input are parked until they are resumed; terminal runs are never
// claimed. A terminal event clears the lease (ApplyEvent).
//
// Claim shares the workers among owners. An owner's executing runs are
// its queued, running and cancelling runs whose lease holds at now (a
// lease owner and LeaseExpiresAt > now), whichever worker holds it. A
// claimable run is taken over when it has a lease owner (its lease
// expired: its worker was lost) or it is cancelling (claiming it only
// ends it); the other claimable runs wait: queued, released, or resumed.
// The rank of a waiting run is the number of executing runs of its owner;
// a run taken over has rank 0.
//
// So that a claim costs the same whatever the number of owners and their
// backlogs, it looks at ClaimWindow owners at most, taken round robin.
// The owners with a waiting run form a ring, in the store's order of owner
// ids (an owner whose runs all execute is not in it). Each store keeps its own cursor, the last
// owner its previous claim visited (at first, before every owner id). A
// claim visits the owners that follow the cursor in the ring, wrapping
// around past the last id to the first, until it has visited ClaimWindow
// owners or every owner once, and moves the cursor to the last owner it
// visited. Its candidates are the oldest waiting run (by CreatedAt, then
// ID) of each visited owner, the oldest run whose lease expired and the
// oldest cancelling run without a lease; it leases the first candidate by
// (rank, CreatedAt, ID). Hence:
//
//   - With ClaimWindow owners or fewer, every claim visits every owner:
//     Claim takes the first claimable run of the store by (rank,
//     CreatedAt, ID). When nothing executes, runs are claimed oldest
//     first (an owner alone: always oldest first), and an owner's runs
//     wait behind those of owners that execute fewer: the run an owner
//     executing nothing queues after the backlog of an owner executing
//     runs is claimed before the rest of that backlog.
//   - With more owners, the claims of one store made one after another
//     visit each owner of the ring at least once in every ceil(N /
//     ClaimWindow) of them, N being the number of owners in the ring at
//     some point during those claims; a claim that visits an owner takes
//     its oldest waiting run unless a candidate ranks before it: a run
//     taken over, or the waiting run of another visited owner that
//     executes fewer runs, or as many with an older run.
//   - Every owner visited gives a candidate, but for the cap: without a
//     cap, Claim leases nothing (ok is false) only when no run is
//     claimable. With a cap, a claim whose visited owners are all at the
//     cap leases nothing even if owners it did not visit have waiting
//     runs; the next claim visits the next owners.
//
// With a cap (maxPerOwner > 0), a waiting run is not claimed while its
// owner has maxPerOwner executing runs or more (the owner is visited, and
// gives no candidate): it stays claimable, and is claimed once one of
// them ends or loses its lease. The cap counts the executing runs in the
// store, so it holds across every engine sharing the store. A run taken
// over is never held back: crash recovery and cancellation do not wait
// for the owner's other runs.
//
// Errors are *runstream.Error.
type Queue interface {
	// Claim leases to workerID until leaseUntil the first candidate by
	// (rank, CreatedAt, ID) among the owners it visits (see Queue), with
	// one compare-and-set of the lease fields, and returns it. maxPerOwner
	// caps each owner's executing runs; 0 means no cap, and a negative cap
	// is refused with CodeInvalidArgument. The choice and the lease are one atomic step:
	// of concurrent claims of one run exactly one wins, and concurrent
	// claims never take an owner past the cap (runs taken over aside, and
	// a lease renewed by its worker after it expired, which counts again).
	// ok is false when no run is claimable, or, with a cap, when every
	// owner visited is at the cap; a store may also pass over a
	// run that a write in progress holds (taking another, or none), and a
	// later claim takes it.
	Claim(ctx context.Context, workerID string, now, leaseUntil time.Time, maxPerOwner int) (r Run, ok bool, err error)
	// RenewLease extends the lease workerID holds on a run. It fails with
	// CodeConflict when the run is not leased to workerID (another worker
	// took it over, or it ended), CodeWorkflowRunNotFound for an unknown
	// run.
	RenewLease(ctx context.Context, runID, workerID string, leaseUntil time.Time) error
	// ReleaseLease gives the lease workerID holds on a run back, so that the
	// run is claimable at once: after a graceful stop, or when the run
	// parks awaiting input. It fails with CodeConflict when the run is not
	// leased to workerID, CodeWorkflowRunNotFound for an unknown run.
	ReleaseLease(ctx context.Context, runID, workerID string) error
}

// NodeOutputStore is the optional capability of a Store that keeps the
// full output of each completed node of a run, so that an engine taking a
// run over does not run completed nodes again. The outputs are written by
// Append (AppendParams.NodeOutputs, atomically with the node.completed
// event) and Resume (ResumeParams.NodeOutputs, atomically with
// run.resumed), never alone.
type NodeOutputStore interface {
	// NodeOutputs returns the stored outputs of a run's nodes by node id
	// (empty, not nil, when there is none). An unknown run fails with
	// CodeWorkflowRunNotFound. The caller has checked the run's owner.
	NodeOutputs(ctx context.Context, runID string) (map[string]json.RawMessage, error)
}

// CheckNodeOutputs rejects, with CodeInvalidArgument, node outputs with an
// empty node id or a value that is not one valid JSON value.
func CheckNodeOutputs(outputs map[string]json.RawMessage) error {
	for id, out := range outputs {
		if id == "" {
			return runstream.Errorf(runstream.CodeInvalidArgument, "node outputs: empty node id")
		}
		if !json.Valid(out) {
			return runstream.Errorf(runstream.CodeInvalidArgument, "node outputs: the output of node %q is not valid JSON", id)
		}
	}
	return nil
}
