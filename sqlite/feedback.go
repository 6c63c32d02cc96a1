package sqlite

import (
	"context"
	"database/sql"
	"slices"

	"github.com/runstream/runstream/runevents"
)

// putFeedbackSQL creates the user's feedback on a run or replaces its
// rating and comment, and returns the id and created_at it keeps.
const putFeedbackSQL = `INSERT INTO feedback (id, thread_id, run_id, user_id, rating, comment, created_at, updated_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (thread_id, run_id, user_id) DO UPDATE SET
		rating = excluded.rating, comment = excluded.comment, updated_at = excluded.updated_at
	RETURNING id, created_at`

// PutFeedback creates or replaces f.UserID's feedback on the run. The id
// and CreatedAt of an existing feedback are kept; f.ID is ignored.
func (s *RunStore) PutFeedback(ctx context.Context, f runevents.Feedback) (runevents.Feedback, error) {
	if err := checkDBOpen(s.db); err != nil {
		return runevents.Feedback{}, err
	}
	f, err := f.Prepare()
	if err != nil {
		return runevents.Feedback{}, err
	}
	now := storeNow()
	f.ID, f.CreatedAt, f.UpdatedAt = runevents.NewFeedbackID(), now, now
	args := []any{f.ID, f.ThreadID, f.RunID, f.UserID, string(f.Rating), f.Comment, micros(now), micros(now)}
	var (
		id      string
		created int64
	)
	err = s.db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, putFeedbackSQL, args...).Scan(&id, &created); err != nil {
			return sqlError("sqlite: put feedback", err)
		}
		return nil
	})
	if err != nil {
		return runevents.Feedback{}, err
	}
	f.ID, f.CreatedAt = id, fromMicros(created)
	return f, nil
}

// listFeedbackQuery selects the feedback on runIDs of the thread visible
// to owner, by run and oldest update first, so that the last row of a run
// is its newest feedback.
func listFeedbackQuery(threadID string, runIDs []string, owner runevents.Owner) query {
	ids := make([]any, len(runIDs))
	for i, id := range runIDs {
		ids[i] = id
	}
	w := where{}
	w.add("thread_id = ?", threadID)
	w.in("run_id", ids)
	w.owner(owner)
	return query{sql: `SELECT id, thread_id, run_id, user_id, rating, comment, created_at, updated_at
		FROM feedback WHERE ` + w.String() + ` ORDER BY run_id, updated_at, id`, args: w.args}
}

// ListFeedback returns the feedback on the given runs visible to owner,
// by run id: the owner's own, or with AnyOwner the most recently updated
// (ties by id).
func (s *RunStore) ListFeedback(ctx context.Context, threadID string, runIDs []string, owner runevents.Owner) (map[string]runevents.Feedback, error) {
	errs := []error{checkDBOpen(s.db), runevents.ValidateID("thread_id", threadID), runevents.CheckOwner(owner)}
	for _, id := range runIDs {
		errs = append(errs, runevents.ValidateID("run_id", id))
	}
	if err := firstError(errs...); err != nil {
		return nil, err
	}
	out := map[string]runevents.Feedback{}
	// Chunks keep the statement far below SQLite's parameter limit.
	for ids := range slices.Chunk(runIDs, 500) {
		if err := s.scanFeedback(ctx, listFeedbackQuery(threadID, ids, owner), out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// scanFeedback runs q, a listFeedbackQuery, and keeps in out the last row
// of each run.
func (s *RunStore) scanFeedback(ctx context.Context, q query, out map[string]runevents.Feedback) error {
	const op = "sqlite: list feedback"
	rows, err := s.db.reads.query(ctx, q.sql, q.args...)
	if err != nil {
		return sqlError(op, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			f                runevents.Feedback
			created, updated int64
		)
		if err := rows.Scan(&f.ID, &f.ThreadID, &f.RunID, &f.UserID, (*[]byte)(&f.Rating), &f.Comment, &created, &updated); err != nil {
			return sqlError(op, err)
		}
		f.CreatedAt, f.UpdatedAt = fromMicros(created), fromMicros(updated)
		out[f.RunID] = f
	}
	if err := rows.Err(); err != nil {
		return sqlError(op, err)
	}
	return nil
}

// DeleteFeedback deletes the feedback on the run visible to owner and
// returns how many.
func (s *RunStore) DeleteFeedback(ctx context.Context, threadID, runID string, owner runevents.Owner) (int, error) {
	if err := firstError(checkDBOpen(s.db), runevents.ValidateID("thread_id", threadID), runevents.ValidateID("run_id", runID), runevents.CheckOwner(owner)); err != nil {
		return 0, err
	}
	w := where{}
	w.add("thread_id = ?", threadID)
	w.add("run_id = ?", runID)
	w.owner(owner)
	var n int64
	err := s.db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM feedback WHERE `+w.String(), w.args...)
		if err != nil {
			return sqlError("sqlite: delete feedback", err)
		}
		if n, err = res.RowsAffected(); err != nil {
			return sqlError("sqlite: delete feedback", err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return int(n), nil
}
