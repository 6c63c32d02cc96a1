package memory

import (
	"context"

	"github.com/runstream/runstream/runevents"
)

var _ runevents.Importer = (*RunEventStore)(nil)

// ImportThread stores events with their own seqs; the thread must never
// have had a row.
func (s *RunEventStore) ImportThread(_ context.Context, events []runevents.ImportEvent) ([]runevents.Record, error) {
	recs, err := runevents.PrepareImport(events, s.cfg.now(), s.cfg.maxTraceContent)
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed()
	}
	id := recs[0].ThreadID
	if t := s.threads[id]; t != nil {
		return nil, runevents.ImportConflict(id, t.lastSeq)
	}
	t := &thread{runs: map[string]*run{}}
	s.threads[id] = t
	for _, rec := range recs {
		t.lastSeq = rec.Seq - 1 // appendLocked assigns the next seq: rec's own
		s.appendLocked(rec.Clone())
	}
	return recs, nil
}
