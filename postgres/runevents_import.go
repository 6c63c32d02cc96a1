package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runstream/runstream/runevents"
)

var _ runevents.Importer = (*RunEventStore)(nil)

// importRows inserts rows of one thread with their own seqs ($12), as
// appendRows does with assigned ones, and notifies the thread's last seq.
const importRows = `WITH inserted AS (
	INSERT INTO run_events (thread_id, run_id, seq, user_id, event_type, category,
		content, metadata, task_id, caller_middleware, created_at, created_at_offset)
	SELECT $1, r.run_id, r.seq, r.user_id, r.event_type, r.category,
		r.content, r.metadata, r.task_id, r.caller_middleware, r.created_at, r.created_at_offset
	FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
		$9::bytea[], $10::boolean[], $11::timestamptz[], $12::integer[], $13::bigint[])
		AS r(run_id, user_id, event_type, category, content, metadata,
			task_id, caller_middleware, created_at, created_at_offset, seq)
)
SELECT pg_notify('` + ThreadNotifyChannel + `', $1 || ':' || $2::bigint)`

// ImportThread stores events with their own seqs in one transaction: it
// locks the thread's counter row (created when missing), moves it to the
// highest seq when it is below the first one, and inserts the rows.
func (s *RunEventStore) ImportThread(ctx context.Context, events []runevents.ImportEvent) ([]runevents.Record, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	recs, err := runevents.PrepareImport(events, time.Now(), s.maxTrace)
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	if err := checkStorableBatch(recs); err != nil {
		return nil, err
	}
	thread, last := recs[0].ThreadID, recs[len(recs)-1].Seq
	var cols columns
	seqs := make([]int64, len(recs))
	for i := range recs {
		cols.add(&recs[i])
		seqs[i] = recs[i].Seq
	}
	args := append(cols.args(thread), seqs)
	args[1] = last
	var existing int64
	errConflict := errors.New("thread not empty")
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Adding 0 takes the counter row's lock, creating the row for a
		// new thread, as PutIfAbsent does.
		err := tx.QueryRow(ctx, `INSERT INTO run_event_threads (thread_id, last_seq) VALUES ($1, 0)
			ON CONFLICT (thread_id) DO UPDATE SET last_seq = run_event_threads.last_seq RETURNING last_seq`, thread).Scan(&existing)
		if err != nil {
			return err
		}
		if existing >= recs[0].Seq {
			return errConflict
		}
		if _, err := tx.Exec(ctx, `UPDATE run_event_threads SET last_seq = $2 WHERE thread_id = $1`, thread, last); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, importRows, args...)
		return err
	})
	switch {
	case errors.Is(err, errConflict):
		return nil, runevents.ImportConflict(thread, existing, recs[0].Seq)
	case err != nil:
		return nil, dbError(err, "import run events")
	}
	return recs, nil
}
