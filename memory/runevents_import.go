package memory

import (
	"context"

	"github.com/runstream/runstream/runevents"
)

var _ runevents.Importer = (*RunEventStore)(nil)

// ImportThread stores recs, prepared by runevents.PrepareImport, with
// their own seqs; the thread must never have had a row.
func (s *RunEventStore) ImportThread(_ context.Context, recs []runevents.Record) error {
	if len(recs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed()
	}
	id := recs[0].ThreadID
	if t := s.threads[id]; t != nil {
		return runevents.ImportConflict(id, t.lastSeq)
	}
	t := &thread{runs: map[string]*run{}}
	s.threads[id] = t
	for _, rec := range recs {
		t.lastSeq = rec.Seq - 1 // appendLocked assigns the next seq: rec's own
		s.appendLocked(rec.Clone())
	}
	return nil
}
