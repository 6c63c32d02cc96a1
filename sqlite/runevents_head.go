package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/runstream/runstream/runevents"
)

var (
	_ runevents.ThreadHead  = (*RunEventStore)(nil)
	_ runevents.ThreadOwner = (*RunEventStore)(nil)
)

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

// firstThreadOwnerSQL is one step into the (thread_id, seq) index.
const firstThreadOwnerSQL = "SELECT user_id FROM run_events WHERE thread_id = ? ORDER BY seq ASC LIMIT 1"

// FirstThreadOwner returns the user_id of the thread's row with the
// lowest seq, and false when the thread has no rows.
func (s *RunEventStore) FirstThreadOwner(ctx context.Context, threadID string) (string, bool, error) {
	if err := firstError(s.checkOpen(), runevents.ValidateID("thread_id", threadID)); err != nil {
		return "", false, err
	}
	var user string
	err := s.db.reads.queryRow(ctx, firstThreadOwnerSQL, threadID).Scan(&user)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, sqlError("sqlite: first thread owner", err)
	}
	return user, true, nil
}
