package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/runstream/runstream/runevents"
)

var _ runevents.ThreadHead = (*RunEventStore)(nil)

const lastThreadSeqSQL = "SELECT last_seq FROM run_event_threads WHERE thread_id = $1"

// LastThreadSeq returns the thread's seq counter: the highest seq handed
// out in it by a committed append (0: none).
func (s *RunEventStore) LastThreadSeq(ctx context.Context, threadID string) (int64, error) {
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	if err := runevents.ValidateID("thread_id", threadID); err != nil {
		return 0, err
	}
	var last int64
	err := s.pool.QueryRow(ctx, lastThreadSeqSQL, threadID).Scan(&last)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, dbError(err, "last thread seq")
	}
	return last, nil
}
