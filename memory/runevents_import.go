package memory

import (
	"context"

	"github.com/runstream/runstream/runevents"
)

var _ runevents.Importer = (*RunEventStore)(nil)

// ImportThread stores events with their own seqs, all above the thread's
// last seq.
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
	t := s.threads[id]
	switch {
	case t == nil:
		t = &thread{runs: map[string]*run{}}
		s.threads[id] = t
	case t.lastSeq >= recs[0].Seq:
		return nil, runevents.ImportConflict(id, t.lastSeq, recs[0].Seq)
	}
	for _, rec := range recs {
		t.lastSeq = rec.Seq - 1 // appendLocked assigns the next seq: rec's own
		s.appendLocked(rec.Clone())
	}
	return recs, nil
}
