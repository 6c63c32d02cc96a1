package workflow

import (
	"context"
	"encoding/json"
	"time"

	"github.com/runstream/runstream"
)

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
// ends it); other claimable runs are new to a worker: queued, released,
// or resumed. Claim takes the first claimable run by (rank, CreatedAt,
// ID), where the rank of a run is the number of executing runs of its
// owner, and 0 for a run taken over. So when nothing executes runs are
// claimed oldest first, and an owner's runs wait behind those of owners
// that execute fewer. With a cap (maxPerOwner > 0), a run that is not
// taken over is not claimed while its owner has maxPerOwner executing
// runs or more: it stays claimable, and is claimed once one of them ends
// or loses its lease. A run taken over is never held back: crash
// recovery and cancellation do not wait for the owner's other runs.
//
// Errors are *runstream.Error.
type Queue interface {
	// Claim leases the first claimable run by (rank, CreatedAt, ID) (see
	// Queue) to workerID until leaseUntil, with one compare-and-set of the
	// lease fields, and returns it. maxPerOwner caps each owner's
	// executing runs; 0 means no cap, and a negative cap is refused with
	// CodeInvalidArgument. The choice and the lease are one atomic step:
	// of concurrent claims of one run exactly one wins, and concurrent
	// claims never take an owner past the cap (runs taken over aside, and
	// a lease renewed by its worker after it expired, which counts again).
	// ok is false when no run is claimable, or every claimable run is held
	// back by the cap; a store may also pass over a run that a write in
	// progress holds (taking another, or none), and a later claim takes it.
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
