package threadruns

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/redact"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/threadsvc"
)

// feedbackView is a feedback as the API answers it: DeerFlow's
// FeedbackResponse members (message_id null for a feedback on the whole
// run), plus tags and updated_at.
type feedbackView struct {
	ID        string          `json:"feedback_id"`
	ThreadID  string          `json:"thread_id"`
	RunID     string          `json:"run_id"`
	UserID    string          `json:"user_id"`
	MessageID *string         `json:"message_id"`
	Rating    json.RawMessage `json:"rating"`
	Comment   *string         `json:"comment"`
	Tags      []string        `json:"tags"`
	CreatedAt string          `json:"created_at"`
	UpdatedAt string          `json:"updated_at"`
}

func newFeedbackView(f runevents.Feedback) feedbackView {
	v := feedbackView{
		ID: f.ID, ThreadID: f.ThreadID, RunID: f.RunID, UserID: f.UserID, MessageID: nullable(f.MessageID),
		Rating: f.Rating, Comment: nullable(f.Comment), Tags: f.Tags,
		CreatedAt: f.CreatedAt.Format(runevents.CreatedAtLayout), UpdatedAt: f.UpdatedAt.Format(runevents.CreatedAtLayout),
	}
	if v.Tags == nil {
		v.Tags = []string{}
	}
	return v
}

func feedbackViews(list []runevents.Feedback) []feedbackView {
	out := make([]feedbackView, len(list))
	for i, f := range list {
		out[i] = newFeedbackView(f)
	}
	return out
}

// feedbackBody is the body of PUT (without message_id) and POST
// .../feedback: rating (+1 or -1), comment, tags (reason slugs) and, for
// POST, message_id; every member but rating may be null.
type feedbackBody struct {
	Rating    json.RawMessage `json:"rating"`
	Comment   *string         `json:"comment"`
	Tags      []string        `json:"tags"`
	MessageID *string         `json:"message_id"`
}

// storeFeedback decodes a feedback body and stores it for the caller on
// the run (threadsvc.Service.PutFeedback); withMessage allows message_id.
func (h handlers) storeFeedback(w http.ResponseWriter, r *http.Request, withMessage bool) error {
	threadID, runID, err := ThreadAndRun(r)
	if err != nil {
		return err
	}
	raw, err := h.ReadJSON(r)
	if err != nil {
		return err
	}
	var body feedbackBody
	if err := h.Decode(raw, &body); err != nil {
		return err
	}
	if body.MessageID != nil && !withMessage {
		return threadsvc.Problem("/message_id", "PUT rates the whole run: POST rates a message")
	}
	rating, err := feedbackRating(body.Rating)
	if err != nil {
		return err
	}
	f := runevents.Feedback{ThreadID: threadID, RunID: runID, UserID: h.User(r), Rating: rating, Tags: body.Tags}
	if body.Comment != nil {
		f.Comment = *body.Comment
	}
	if body.MessageID != nil {
		f.MessageID = *body.MessageID
	}
	f, err = h.threads.PutFeedback(r.Context(), f)
	if err != nil {
		// Feedback.Prepare's verdict names the member at fault.
		e := runstream.AsError(err)
		if field, ok := e.Details["field"].(string); ok {
			return threadsvc.Problem("/"+field, e.Message)
		}
		return err
	}
	h.WriteJSON(w, http.StatusOK, newFeedbackView(f))
	return nil
}

// putFeedback is PUT /api/threads/{thread_id}/runs/{run_id}/feedback
// {rating, comment?, tags?}: the caller's feedback on one of their runs,
// created or replaced (its id is kept) → the feedback (feedbackView).
func (h handlers) putFeedback(w http.ResponseWriter, r *http.Request) error {
	return h.storeFeedback(w, r, false)
}

// createFeedback is POST /api/threads/{thread_id}/runs/{run_id}/feedback
// {rating, comment?, tags?, message_id?}: the caller's feedback on one of
// their runs, or on one message of it. A user has one feedback per run
// and message id: posting again replaces it (DeerFlow adds a row, after
// which its own PUT and DELETE of the run's feedback fail).
func (h handlers) createFeedback(w http.ResponseWriter, r *http.Request) error {
	return h.storeFeedback(w, r, true)
}

// feedbackRating checks a rating as DeerFlow's pydantic int and handler
// do: a number without a fractional part, an integer's text, or a
// boolean (true is 1) is an integer, which must be +1 or -1 (stored as 1
// or -1; another is INVALID_ARGUMENT, 400, "rating must be +1 or -1");
// another number or string is VALIDATION_FAILED at /rating. A missing
// rating, null, an array or an object is left to Feedback.Prepare, which
// refuses it at /rating.
func feedbackRating(raw json.RawMessage) (json.RawMessage, error) {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return raw, nil
	}
	var n float64
	switch v := v.(type) {
	case float64:
		if v != math.Trunc(v) {
			return nil, threadsvc.Problem("/rating", "wrong type: want an integer, not a number with a fractional part")
		}
		n = v
	case string:
		i, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return nil, threadsvc.Problem("/rating", "wrong type: want the number +1 or -1")
		}
		n = float64(i)
	case bool:
		if v {
			n = 1
		}
	default:
		return raw, nil
	}
	switch n {
	case 1:
		return json.RawMessage(`1`), nil
	case -1:
		return json.RawMessage(`-1`), nil
	}
	return nil, runstream.Errorf(runstream.CodeInvalidArgument, "rating must be +1 or -1").WithDetail("field", "rating")
}

// listFeedback is GET /api/threads/{thread_id}/runs/{run_id}/feedback:
// every feedback on one of the caller's runs, oldest first.
func (h handlers) listFeedback(w http.ResponseWriter, r *http.Request) error {
	return answerRun(h, w, r, h.threads.ThreadRunFeedback, feedbackViews)
}

// runFeedback is GET /api/runs/{run_id}/feedback: every feedback on the
// caller's run, in whatever thread holds it, oldest first.
func (h handlers) runFeedback(w http.ResponseWriter, r *http.Request) error {
	runID, err := PathID(r, "run_id")
	if err != nil {
		return err
	}
	list, err := h.threads.RunFeedback(r.Context(), h.User(r), runID)
	if err != nil {
		return err
	}
	h.WriteJSON(w, http.StatusOK, feedbackViews(list))
	return nil
}

// feedbackStats is GET
// /api/threads/{thread_id}/runs/{run_id}/feedback/stats → {run_id, total,
// positive, negative} over every feedback on one of the caller's runs.
func (h handlers) feedbackStats(w http.ResponseWriter, r *http.Request) error {
	return answerRun(h, w, r, h.threads.RunFeedbackStats, asIs)
}

// deleteRunFeedback is DELETE
// /api/threads/{thread_id}/runs/{run_id}/feedback: the caller's feedback
// on one of their runs is deleted → {"success": true}, as DeerFlow's
// un-rate; NOT_FOUND when the caller has no such run or no feedback on it.
func (h handlers) deleteRunFeedback(w http.ResponseWriter, r *http.Request) error {
	threadID, runID, err := ThreadAndRun(r)
	if err != nil {
		return err
	}
	if err := h.threads.DeleteFeedback(r.Context(), h.User(r), threadID, runID); err != nil {
		return err
	}
	h.WriteJSON(w, http.StatusOK, map[string]bool{"success": true})
	return nil
}

// deleteFeedback is DELETE
// /api/threads/{thread_id}/runs/{run_id}/feedback/{feedback_id}: the
// caller's feedback of that id is deleted → {"success": true}; NOT_FOUND
// when it is not the caller's, on that run, or does not exist.
func (h handlers) deleteFeedback(w http.ResponseWriter, r *http.Request) error {
	threadID, runID, err := ThreadAndRun(r)
	if err != nil {
		return err
	}
	id := r.PathValue("feedback_id")
	if runevents.ValidateID("feedback_id", id) != nil { // no feedback has such an id
		return runstream.Errorf(runstream.CodeNotFound, "Feedback %s not found", redact.Quote(id))
	}
	if err := h.threads.DeleteFeedbackByID(r.Context(), h.User(r), threadID, runID, id); err != nil {
		return err
	}
	h.WriteJSON(w, http.StatusOK, map[string]bool{"success": true})
	return nil
}
