package memory

import (
	"context"

	"github.com/runstream/runstream/runevents"
)

var _ runevents.FeedbackImporter = (*RunStore)(nil)

// ImportFeedback stores f with its own id and times unless its user has
// feedback on the run and message id already.
func (s *RunStore) ImportFeedback(_ context.Context, f runevents.Feedback) (runevents.Feedback, bool, error) {
	f, err := runevents.PrepareImportFeedback(f, s.cfg.now())
	if err != nil {
		return runevents.Feedback{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := feedbackKey{f.ThreadID, f.RunID, f.UserID, f.MessageID}
	if old, ok := s.feedback[key]; ok {
		return cloneFeedback(old), false, nil
	}
	for _, other := range s.feedback {
		if other.ID == f.ID {
			return runevents.Feedback{}, false, runevents.FeedbackIDConflict(f.ID)
		}
	}
	s.feedback[key] = cloneFeedback(f)
	return f, true, nil
}
