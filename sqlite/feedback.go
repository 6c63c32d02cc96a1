package sqlite

import (
	"context"
	"database/sql"
	"slices"

	"github.com/runstream/runstream/runevents"
)

// putFeedbackSQL creates the user's feedback on a run and message id or
// replaces its rating, comment and tags, and returns the id and
// created_at it keeps.
const putFeedbackSQL = `INSERT INTO feedback (id, thread_id, run_id, user_id, message_id, rating, comment, tags, created_at, updated_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (thread_id, run_id, user_id, message_id) DO UPDATE SET
		rating = excluded.rating, comment = excluded.comment, tags = excluded.tags, updated_at = excluded.updated_at
	RETURNING id, created_at`

// feedbackColumns are the columns scanFeedbackRow reads, in its order.
const feedbackColumns = `id, thread_id, run_id, user_id, message_id, rating, comment, tags, created_at, updated_at`

// PutFeedback creates or replaces f.UserID's feedback on the run and
// f.MessageID. The id and CreatedAt of an existing feedback are kept;
// f.ID is ignored.
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
	args := []any{f.ID, f.ThreadID, f.RunID, f.UserID, f.MessageID, string(f.Rating), f.Comment, runevents.EncodeTags(f.Tags), micros(now), micros(now)}
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
// to owner, in index order (ListFeedback picks each run's newest).
func listFeedbackQuery(threadID string, runIDs []string, owner runevents.Owner) query {
	ids := make([]any, len(runIDs))
	for i, id := range runIDs {
		ids[i] = id
	}
	w := where{}
	w.add("thread_id = ?", threadID)
	w.in("run_id", ids)
	w.owner(owner)
	return query{sql: `SELECT ` + feedbackColumns + `
		FROM feedback WHERE ` + w.String(), args: w.args}
}

// ListFeedback returns the feedback on the given runs visible to owner,
// by run id: of each run the one Feedback.ShownBefore the others.
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
		rows, err := s.queryFeedback(ctx, listFeedbackQuery(threadID, ids, owner))
		if err != nil {
			return nil, err
		}
		for _, f := range rows {
			if old, ok := out[f.RunID]; !ok || f.ShownBefore(old) {
				out[f.RunID] = f
			}
		}
	}
	return out, nil
}

// ListRunFeedback returns every feedback on the run visible to owner,
// oldest first (ties by id).
func (s *RunStore) ListRunFeedback(ctx context.Context, threadID, runID string, owner runevents.Owner) ([]runevents.Feedback, error) {
	if err := firstError(checkDBOpen(s.db), runevents.ValidateID("thread_id", threadID), runevents.ValidateID("run_id", runID), runevents.CheckOwner(owner)); err != nil {
		return nil, err
	}
	w := where{}
	w.add("thread_id = ?", threadID)
	w.add("run_id = ?", runID)
	w.owner(owner)
	return s.queryFeedback(ctx, query{sql: `SELECT ` + feedbackColumns + ` FROM feedback WHERE ` + w.String() + ` ORDER BY created_at, id`, args: w.args})
}

// queryFeedback runs q, a SELECT of feedbackColumns, on the read pool.
func (s *RunStore) queryFeedback(ctx context.Context, q query) ([]runevents.Feedback, error) {
	const op = "sqlite: list feedback"
	rows, err := s.db.reads.query(ctx, q.sql, q.args...)
	if err != nil {
		return nil, sqlError(op, err)
	}
	defer rows.Close()
	var out []runevents.Feedback
	for rows.Next() {
		var (
			f                runevents.Feedback
			tags             string
			created, updated int64
		)
		if err := rows.Scan(&f.ID, &f.ThreadID, &f.RunID, &f.UserID, &f.MessageID, (*[]byte)(&f.Rating), &f.Comment, &tags, &created, &updated); err != nil {
			return nil, sqlError(op, err)
		}
		if f.Tags, err = runevents.DecodeTags(tags); err != nil {
			return nil, err
		}
		f.CreatedAt, f.UpdatedAt = fromMicros(created), fromMicros(updated)
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, sqlError(op, err)
	}
	return out, nil
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
	return s.deleteFeedback(ctx, w)
}

// DeleteFeedbackByID deletes the feedback id on the run if owner sees it,
// and returns how many (0 or 1).
func (s *RunStore) DeleteFeedbackByID(ctx context.Context, threadID, runID, id string, owner runevents.Owner) (int, error) {
	if err := firstError(checkDBOpen(s.db), runevents.ValidateID("thread_id", threadID), runevents.ValidateID("run_id", runID), runevents.CheckOwner(owner)); err != nil {
		return 0, err
	}
	w := where{}
	w.add("id = ?", id)
	w.add("thread_id = ?", threadID)
	w.add("run_id = ?", runID)
	w.owner(owner)
	return s.deleteFeedback(ctx, w)
}

// deleteFeedback deletes the feedback rows w selects and returns how many.
func (s *RunStore) deleteFeedback(ctx context.Context, w where) (int, error) {
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
