package sqlite

import (
	"context"

	"github.com/runstream/runstream/runevents"
)

var (
	_ runevents.ThreadReader     = (*RunEventStore)(nil)
	_ runevents.ThreadJSONReader = (*RunEventStore)(nil)
)

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
	if p.BeforeSeq > 0 {
		w.add("seq < ?", p.BeforeSeq)
	}
	w.owner(p.Owner)
	return selectQuery(w, true, p.Limit)
}

// ListThreadEvents returns the thread's rows of every category (or of
// p.Category, of run p.RunID) with seq > p.AfterSeq (and < p.BeforeSeq
// when it is positive) visible to p.Owner, ascending, at most p.Limit.
func (s *RunEventStore) ListThreadEvents(ctx context.Context, p runevents.ListThreadEventsParams) ([]runevents.Record, error) {
	if err := firstError(s.checkOpen(), p.Validate()); err != nil {
		return nil, err
	}
	return s.queryRecords(ctx, "sqlite: list thread events", listThreadEventsQuery(p), false)
}

// ScanThreadJSON calls fn with the seq, event type and JSON envelope of
// each row ListThreadEvents(p) returns, in order. The envelope is written
// from the row's packed text (runevents.RecordText.AppendJSON): no Record,
// no copy of its content, no decoding and encoding of its time, which is
// copied when it is as CreatedAtLayout formats it (every row written
// through runevents.Prepare) and else decoded and encoded like
// ListThreadEvents does.
func (s *RunEventStore) ScanThreadJSON(ctx context.Context, p runevents.ListThreadEventsParams, fn func(seq int64, eventType string, envelope []byte) error) error {
	const op = "sqlite: scan thread events"
	if err := firstError(s.checkOpen(), p.Validate()); err != nil {
		return err
	}
	q := listThreadEventsQuery(p)
	rows, err := s.db.reads.query(ctx, q.sql, q.args...)
	if err != nil {
		return sqlError(op, err)
	}
	defer rows.Close()
	var (
		seq      int64
		packed   string
		envelope []byte
	)
	for rows.Next() {
		if err := rows.Scan(&seq, &packed); err != nil {
			return sqlError(op, err)
		}
		text, err := splitPacked(seq, packed)
		if err != nil {
			return sqlError(op, err)
		}
		if _, _, ok := canonicalCreatedAt(text.CreatedAt); ok {
			envelope = text.AppendJSON(envelope[:0])
		} else {
			rec, err := recordOf(text)
			if err != nil {
				return sqlError(op, err)
			}
			envelope = rec.AppendJSON(envelope[:0])
		}
		if err := fn(seq, text.EventType, envelope); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return sqlError(op, err)
	}
	return nil
}
