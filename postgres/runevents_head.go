package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/runstream/runstream/runevents"
)

var (
	_ runevents.ThreadHead  = (*RunEventStore)(nil)
	_ runevents.ThreadOwner = (*RunEventStore)(nil)
)

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

// firstThreadOwnerSQL is one step into the (thread_id, seq) index.
const firstThreadOwnerSQL = "SELECT COALESCE(user_id, '') FROM run_events WHERE thread_id = $1 ORDER BY seq ASC LIMIT 1"

// FirstThreadOwner returns the user_id of the thread's row with the
// lowest seq, and false when the thread has no rows.
func (s *RunEventStore) FirstThreadOwner(ctx context.Context, threadID string) (string, bool, error) {
	if err := s.checkOpen(); err != nil {
		return "", false, err
	}
	if err := runevents.ValidateID("thread_id", threadID); err != nil {
		return "", false, err
	}
	var user string
	err := s.pool.QueryRow(ctx, firstThreadOwnerSQL, threadID).Scan(&user)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, dbError(err, "first thread owner")
	}
	return user, true, nil
}
