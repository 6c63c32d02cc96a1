package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/runstream/runstream/runevents"
)

var _ runevents.Importer = (*RunEventStore)(nil)

// ImportThread stores events with their own seqs in one write
// transaction: it moves the thread's counter (created when missing) to the
// highest seq when it is below the first one, and inserts the rows.
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
		last, err := s.reserveSeqs(ctx, tx, thread, 0) // reads the counter, creating it at 0
		if err != nil {
			return err
		}
		if last >= recs[0].Seq {
			conflict = last
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE run_event_threads SET last_seq = ? WHERE thread_id = ?`, recs[len(recs)-1].Seq, thread); err != nil {
			return sqlError("sqlite: import run events: counter", err)
		}
		return s.insertArgs(ctx, tx, args)
	})
	if err != nil {
		return nil, err
	}
	if conflict >= 0 {
		return nil, runevents.ImportConflict(thread, conflict, recs[0].Seq)
	}
	return recs, nil
}
