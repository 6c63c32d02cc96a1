package sqlite

import (
	"context"

	"github.com/runstream/runstream/runevents"
)

var _ runevents.ThreadReader = (*RunEventStore)(nil)

// listThreadEventsQuery reads the first rows after the cursor, ascending.
// Each shape is one range scan of an index already in seq order: the
// (thread_id, seq) unique index, or with a run filter run_events_run, and
// for message rows the partial message indexes (hence the literal
// category, which SQLite needs to pick a partial index). Owner and other
// category filters are checked on the rows the scan meets.
func listThreadEventsQuery(p runevents.ListThreadEventsParams) query {
	w := where{}
	w.add("thread_id = ?", p.ThreadID)
	if p.RunID != "" {
		w.add("run_id = ?", p.RunID)
	}
	switch p.Category {
	case "":
	case runevents.CategoryMessage:
		w.add("category = 'message'")
	default:
		w.add("category = ?", string(p.Category))
	}
	w.add("seq > ?", p.AfterSeq)
	w.owner(p.Owner)
	return selectQuery(w, true, p.Limit)
}

// ListThreadEvents returns the thread's rows of every category (or of
// p.Category, of run p.RunID) with seq > p.AfterSeq visible to p.Owner,
// ascending, at most p.Limit.
func (s *RunEventStore) ListThreadEvents(ctx context.Context, p runevents.ListThreadEventsParams) ([]runevents.Record, error) {
	if err := firstError(s.checkOpen(), p.Validate()); err != nil {
		return nil, err
	}
	return s.queryRecords(ctx, "sqlite: list thread events", listThreadEventsQuery(p), false)
}
