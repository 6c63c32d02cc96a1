package memory

import (
	"cmp"
	"context"
	"slices"

	"github.com/runstream/runstream/runevents"
)

var _ runevents.ThreadReader = (*RunEventStore)(nil)

// ListThreadEvents returns the thread's rows of every category (or of
// p.Category, of run p.RunID) with seq > p.AfterSeq (and < p.BeforeSeq
// when it is positive) visible to p.Owner, ascending, at most p.Limit.
//
// The store keeps no thread-wide list of every row, so without a run
// filter it takes up to Limit rows from each run (a binary search for the
// cursor in each) and merges them: O(runs × (log n + Limit)). Message rows
// of the whole thread have their own list and cost O(log n + Limit).
func (s *RunEventStore) ListThreadEvents(_ context.Context, p runevents.ListThreadEventsParams) ([]runevents.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, errClosed()
	}
	t := s.threads[p.ThreadID]
	if t == nil {
		return nil, nil
	}
	keep := func(rec *runevents.Record) bool {
		return p.Owner.Sees(rec.UserID) && (p.Category == "" || rec.Category == p.Category)
	}
	after := runevents.Seq(p.AfterSeq)
	var before *int64
	if p.BeforeSeq > 0 {
		before = runevents.Seq(p.BeforeSeq)
	}
	rowsOf := func(r *run) []runevents.Record {
		if p.Category == runevents.CategoryMessage {
			return r.messages
		}
		return r.events
	}
	switch {
	case p.RunID != "":
		r := t.runs[p.RunID]
		if r == nil {
			return nil, nil
		}
		return page(rowsOf(r), after, before, p.Limit, keep), nil
	case p.Category == runevents.CategoryMessage:
		return page(t.messages, after, before, p.Limit, keep), nil
	}
	var out []runevents.Record
	for _, r := range t.runs {
		out = append(out, page(rowsOf(r), after, before, p.Limit, keep)...)
	}
	slices.SortFunc(out, func(a, b runevents.Record) int { return cmp.Compare(a.Seq, b.Seq) })
	if len(out) > p.Limit {
		out = out[:p.Limit]
	}
	return out, nil
}

var _ runevents.ThreadHead = (*RunEventStore)(nil)

// LastThreadSeq returns the highest seq handed out in the thread (0:
// none).
func (s *RunEventStore) LastThreadSeq(_ context.Context, threadID string) (int64, error) {
	if err := runevents.ValidateID("thread_id", threadID); err != nil {
		return 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, errClosed()
	}
	if t := s.threads[threadID]; t != nil {
		return t.lastSeq, nil
	}
	return 0, nil
}
