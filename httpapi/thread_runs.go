package httpapi

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
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

// putThreadRunBody is the body of PUT /api/threads/{thread_id}/runs/{run_id}.
type putThreadRunBody struct {
	Status        runevents.RunStatus `json:"status"`
	CreatedAt     *string             `json:"created_at"`
	UpdatedAt     *string             `json:"updated_at"`
	ModelName     *string             `json:"model_name"`
	OperationKind *string             `json:"operation_kind"`
	Metadata      json.RawMessage     `json:"metadata"`
	runevents.Usage
}

// maxOperationKind bounds operation_kind and model_name.
const maxOperationKind = 128

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
	runs, err := s.threadRuns()
	if err != nil {
		return err
	}
	threadID, runID, err := threadAndRun(r)
	if err != nil {
		return err
	}
	raw, err := readJSONBody(r)
	if err != nil {
		return err
	}
	var body putThreadRunBody
	if err := decodeStrict(raw, &body); err != nil {
		return bodyProblem("", err)
	}
	run, err := body.toRun(threadID, runID, userOf(r))
	if err != nil {
		return err
	}
	if err := s.requireWritableThread(r, threadID); err != nil {
		return err
	}
	stored, err := runs.PutRun(r.Context(), run)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newThreadRunView(stored))
	return nil
}

func (b putThreadRunBody) toRun(threadID, runID, user string) (runevents.ThreadRun, error) {
	run := runevents.ThreadRun{ThreadID: threadID, RunID: runID, OwnerID: user, Status: b.Status, OperationKind: "run", Usage: b.Usage}
	if !b.Status.Valid() {
		return run, bodyProblem("/status", errors.New("required: one of pending, running, success, error, interrupted, timeout"))
	}
	if b.OperationKind != nil {
		if !validLabel(*b.OperationKind) {
			return run, bodyProblem("/operation_kind", errors.New("must have 1 to 128 characters without control characters"))
		}
		run.OperationKind = *b.OperationKind
	}
	if b.ModelName != nil && *b.ModelName != "" {
		if !validLabel(*b.ModelName) {
			return run, bodyProblem("/model_name", errors.New("must have at most 128 characters without control characters"))
		}
		run.ModelName = *b.ModelName
	}
	for _, ts := range []struct {
		path  string
		value *string
		into  *time.Time
	}{{"/created_at", b.CreatedAt, &run.CreatedAt}, {"/updated_at", b.UpdatedAt, &run.UpdatedAt}} {
		if ts.value == nil {
			continue
		}
		t, err := parseTimestamp(ts.path, *ts.value)
		if err != nil {
			return run, err
		}
		*ts.into = t
	}
	if len(b.Metadata) > 0 && string(b.Metadata) != "null" {
		var meta map[string]json.RawMessage
		if json.Unmarshal(b.Metadata, &meta) != nil {
			return run, bodyProblem("/metadata", errors.New("must be an object"))
		}
		for _, key := range []string{"regenerate_from_run_id", "replay_kind"} {
			var str string
			if v, ok := meta[key]; ok && string(v) != "null" && json.Unmarshal(v, &str) != nil {
				return run, bodyProblem("/metadata/"+key, errors.New("must be a string"))
			}
		}
		run.Metadata = b.Metadata
	}
	u := b.Usage
	for name, n := range map[string]int64{
		"total_input_tokens": u.TotalInputTokens, "total_output_tokens": u.TotalOutputTokens, "total_tokens": u.TotalTokens,
		"llm_call_count": u.LLMCallCount, "lead_agent_tokens": u.LeadAgentTokens, "subagent_tokens": u.SubagentTokens,
		"middleware_tokens": u.MiddlewareTokens,
	} {
		if n < 0 {
			return run, bodyProblem("/"+name, errors.New("must not be negative"))
		}
	}
	for model, mu := range u.ByModel {
		if model == "" || mu.InputTokens < 0 || mu.OutputTokens < 0 || mu.TotalTokens < 0 {
			return run, bodyProblem("/token_usage_by_model", errors.New("model names must not be empty and counts not negative"))
		}
	}
	return run, nil
}

func validLabel(s string) bool {
	return s != "" && utf8.RuneCountInString(s) <= maxOperationKind && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// getThreadRun is GET /api/threads/{thread_id}/runs/{run_id}.
func (s *Server) getThreadRun(w http.ResponseWriter, r *http.Request) error {
	runs, err := s.threadRuns()
	if err != nil {
		return err
	}
	threadID, runID, err := threadAndRun(r)
	if err != nil {
		return err
	}
	run, err := runs.GetRun(r.Context(), threadID, runID, ownerOf(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newThreadRunView(run))
	return nil
}

// listThreadRuns is GET /api/threads/{thread_id}/runs: the caller's runs
// of the thread, oldest first, as a bare array.
func (s *Server) listThreadRuns(w http.ResponseWriter, r *http.Request) error {
	runs, err := s.threadRuns()
	if err != nil {
		return err
	}
	threadID, err := pathID(r, "thread_id")
	if err != nil {
		return err
	}
	if err := s.requireThread(r, threadID); err != nil {
		return err
	}
	rows, err := runs.ListRuns(r.Context(), threadID, ownerOf(r))
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

// feedbackView is the feedback a message row carries: {feedback_id,
// rating, comment}; comment is null when empty.
type feedbackView struct {
	ID      string          `json:"feedback_id"`
	Rating  json.RawMessage `json:"rating"`
	Comment *string         `json:"comment"`
}

func newFeedbackView(f runevents.Feedback) *feedbackView {
	v := &feedbackView{ID: f.ID, Rating: f.Rating}
	if f.Comment != "" {
		v.Comment = &f.Comment
	}
	return v
}

// feedbackRecordView is a feedback as GET /api/runs/{run_id}/feedback
// lists it.
type feedbackRecordView struct {
	feedbackView
	ThreadID  string `json:"thread_id"`
	RunID     string `json:"run_id"`
	UserID    string `json:"user_id"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
}

// putThreadRunFeedback is PUT
// /api/threads/{thread_id}/runs/{run_id}/feedback {rating, comment?}: the
// caller's feedback on one of their runs, created or replaced (its id is
// kept) → {feedback_id, rating, comment}. rating is a number or a string.
func (s *Server) putThreadRunFeedback(w http.ResponseWriter, r *http.Request) error {
	runs, err := s.threadRuns()
	if err != nil {
		return err
	}
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
	comment := ""
	if body.Comment != nil {
		comment = *body.Comment
	}
	f := runevents.Feedback{ThreadID: threadID, RunID: runID, UserID: userOf(r), Rating: body.Rating, Comment: comment}
	// The stores' own check, answered as a problem of the body's member.
	if _, err := f.Prepare(); err != nil {
		e := runstream.AsError(err)
		if field, ok := e.Details["field"].(string); ok {
			return bodyProblem("/"+field, errors.New(e.Message))
		}
		return err
	}
	if _, err := runs.GetRun(r.Context(), threadID, runID, ownerOf(r)); err != nil {
		return err
	}
	f, err = runs.PutFeedback(r.Context(), f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newFeedbackView(f))
	return nil
}

// listRunFeedback is GET /api/runs/{run_id}/feedback: the caller's
// feedback on the run as an array (empty or one item); NOT_FOUND when the
// caller has no such run.
func (s *Server) listRunFeedback(w http.ResponseWriter, r *http.Request) error {
	runs, err := s.threadRuns()
	if err != nil {
		return err
	}
	runID, err := pathID(r, "run_id")
	if err != nil {
		return err
	}
	run, err := runs.FindRun(r.Context(), runID, ownerOf(r))
	if err != nil {
		return err
	}
	byRun, err := runs.ListFeedback(r.Context(), run.ThreadID, []string{runID}, ownerOf(r))
	if err != nil {
		return err
	}
	out := []feedbackRecordView{}
	if f, ok := byRun[runID]; ok {
		out = append(out, feedbackRecordView{
			feedbackView: *newFeedbackView(f), ThreadID: f.ThreadID, RunID: f.RunID, UserID: f.UserID,
			CreatedAt: f.CreatedAt.Format(runevents.CreatedAtLayout), UpdatedAt: f.UpdatedAt.Format(runevents.CreatedAtLayout),
		})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// tokenUsage is the answer of GET /api/threads/{thread_id}/token-usage.
type tokenUsage struct {
	ThreadID          string                    `json:"thread_id"`
	TotalTokens       int64                     `json:"total_tokens"`
	TotalInputTokens  int64                     `json:"total_input_tokens"`
	TotalOutputTokens int64                     `json:"total_output_tokens"`
	TotalRuns         int                       `json:"total_runs"`
	ByModel           map[string]*modelTokenSum `json:"by_model"`
	ByCaller          map[string]int64          `json:"by_caller"`
	ContextUsage      *struct{}                 `json:"context_usage"`
}

type modelTokenSum struct {
	Tokens int64 `json:"tokens"`
	Runs   int   `json:"runs"`
}

// getThreadTokenUsage is GET /api/threads/{thread_id}/token-usage
// (?include_active=false): token usage summed from the caller's run rows,
// never from events, over runs with operation_kind "run" and status
// success or error (and running with include_active). by_model adds each
// model of a run's token_usage_by_model, or, when the run has none, its
// model_name (else "unknown") with the run's total. context_usage is
// always null: runstream keeps no checkpoints to count a context from.
func (s *Server) getThreadTokenUsage(w http.ResponseWriter, r *http.Request) error {
	runs, err := s.threadRuns()
	if err != nil {
		return err
	}
	threadID, err := pathID(r, "thread_id")
	if err != nil {
		return err
	}
	includeActive, err := queryBool(r.URL.Query(), "include_active", false)
	if err != nil {
		return err
	}
	if err := s.requireThread(r, threadID); err != nil {
		return err
	}
	rows, err := runs.ListRuns(r.Context(), threadID, ownerOf(r))
	if err != nil {
		return err
	}
	out := tokenUsage{ThreadID: threadID, ByModel: map[string]*modelTokenSum{},
		ByCaller: map[string]int64{"lead_agent": 0, "subagent": 0, "middleware": 0}}
	add := func(model string, tokens int64) {
		sum := out.ByModel[model]
		if sum == nil {
			sum = &modelTokenSum{}
			out.ByModel[model] = sum
		}
		sum.Tokens = addTokens(sum.Tokens, tokens)
		sum.Runs++
	}
	for _, run := range rows {
		counted := run.Status == runevents.RunSuccess || run.Status == runevents.RunError || (includeActive && run.Status == runevents.RunRunning)
		if run.OperationKind != "run" || !counted {
			continue
		}
		u := run.Usage
		out.TotalRuns++
		out.TotalTokens = addTokens(out.TotalTokens, u.TotalTokens)
		out.TotalInputTokens = addTokens(out.TotalInputTokens, u.TotalInputTokens)
		out.TotalOutputTokens = addTokens(out.TotalOutputTokens, u.TotalOutputTokens)
		out.ByCaller["lead_agent"] = addTokens(out.ByCaller["lead_agent"], u.LeadAgentTokens)
		out.ByCaller["subagent"] = addTokens(out.ByCaller["subagent"], u.SubagentTokens)
		out.ByCaller["middleware"] = addTokens(out.ByCaller["middleware"], u.MiddlewareTokens)
		if len(u.ByModel) > 0 {
			for model, mu := range u.ByModel {
				add(model, mu.TotalTokens)
			}
			continue
		}
		model := run.ModelName
		if model == "" {
			model = "unknown"
		}
		add(model, u.TotalTokens)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// addTokens adds two token counts (each >= 0), saturating at the largest
// int64 rather than wrapping to a negative total.
func addTokens(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
