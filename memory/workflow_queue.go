package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

var (
	_ workflow.Queue           = (*WorkflowStore)(nil)
	_ workflow.NodeOutputStore = (*WorkflowStore)(nil)
)

// executing reports whether the run counts against its owner's cap at
// now: queued, running or cancelling, with a lease that holds.
func executing(r workflow.Run, now time.Time) bool {
	return inQueue(r.Status) && r.LeaseOwner != "" && now.Before(r.LeaseExpiresAt)
}

// takenOver reports whether a claimable run (in the queue, not executing)
// is taken over (see workflow.Queue): its lease expired, or it is
// cancelling.
func takenOver(r workflow.Run) bool {
	return r.LeaseOwner != "" || r.Status == workflow.StatusCancelling
}

// inQueue reports whether runs of status s are claimed by engines.
func inQueue(s workflow.RunStatus) bool {
	switch s {
	case workflow.StatusQueued, workflow.StatusRunning, workflow.StatusCancelling:
		return true
	}
	return false
}

// claimKey orders claimable runs: the lowest rank, then the oldest (by
// CreatedAt, then ID).
type claimKey struct {
	rank int
	at   listKey
}

func (k claimKey) before(o claimKey) bool {
	if k.rank != o.rank {
		return k.rank < o.rank
	}
	return k.at.newerFirst(o.at) > 0
}

// Claim leases to workerID the first candidate by (rank, CreatedAt, ID)
// among the owners it visits (see workflow.Queue). It scans every run
// once (O(n)) under the store's mutex, which makes the claim a
// compare-and-set and serialises the moves of the store's cursor.
func (s *WorkflowStore) Claim(_ context.Context, workerID string, now, leaseUntil time.Time, maxPerOwner int) (workflow.Run, bool, error) {
	if err := checkLease(workerID, leaseUntil); err != nil {
		return workflow.Run{}, false, err
	}
	if err := workflow.CheckClaimCap(maxPerOwner); err != nil {
		return workflow.Run{}, false, err
	}
	if err := s.lock(); err != nil {
		return workflow.Run{}, false, err
	}
	defer s.mu.Unlock()
	var (
		first   *runRow
		key     claimKey
		running = map[string]int{}     // executing runs by owner
		waiting = map[string]*runRow{} // each owner's oldest waiting run
	)
	consider := func(row *runRow, rank int) {
		k := claimKey{rank, listKey{row.r.CreatedAt, row.r.ID}}
		if first == nil || k.before(key) {
			first, key = row, k
		}
	}
	for _, row := range s.runs {
		r := row.r
		if !inQueue(r.Status) {
			continue
		}
		switch {
		case executing(r, now):
			running[r.OwnerID]++
		case takenOver(r):
			consider(row, 0)
		default: // waiting: keep the owner's oldest
			if w := waiting[r.OwnerID]; w == nil || (listKey{r.CreatedAt, r.ID}).newerFirst(listKey{w.r.CreatedAt, w.r.ID}) > 0 {
				waiting[r.OwnerID] = row
			}
		}
	}
	ring := slices.Sorted(maps.Keys(waiting)) // the owners with a waiting run
	visited := claimWindow(ring, s.claims.Owner())
	for _, owner := range visited {
		if rank := running[owner]; maxPerOwner == 0 || rank < maxPerOwner {
			consider(waiting[owner], rank)
		}
	}
	if len(visited) > 0 {
		s.claims.Move(visited[len(visited)-1])
	}
	if first == nil {
		return workflow.Run{}, false, nil
	}
	first.r.LeaseOwner, first.r.LeaseExpiresAt = workerID, leaseUntil.UTC().Truncate(time.Microsecond)
	return cloneRun(first.r), true, nil
}

// claimWindow returns the owners a claim visits (see workflow.Queue): of
// ring, sorted, the owners after cursor, then from the first, until
// workflow.ClaimWindow of them or all of ring.
func claimWindow(ring []string, cursor string) []string {
	i, found := slices.BinarySearch(ring, cursor)
	if found {
		i++
	}
	visited := slices.Concat(ring[i:], ring[:i])
	return visited[:min(len(visited), workflow.ClaimWindow)]
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
