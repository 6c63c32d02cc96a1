package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/runstream/runstream/runevents"
)

// putFeedbackSQL creates the user's feedback on a run or replaces its
// rating and comment, and returns the id and created_at it keeps.
const putFeedbackSQL = `INSERT INTO feedback (id, thread_id, run_id, user_id, rating, comment, created_at, updated_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $7)
	ON CONFLICT (thread_id, run_id, user_id) DO UPDATE SET
		rating = EXCLUDED.rating, comment = EXCLUDED.comment, updated_at = EXCLUDED.updated_at
	RETURNING id, created_at`

// PutFeedback creates or replaces f.UserID's feedback on the run, in one
// upsert. The id and CreatedAt of an existing feedback are kept; f.ID is
// ignored. The rating is stored compacted.
func (s *RunStore) PutFeedback(ctx context.Context, f runevents.Feedback) (runevents.Feedback, error) {
	f, err := f.Prepare()
	if err != nil {
		return runevents.Feedback{}, err
	}
	if err := checkText("feedback user", f.UserID); err != nil {
		return runevents.Feedback{}, err
	}
	now := storeNow()
	f.ID, f.CreatedAt, f.UpdatedAt = runevents.NewFeedbackID(), now, now
	err = s.pool.QueryRow(ctx, putFeedbackSQL, f.ID, f.ThreadID, f.RunID, f.UserID, string(f.Rating), f.Comment, now).
		Scan(&f.ID, &f.CreatedAt)
	if err != nil {
		return runevents.Feedback{}, dbError(err, "put feedback")
	}
	f.CreatedAt = f.CreatedAt.UTC()
	return f, nil
}

// ListFeedback returns the feedback on the given runs visible to owner,
// by run id: the owner's own, or with AnyOwner the most recently updated
// (ties by the greater id). One query, which reads the feedback_user
// unique index.
func (s *RunStore) ListFeedback(ctx context.Context, threadID string, runIDs []string, owner runevents.Owner) (map[string]runevents.Feedback, error) {
	errs := []error{runevents.ValidateID("thread_id", threadID), runevents.CheckOwner(owner)}
	for _, id := range runIDs {
		errs = append(errs, runevents.ValidateID("run_id", id))
	}
	if err := firstError(errs...); err != nil {
		return nil, err
	}
	out := map[string]runevents.Feedback{}
	var q query
	q.add("thread_id = ?", threadID)
	q.add("run_id = ANY(?)", runIDs)
	if len(runIDs) == 0 || !ownerColumn(&q, "user_id", owner) {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT ON (run_id) id, thread_id, run_id, user_id, rating, comment, created_at, updated_at
		FROM feedback`+q.whereClause()+` ORDER BY run_id, updated_at DESC, id DESC`, q.args...)
	if err != nil {
		return nil, dbError(err, "list feedback")
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (runevents.Feedback, error) {
		var f runevents.Feedback
		var rating []byte
		err := row.Scan(&f.ID, &f.ThreadID, &f.RunID, &f.UserID, &rating, &f.Comment, &f.CreatedAt, &f.UpdatedAt)
		f.Rating, f.CreatedAt, f.UpdatedAt = rating, f.CreatedAt.UTC(), f.UpdatedAt.UTC()
		return f, err
	})
	if err != nil {
		return nil, dbError(err, "list feedback")
	}
	for _, f := range list {
		out[f.RunID] = f
	}
	return out, nil
}

// DeleteFeedback deletes the feedback on the run visible to owner and
// returns how many.
func (s *RunStore) DeleteFeedback(ctx context.Context, threadID, runID string, owner runevents.Owner) (int, error) {
	if err := firstError(runevents.ValidateID("thread_id", threadID), runevents.ValidateID("run_id", runID), runevents.CheckOwner(owner)); err != nil {
		return 0, err
	}
	var q query
	q.add("thread_id = ?", threadID)
	q.add("run_id = ?", runID)
	if !ownerColumn(&q, "user_id", owner) {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM feedback`+q.whereClause(), q.args...)
	if err != nil {
		return 0, dbError(err, "delete feedback")
	}
	return int(tag.RowsAffected()), nil
}
