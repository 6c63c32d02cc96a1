package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/threadsvc"
)

// threadRunView is a run row as the API shows it: its fields and the
// token usage totals flat, as the original run rows have them.
type threadRunView struct {
	ThreadID      string              `json:"thread_id"`
	RunID         string              `json:"run_id"`
	UserID        *string             `json:"user_id"`
	Status        runevents.RunStatus `json:"status"`
	OperationKind string              `json:"operation_kind"`
	ModelName     *string             `json:"model_name"`
	Metadata      json.RawMessage     `json:"metadata"`
	CreatedAt     string              `json:"created_at"`
	UpdatedAt     string              `json:"updated_at"`
	runevents.Usage
}

func newThreadRunView(r runevents.ThreadRun) threadRunView {
	v := threadRunView{
		ThreadID: r.ThreadID, RunID: r.RunID, Status: r.Status, OperationKind: r.OperationKind, Metadata: r.Metadata,
		CreatedAt: r.CreatedAt.Format(runevents.CreatedAtLayout), UpdatedAt: r.UpdatedAt.Format(runevents.CreatedAtLayout),
		Usage: r.Usage,
	}
	if r.OwnerID != "" {
		v.UserID = &r.OwnerID
	}
	if r.ModelName != "" {
		v.ModelName = &r.ModelName
	}
	if len(v.Metadata) == 0 {
		v.Metadata = json.RawMessage(`{}`)
	}
	if v.ByModel == nil {
		v.ByModel = map[string]runevents.ModelUsage{}
	}
	return v
}

// putThreadRun is PUT /api/threads/{thread_id}/runs/{run_id}: create the
// run row or replace its mutable fields (status, model, metadata, usage,
// updated_at); created_at and the owner stay from the first write. The
// body has status (required), created_at, updated_at, model_name,
// operation_kind (default "run"), metadata (an object; its
// regenerate_from_run_id and replay_kind, when present, are strings), and
// the usage totals: total_input_tokens, total_output_tokens,
// total_tokens, llm_call_count, lead_agent_tokens, subagent_tokens,
// middleware_tokens and token_usage_by_model {model: {input_tokens,
// output_tokens, total_tokens}}, all >= 0.
func (s *Server) putThreadRun(w http.ResponseWriter, r *http.Request) error {
	threadID, runID, err := threadAndRun(r)
	if err != nil {
		return err
	}
	raw, err := readJSONBody(r)
	if err != nil {
		return err
	}
	p := threadsvc.RunParams{ThreadID: threadID, RunID: runID, User: userOf(r)}
	if err := decodeStrict(raw, &p); err != nil {
		return bodyProblem("", err)
	}
	stored, err := s.threads.PutRun(r.Context(), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newThreadRunView(stored))
	return nil
}

// getThreadRun is GET /api/threads/{thread_id}/runs/{run_id}.
func (s *Server) getThreadRun(w http.ResponseWriter, r *http.Request) error {
	threadID, runID, err := threadAndRun(r)
	if err != nil {
		return err
	}
	run, err := s.threads.GetRun(r.Context(), userOf(r), threadID, runID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newThreadRunView(run))
	return nil
}

// listThreadRuns is GET /api/threads/{thread_id}/runs: the caller's runs
// of the thread, oldest first, as a bare array.
func (s *Server) listThreadRuns(w http.ResponseWriter, r *http.Request) error {
	threadID, err := pathID(r, "thread_id")
	if err != nil {
		return err
	}
	rows, err := s.threads.ListRuns(r.Context(), userOf(r), threadID)
	if err != nil {
		return err
	}
	views := make([]threadRunView, len(rows))
	for i, run := range rows {
		views[i] = newThreadRunView(run)
	}
	writeJSON(w, http.StatusOK, views)
	return nil
}

// feedbackRecordView is a feedback as PUT answers it and GET
// /api/runs/{run_id}/feedback lists it: DeerFlow's FeedbackResponse
// members plus updated_at. message_id is always null: runstream's
// feedback rates a whole run.
type feedbackRecordView struct {
	threadsvc.FeedbackView
	ThreadID  string  `json:"thread_id"`
	RunID     string  `json:"run_id"`
	UserID    string  `json:"user_id"`
	MessageID *string `json:"message_id"`
	CreatedAt string  `json:"created_at"`
	UpdatedAt string  `json:"updated_at"`
}

func newFeedbackRecordView(f runevents.Feedback) feedbackRecordView {
	return feedbackRecordView{
		FeedbackView: *threadsvc.NewFeedbackView(f), ThreadID: f.ThreadID, RunID: f.RunID, UserID: f.UserID,
		CreatedAt: f.CreatedAt.Format(runevents.CreatedAtLayout), UpdatedAt: f.UpdatedAt.Format(runevents.CreatedAtLayout),
	}
}

// putThreadRunFeedback is PUT
// /api/threads/{thread_id}/runs/{run_id}/feedback {rating, comment?}: the
// caller's feedback on one of their runs, created or replaced (its id is
// kept) → {feedback_id, rating, comment, thread_id, run_id, user_id,
// message_id, created_at, updated_at}. rating is +1 or -1 (feedbackRating).
func (s *Server) putThreadRunFeedback(w http.ResponseWriter, r *http.Request) error {
	threadID, runID, err := threadAndRun(r)
	if err != nil {
		return err
	}
	raw, err := readJSONBody(r)
	if err != nil {
		return err
	}
	var body struct {
		Rating  json.RawMessage `json:"rating"`
		Comment *string         `json:"comment"`
	}
	if err := decodeStrict(raw, &body); err != nil {
		return bodyProblem("", err)
	}
	rating, err := feedbackRating(body.Rating)
	if err != nil {
		return err
	}
	f := runevents.Feedback{ThreadID: threadID, RunID: runID, UserID: userOf(r), Rating: rating}
	if body.Comment != nil {
		f.Comment = *body.Comment
	}
	f, err = s.threads.PutFeedback(r.Context(), f)
	if err != nil {
		// Feedback.Prepare's verdict names the member at fault.
		e := runstream.AsError(err)
		if field, ok := e.Details["field"].(string); ok {
			return bodyProblem("/"+field, errors.New(e.Message))
		}
		return err
	}
	writeJSON(w, http.StatusOK, newFeedbackRecordView(f))
	return nil
}

// feedbackRating checks a rating as DeerFlow does: the number +1 or -1
// (stored as 1 or -1); another number is INVALID_ARGUMENT (400, "rating
// must be +1 or -1"), a string VALIDATION_FAILED at /rating (its
// pydantic int refuses "up"). A missing rating, null, an array or an
// object is left to Feedback.Prepare, which refuses it at /rating.
func feedbackRating(raw json.RawMessage) (json.RawMessage, error) {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return raw, nil
	}
	switch v := v.(type) {
	case float64:
		switch v {
		case 1:
			return json.RawMessage(`1`), nil
		case -1:
			return json.RawMessage(`-1`), nil
		}
		return nil, runstream.Errorf(runstream.CodeInvalidArgument, "rating must be +1 or -1").WithDetail("field", "rating")
	case string:
		return nil, threadsvc.Problem("/rating", "wrong type: want the number +1 or -1")
	}
	return raw, nil
}

// deleteThreadRunFeedback is DELETE
// /api/threads/{thread_id}/runs/{run_id}/feedback: the caller's feedback
// on one of their runs is deleted → {"success": true}, as DeerFlow's
// un-rate; NOT_FOUND when the caller has no such run or no feedback on it.
func (s *Server) deleteThreadRunFeedback(w http.ResponseWriter, r *http.Request) error {
	threadID, runID, err := threadAndRun(r)
	if err != nil {
		return err
	}
	if err := s.threads.DeleteFeedback(r.Context(), userOf(r), threadID, runID); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]bool{"success": true})
	return nil
}

// listRunFeedback is GET /api/runs/{run_id}/feedback: the caller's
// feedback on the run as an array (empty or one item); NOT_FOUND when the
// caller has no such run.
func (s *Server) listRunFeedback(w http.ResponseWriter, r *http.Request) error {
	runID, err := pathID(r, "run_id")
	if err != nil {
		return err
	}
	f, ok, err := s.threads.RunFeedback(r.Context(), userOf(r), runID)
	if err != nil {
		return err
	}
	out := []feedbackRecordView{}
	if ok {
		out = append(out, newFeedbackRecordView(f))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getThreadTokenUsage is GET /api/threads/{thread_id}/token-usage
// (?include_active=false): threadsvc.Service.TokenUsage.
func (s *Server) getThreadTokenUsage(w http.ResponseWriter, r *http.Request) error {
	threadID, err := pathID(r, "thread_id")
	if err != nil {
		return err
	}
	includeActive, err := queryBool(r.URL.Query(), "include_active", false)
	if err != nil {
		return err
	}
	usage, err := s.threads.TokenUsage(r.Context(), userOf(r), threadID, includeActive)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, usage)
	return nil
}
