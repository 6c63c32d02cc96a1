package jsonl

import (
	"context"

	"github.com/runstream/runstream/runevents"
)

var _ runevents.Importer = (*RunEventStore)(nil)

// ImportThread writes events with their own seqs, each to its run's file, and returns once all are
// durable; on a write error no row is kept. The thread must never have had
// a row (no row in its files and no last_seq file).
func (s *RunEventStore) ImportThread(_ context.Context, events []runevents.ImportEvent) ([]runevents.Record, error) {
	recs, err := runevents.PrepareImport(events, s.now(), s.maxTrace)
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	leave, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	t, err := s.loadThread(recs[0].ThreadID, true)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	if t.lastSeq > 0 {
		last := t.lastSeq
		t.mu.Unlock()
		return nil, runevents.ImportConflict(t.id, last)
	}
	err = s.writeLocked(t, recs, nil)
	last := t.lastSeq
	t.mu.Unlock()
	if err == nil {
		err = s.commit(t, last)
	}
	if err != nil {
		return nil, err
	}
	return recs, nil
}
