package postgres

import (
	"context"

	"github.com/runstream/runstream/runevents"
)

var _ runevents.ThreadReader = (*RunEventStore)(nil)

// ListThreadEvents returns the thread's rows of every category (or of
// p.Category, of run p.RunID) with seq > p.AfterSeq (and < p.BeforeSeq
// when it is positive) visible to p.Owner,
// ascending, at most p.Limit: the replay of the thread stream.
//
// It is one page query in seq order: a range of the key (thread_id, seq),
// or of (thread_id, run_id, seq) with a run, or of the partial index of
// message rows for the message category; the other filters are checked on
// the rows of the range, so a rare category or owner may read many rows
// for one page. Like the other page queries it runs with sorting off (see
// queryPage).
func (s *RunEventStore) ListThreadEvents(ctx context.Context, p runevents.ListThreadEventsParams) ([]runevents.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	sql, args, ok := listThreadQuery(p)
	if !ok {
		return nil, nil
	}
	return s.list(ctx, "list thread events", sql, args, false)
}

// listThreadQuery returns the statement of ListThreadEvents, or ok=false
// when no row can match.
func listThreadQuery(p runevents.ListThreadEventsParams) (sql string, args []any, ok bool) {
	var q query
	q.add("thread_id = ?", p.ThreadID)
	if p.RunID != "" {
		q.add("run_id = ?", p.RunID)
	}
	switch {
	case p.Category == "":
	case p.Category == runevents.CategoryMessage:
		q.where = append(q.where, isMessage) // a literal: the partial index applies
	case !storableText(string(p.Category)):
		return "", nil, false // never written
	default:
		q.add("category = ?", string(p.Category))
	}
	if !q.owner(p.Owner) {
		return "", nil, false
	}
	after := p.AfterSeq
	var before *int64
	if p.BeforeSeq > 0 {
		before = &p.BeforeSeq
	}
	q.cursors(&after, before)
	return q.page(false, p.Limit), q.args, true
}
