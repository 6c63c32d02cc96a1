package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/runstream/runstream/runevents"
)

var _ runevents.Importer = (*RunEventStore)(nil)

// ImportThread stores events with their own seqs in one write transaction: it creates the thread's counter
// at the highest seq, which fails when the thread has one already (it has
// or had rows), and inserts the rows.
func (s *RunEventStore) ImportThread(ctx context.Context, events []runevents.ImportEvent) ([]runevents.Record, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	recs, err := runevents.PrepareImport(events, time.Now(), s.maxTrace)
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	thread := recs[0].ThreadID
	args := rowArgs(recs)
	for i, r := range recs {
		args[i*insertColumns+seqColumn] = r.Seq
	}
	var conflict int64 = -1 // the thread's last seq when it is not empty
	err = s.db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		conflict = -1
		if err := s.flushAppends(ctx, tx); err != nil { // appends earlier in the group come first
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO run_event_threads (thread_id, last_seq) VALUES (?, ?)
			ON CONFLICT (thread_id) DO NOTHING`, thread, recs[len(recs)-1].Seq)
		if err != nil {
			return sqlError("sqlite: import run events: counter", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return sqlError("sqlite: import run events: counter", err)
			}
			if err := tx.QueryRowContext(ctx, `SELECT last_seq FROM run_event_threads WHERE thread_id = ?`, thread).Scan(&conflict); err != nil {
				return sqlError("sqlite: import run events: counter", err)
			}
			return nil
		}
		return s.insertArgs(ctx, tx, args)
	})
	if err != nil {
		return nil, err
	}
	if conflict >= 0 {
		return nil, runevents.ImportConflict(thread, conflict)
	}
	return recs, nil
}
