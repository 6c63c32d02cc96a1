package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/runstream/runstream/runevents"
)

var _ runevents.ThreadHead = (*RunEventStore)(nil)

const lastThreadSeqSQL = "SELECT last_seq FROM run_event_threads WHERE thread_id = ?"

// LastThreadSeq returns the thread's seq counter: the highest seq handed
// out in it by a committed append (0: none).
func (s *RunEventStore) LastThreadSeq(ctx context.Context, threadID string) (int64, error) {
	if err := firstError(s.checkOpen(), runevents.ValidateID("thread_id", threadID)); err != nil {
		return 0, err
	}
	var last int64
	err := s.db.reads.queryRow(ctx, lastThreadSeqSQL, threadID).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, sqlError("sqlite: last thread seq", err)
	}
	return last, nil
}
