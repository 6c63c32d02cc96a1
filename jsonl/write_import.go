package jsonl

import (
	"context"

	"github.com/runstream/runstream/runevents"
)

var _ runevents.Importer = (*RunEventStore)(nil)

// ImportThread writes recs, prepared by runevents.PrepareImport, with
// their own seqs, each to its run's file, and returns once all are
// durable; on a write error no row is kept. The thread must never have had
// a row (no row in its files and no last_seq file).
func (s *RunEventStore) ImportThread(_ context.Context, recs []runevents.Record) error {
	if len(recs) == 0 {
		return s.writable()
	}
	leave, err := s.enter()
	if err != nil {
		return err
	}
	defer leave()
	t, err := s.loadThread(recs[0].ThreadID, true)
	if err != nil {
		return err
	}
	t.mu.Lock()
	if t.lastSeq > 0 {
		last := t.lastSeq
		t.mu.Unlock()
		return runevents.ImportConflict(t.id, last)
	}
	recs = append([]runevents.Record(nil), recs...)
	err = s.writeLocked(t, recs, nil)
	last := t.lastSeq
	t.mu.Unlock()
	if err != nil {
		return err
	}
	return s.commit(t, last)
}
