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
// Errors are *runstream.Error.
type Queue interface {
	// Claim leases the oldest claimable run (CreatedAt, then ID, ascending)
	// to workerID until leaseUntil, with one compare-and-set of the lease
	// fields, and returns it. Of concurrent claims of one run exactly one
	// wins. ok is false when no run is claimable.
	Claim(ctx context.Context, workerID string, now, leaseUntil time.Time) (r Run, ok bool, err error)
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
