package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/runstream/runstream/runevents"
)

var _ runevents.FeedbackImporter = (*RunStore)(nil)

// ImportFeedback stores f with its own id and times unless its user has
// feedback on the run and message id already: one insert that does
// nothing on either unique key, then, when it did nothing, a look-up of
// the user's feedback in the same transaction.
func (s *RunStore) ImportFeedback(ctx context.Context, f runevents.Feedback) (runevents.Feedback, bool, error) {
	if err := checkDBOpen(s.db); err != nil {
		return runevents.Feedback{}, false, err
	}
	f, err := runevents.PrepareImportFeedback(f, time.Now())
	if err != nil {
		return runevents.Feedback{}, false, err
	}
	var created, found bool
	err = s.db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		created, found = false, false
		res, err := tx.ExecContext(ctx, `INSERT INTO feedback (id, thread_id, run_id, user_id, message_id, rating, comment, tags, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			f.ID, f.ThreadID, f.RunID, f.UserID, f.MessageID, string(f.Rating), f.Comment, runevents.EncodeTags(f.Tags), micros(f.CreatedAt), micros(f.UpdatedAt))
		if err != nil {
			return sqlError("sqlite: import feedback", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			created = err == nil
			return err
		}
		var id string
		err = tx.QueryRowContext(ctx, `SELECT id FROM feedback WHERE thread_id = ? AND run_id = ? AND user_id = ? AND message_id = ?`,
			f.ThreadID, f.RunID, f.UserID, f.MessageID).Scan(&id)
		switch {
		case errors.Is(err, sql.ErrNoRows): // the id is another feedback's
			return nil
		case err != nil:
			return sqlError("sqlite: import feedback", err)
		}
		found = true
		return nil
	})
	switch {
	case err != nil:
		return runevents.Feedback{}, false, err
	case created:
		return f, true, nil
	case !found:
		return runevents.Feedback{}, false, runevents.FeedbackIDConflict(f.ID)
	}
	list, err := s.ListRunFeedback(ctx, f.ThreadID, f.RunID, runevents.AnyOwner)
	if err != nil {
		return runevents.Feedback{}, false, err
	}
	existing, err := runevents.ImportedFeedback(list, f)
	return existing, false, err
}
