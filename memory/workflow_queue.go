package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

var (
	_ workflow.Queue           = (*WorkflowStore)(nil)
	_ workflow.NodeOutputStore = (*WorkflowStore)(nil)
)

// claimable reports whether the run may be leased at now: queued, running
// or cancelling, with no lease or an expired one.
func claimable(r workflow.Run, now time.Time) bool {
	switch r.Status {
	case workflow.StatusQueued, workflow.StatusRunning, workflow.StatusCancelling:
	default:
		return false
	}
	return r.LeaseOwner == "" || !now.Before(r.LeaseExpiresAt)
}

// Claim leases the oldest claimable run to workerID. It scans every run
// (O(n)) under the store's mutex, which makes the claim a compare-and-set.
func (s *WorkflowStore) Claim(_ context.Context, workerID string, now, leaseUntil time.Time) (workflow.Run, bool, error) {
	if err := checkLease(workerID, leaseUntil); err != nil {
		return workflow.Run{}, false, err
	}
	if err := s.lock(); err != nil {
		return workflow.Run{}, false, err
	}
	defer s.mu.Unlock()
	var oldest *runRow
	for _, row := range s.runs {
		if !claimable(row.r, now) {
			continue
		}
		if oldest == nil || (listKey{row.r.CreatedAt, row.r.ID}).newerFirst(listKey{oldest.r.CreatedAt, oldest.r.ID}) > 0 {
			oldest = row
		}
	}
	if oldest == nil {
		return workflow.Run{}, false, nil
	}
	oldest.r.LeaseOwner, oldest.r.LeaseExpiresAt = workerID, leaseUntil.UTC().Truncate(time.Microsecond)
	return cloneRun(oldest.r), true, nil
}

// RenewLease moves the lease workerID holds on a run to leaseUntil.
func (s *WorkflowStore) RenewLease(_ context.Context, runID, workerID string, leaseUntil time.Time) error {
	if err := checkLease(workerID, leaseUntil); err != nil {
		return err
	}
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	row, err := s.leasedLocked(runID, workerID)
	if err != nil {
		return err
	}
	row.r.LeaseExpiresAt = leaseUntil.UTC().Truncate(time.Microsecond)
	return nil
}

// ReleaseLease clears the lease workerID holds on a run.
func (s *WorkflowStore) ReleaseLease(_ context.Context, runID, workerID string) error {
	if workerID == "" {
		return runstream.Errorf(runstream.CodeInvalidArgument, "release lease: worker id is required")
	}
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	row, err := s.leasedLocked(runID, workerID)
	if err != nil {
		return err
	}
	row.r.LeaseOwner, row.r.LeaseExpiresAt = "", time.Time{}
	return nil
}

func (s *WorkflowStore) leasedLocked(runID, workerID string) (*runRow, error) {
	row, err := s.runLocked(runID, runstream.AnyOwner)
	if err != nil {
		return nil, err
	}
	if row.r.LeaseOwner != workerID {
		return nil, runstream.Errorf(runstream.CodeConflict, "run %q is not leased to %q", runID, workerID)
	}
	return row, nil
}

func checkLease(workerID string, leaseUntil time.Time) error {
	switch {
	case workerID == "":
		return runstream.Errorf(runstream.CodeInvalidArgument, "lease: worker id is required")
	case leaseUntil.IsZero():
		return runstream.Errorf(runstream.CodeInvalidArgument, "lease: expiry is required")
	}
	return nil
}

// NodeOutputs returns copies of the run's stored node outputs.
func (s *WorkflowStore) NodeOutputs(_ context.Context, runID string) (map[string]json.RawMessage, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	row, err := s.runLocked(runID, runstream.AnyOwner)
	if err != nil {
		return nil, err
	}
	out := make(map[string]json.RawMessage, len(row.outputs))
	for id, v := range row.outputs {
		out[id] = bytes.Clone(v)
	}
	return out, nil
}

// storeOutputsLocked keeps copies of checked node outputs.
func (row *runRow) storeOutputsLocked(outputs map[string]json.RawMessage) {
	if len(outputs) == 0 {
		return
	}
	if row.outputs == nil {
		row.outputs = make(map[string]json.RawMessage, len(outputs))
	}
	for id, v := range outputs {
		row.outputs[id] = bytes.Clone(v)
	}
}
