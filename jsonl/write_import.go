package jsonl

import (
	"context"

	"github.com/runstream/runstream/runevents"
)

var _ runevents.Importer = (*RunEventStore)(nil)

// ImportThread writes events with their own seqs, all above the thread's
// last seq (of its files and its last_seq file), each to its run's file,
// and returns once all are durable; on a write error no row is kept.
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
	if t.lastSeq >= recs[0].Seq {
		last := t.lastSeq
		t.mu.Unlock()
		return nil, runevents.ImportConflict(t.id, last, recs[0].Seq)
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
