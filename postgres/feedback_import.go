package postgres

import (
	"context"
	"time"

	"github.com/runstream/runstream/runevents"
)

var _ runevents.FeedbackImporter = (*RunStore)(nil)

// ImportFeedback stores f with its own id and times unless its user has
// feedback on the run and message id already: one insert that does
// nothing on either unique key, then, when it did nothing, a look-up of
// the user's feedback.
func (s *RunStore) ImportFeedback(ctx context.Context, f runevents.Feedback) (runevents.Feedback, bool, error) {
	f, err := runevents.PrepareImportFeedback(f, time.Now())
	if err != nil {
		return runevents.Feedback{}, false, err
	}
	if err := checkText("feedback user", f.UserID); err != nil {
		return runevents.Feedback{}, false, err
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO feedback (id, thread_id, run_id, user_id, message_id, rating, comment, tags, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING`,
		f.ID, f.ThreadID, f.RunID, f.UserID, f.MessageID, string(f.Rating), f.Comment, runevents.EncodeTags(f.Tags), f.CreatedAt, f.UpdatedAt)
	if err != nil {
		return runevents.Feedback{}, false, dbError(err, "import feedback")
	}
	if tag.RowsAffected() == 1 {
		return f, true, nil
	}
	list, err := s.ListRunFeedback(ctx, f.ThreadID, f.RunID, runevents.AnyOwner)
	if err != nil {
		return runevents.Feedback{}, false, err
	}
	found, err := runevents.ImportedFeedback(list, f)
	return found, false, err
}
