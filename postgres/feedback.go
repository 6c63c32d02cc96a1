package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/runstream/runstream/runevents"
)

// putFeedbackSQL creates the user's feedback on a run and message id or
// replaces its rating, comment and tags, and returns the id and
// created_at it keeps.
const putFeedbackSQL = `INSERT INTO feedback (id, thread_id, run_id, user_id, message_id, rating, comment, tags, created_at, updated_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)
	ON CONFLICT (thread_id, run_id, user_id, message_id) DO UPDATE SET
		rating = EXCLUDED.rating, comment = EXCLUDED.comment, tags = EXCLUDED.tags, updated_at = EXCLUDED.updated_at
	RETURNING id, created_at`

// feedbackColumns are the columns scanFeedback reads, in its order.
const feedbackColumns = `id, thread_id, run_id, user_id, message_id, rating, comment, tags, created_at, updated_at`

// PutFeedback creates or replaces f.UserID's feedback on the run and
// f.MessageID, in one upsert. The id and CreatedAt of an existing feedback are kept; f.ID is
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
	err = s.pool.QueryRow(ctx, putFeedbackSQL, f.ID, f.ThreadID, f.RunID, f.UserID, f.MessageID, string(f.Rating), f.Comment, runevents.EncodeTags(f.Tags), now).
		Scan(&f.ID, &f.CreatedAt)
	if err != nil {
		return runevents.Feedback{}, dbError(err, "put feedback")
	}
	f.CreatedAt = f.CreatedAt.UTC()
	return f, nil
}

// ListFeedback returns the feedback on the given runs visible to owner,
// by run id: of each run the one Feedback.ShownBefore the others (the
// rating of the whole run, an empty message_id, first; then the most recently
// updated; then the greater id). One query, which reads the feedback_user
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
	list, err := s.queryFeedback(ctx, `SELECT DISTINCT ON (run_id) `+feedbackColumns+`
		FROM feedback`+q.whereClause()+` ORDER BY run_id, message_id <> '', updated_at DESC, id DESC`, q.args)
	if err != nil {
		return nil, err
	}
	for _, f := range list {
		out[f.RunID] = f
	}
	return out, nil
}

// ListRunFeedback returns every feedback on the run visible to owner,
// oldest first (ties by id).
func (s *RunStore) ListRunFeedback(ctx context.Context, threadID, runID string, owner runevents.Owner) ([]runevents.Feedback, error) {
	if err := firstError(runevents.ValidateID("thread_id", threadID), runevents.ValidateID("run_id", runID), runevents.CheckOwner(owner)); err != nil {
		return nil, err
	}
	var q query
	q.add("thread_id = ?", threadID)
	q.add("run_id = ?", runID)
	if !ownerColumn(&q, "user_id", owner) {
		return nil, nil
	}
	return s.queryFeedback(ctx, `SELECT `+feedbackColumns+` FROM feedback`+q.whereClause()+` ORDER BY created_at, id`, q.args)
}

// queryFeedback runs a SELECT of feedbackColumns.
func (s *RunStore) queryFeedback(ctx context.Context, sql string, args []any) ([]runevents.Feedback, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, dbError(err, "list feedback")
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (runevents.Feedback, error) {
		var (
			f      runevents.Feedback
			rating []byte
			tags   string
		)
		if err := row.Scan(&f.ID, &f.ThreadID, &f.RunID, &f.UserID, &f.MessageID, &rating, &f.Comment, &tags, &f.CreatedAt, &f.UpdatedAt); err != nil {
			return f, err
		}
		f.Rating, f.CreatedAt, f.UpdatedAt = rating, f.CreatedAt.UTC(), f.UpdatedAt.UTC()
		var err error
		f.Tags, err = runevents.DecodeTags(tags)
		return f, err
	})
	if err != nil {
		return nil, dbError(err, "list feedback")
	}
	return list, nil
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
	return s.deleteFeedback(ctx, q, owner)
}

// DeleteFeedbackByID deletes the feedback id on the run if owner sees it,
// and returns how many (0 or 1).
func (s *RunStore) DeleteFeedbackByID(ctx context.Context, threadID, runID, id string, owner runevents.Owner) (int, error) {
	if err := firstError(runevents.ValidateID("thread_id", threadID), runevents.ValidateID("run_id", runID), runevents.CheckOwner(owner)); err != nil {
		return 0, err
	}
	if !storableText(id) {
		return 0, nil
	}
	var q query
	q.add("id = ?", id)
	q.add("thread_id = ?", threadID)
	q.add("run_id = ?", runID)
	return s.deleteFeedback(ctx, q, owner)
}

// deleteFeedback deletes the rows q selects that owner sees, and returns
// how many.
func (s *RunStore) deleteFeedback(ctx context.Context, q query, owner runevents.Owner) (int, error) {
	if !ownerColumn(&q, "user_id", owner) {
		return 0, nil
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM feedback`+q.whereClause(), q.args...)
	if err != nil {
		return 0, dbError(err, "delete feedback")
	}
	return int(tag.RowsAffected()), nil
}
