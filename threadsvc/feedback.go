package threadsvc

import (
	"context"
	"fmt"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// Feedback rates the runs of a thread. Every call acts for a user who
// must own the run: another user's run answers NOT_FOUND exactly like a
// missing one. What is stored is redacted first.

// PutFeedback stores the user's feedback (f.UserID) on one of their runs,
// and message (f.MessageID, "" for the run), created or replaced (its id
// is kept). f is checked first (Feedback.Prepare, whose error names the
// member at fault), then the run; the secrets of its comment and rating
// are redacted before it is stored. PUT (the run's rating) and POST (a
// rating of the run or of one message) both store through it.
func (s *Service) PutFeedback(ctx context.Context, f runevents.Feedback) (runevents.Feedback, error) {
	if _, err := f.Prepare(); err != nil {
		return runevents.Feedback{}, err
	}
	f, err := RedactFeedback(f)
	if err != nil {
		return runevents.Feedback{}, err
	}
	if _, err := s.userRun(ctx, f.UserID, f.ThreadID, f.RunID); err != nil {
		return runevents.Feedback{}, err
	}
	return s.runs.PutFeedback(ctx, f)
}

// DeleteFeedback deletes the user's feedback on one of their runs of the
// thread (of every message id). NOT_FOUND when the user has no such run,
// or no feedback on it (DeerFlow's "No feedback found for this run").
func (s *Service) DeleteFeedback(ctx context.Context, user, threadID, runID string) error {
	owner := runevents.OwnedBy(user)
	if _, err := s.userRun(ctx, user, threadID, runID); err != nil {
		return err
	}
	n, err := s.runs.DeleteFeedback(ctx, threadID, runID, owner)
	if err != nil {
		return err
	}
	if n == 0 {
		return runstream.Errorf(runstream.CodeNotFound, "No feedback found for this run")
	}
	return nil
}

// DeleteFeedbackByID deletes the user's feedback id on one of their runs
// of the thread. NOT_FOUND: "Run <id> not found" when the user has no such
// run, "Feedback <id> not found" when they have no feedback of that id on
// it (another user's feedback is not theirs to delete).
func (s *Service) DeleteFeedbackByID(ctx context.Context, user, threadID, runID, id string) error {
	owner := runevents.OwnedBy(user)
	if _, err := s.userRun(ctx, user, threadID, runID); err != nil {
		return err
	}
	n, err := s.runs.DeleteFeedbackByID(ctx, threadID, runID, id, owner)
	if err != nil {
		return err
	}
	if n == 0 {
		return runstream.Errorf(runstream.CodeNotFound, "Feedback %s not found", id)
	}
	return nil
}

// ThreadRunFeedback returns every feedback on one of the user's runs of
// the thread, every user's, oldest first; none when the user has no such
// run (unknown, or another user's), as the original lists a run it has
// no row of.
func (s *Service) ThreadRunFeedback(ctx context.Context, user, threadID, runID string) ([]runevents.Feedback, error) {
	_, err := s.userRun(ctx, user, threadID, runID)
	switch {
	case err == nil:
	case runstream.AsError(err).Code == runstream.CodeNotFound:
		return nil, nil
	default:
		return nil, err
	}
	return s.runs.ListRunFeedback(ctx, threadID, runID, runevents.AnyOwner)
}

// RunFeedback is ThreadRunFeedback of the run id in whatever thread holds
// the user's run (GET /api/runs/{run_id}/feedback).
func (s *Service) RunFeedback(ctx context.Context, user, runID string) ([]runevents.Feedback, error) {
	run, err := s.findUserRun(ctx, user, runID)
	if err != nil {
		return nil, err
	}
	return s.runs.ListRunFeedback(ctx, run.ThreadID, runID, runevents.AnyOwner)
}

// FeedbackStats counts the feedback on a run: total, and the ratings +1
// (positive) and -1 (negative).
type FeedbackStats struct {
	RunID    string `json:"run_id"`
	Total    int    `json:"total"`
	Positive int    `json:"positive"`
	Negative int    `json:"negative"`
}

// RunFeedbackStats counts every feedback on one of the user's runs of the
// thread; zeros when the user has no such run.
func (s *Service) RunFeedbackStats(ctx context.Context, user, threadID, runID string) (FeedbackStats, error) {
	list, err := s.ThreadRunFeedback(ctx, user, threadID, runID)
	if err != nil {
		return FeedbackStats{}, err
	}
	stats := FeedbackStats{RunID: runID, Total: len(list)}
	for _, f := range list {
		switch string(f.Rating) {
		case "1":
			stats.Positive++
		case "-1":
			stats.Negative++
		}
	}
	return stats, nil
}

// StoreOnlyRun answers the routes that act on an executing run (cancel,
// join, stream) for a run runstream only stores, as the original answers
// a run that is not active on its worker: NOT_FOUND ("Run <id> not
// found") when the user has no such run, else CONFLICT. action is
// "cancel" or "stream"; status says why a cancel is refused.
func (s *Service) StoreOnlyRun(ctx context.Context, user, threadID, runID, action string) error {
	run, err := s.userRun(ctx, user, threadID, runID)
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("Run %s is not active on this worker and cannot be streamed", runID)
	if action == "cancel" {
		msg = fmt.Sprintf("Run %s is not cancellable (status: %s)", runID, run.Status)
		if run.Status == runevents.RunPending || run.Status == runevents.RunRunning {
			msg = fmt.Sprintf("Run %s is not active on this worker and cannot be cancelled", runID)
		}
	}
	return runstream.Errorf(runstream.CodeConflict, "%s", msg)
}

// userRun is the user's run row of the thread; NOT_FOUND says it as
// DeerFlow does ("Run <id> not found").
func (s *Service) userRun(ctx context.Context, user, threadID, runID string) (runevents.ThreadRun, error) {
	run, err := s.runs.GetRun(ctx, threadID, runID, runevents.OwnedBy(user))
	return run, deerflowRunNotFound(err, runID)
}

// findUserRun is the user's row of runID, in whatever thread holds it,
// with userRun's NOT_FOUND.
func (s *Service) findUserRun(ctx context.Context, user, runID string) (runevents.ThreadRun, error) {
	run, err := s.runs.FindRun(ctx, runID, runevents.OwnedBy(user))
	return run, deerflowRunNotFound(err, runID)
}

func deerflowRunNotFound(err error, runID string) error {
	if runstream.ErrorCodeOf(err) == runstream.CodeNotFound {
		return runstream.Errorf(runstream.CodeNotFound, "Run %s not found", runID)
	}
	return err
}
