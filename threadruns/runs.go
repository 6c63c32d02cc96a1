package threadruns

import (
	"cmp"
	"context"
	"encoding/json"
	"math"
	"net/http"

	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/threadsvc"
)

// runView is a run row as the API shows it: DeerFlow's RunResponse
// members, its token usage totals flat, plus user_id, operation_kind,
// model_name and token_usage_by_model.
type runView struct {
	ThreadID          string              `json:"thread_id"`
	RunID             string              `json:"run_id"`
	AssistantID       *string             `json:"assistant_id"`
	UserID            *string             `json:"user_id"`
	Status            runevents.RunStatus `json:"status"`
	OperationKind     string              `json:"operation_kind"`
	ModelName         *string             `json:"model_name"`
	Metadata          json.RawMessage     `json:"metadata"`
	Kwargs            json.RawMessage     `json:"kwargs"`
	MultitaskStrategy string              `json:"multitask_strategy"`
	MessageCount      int64               `json:"message_count"`
	StopReason        *string             `json:"stop_reason"`
	CreatedAt         string              `json:"created_at"`
	UpdatedAt         string              `json:"updated_at"`
	runevents.Usage
}

// nullable is s, or nil (JSON null) when it is empty.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// orDefault is raw, or def when raw is empty.
func orDefault(raw json.RawMessage, def string) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(def)
	}
	return raw
}

func newRunView(r runevents.ThreadRun) runView {
	v := runView{
		ThreadID: r.ThreadID, RunID: r.RunID, AssistantID: nullable(r.AssistantID), UserID: nullable(r.OwnerID),
		Status: r.Status, OperationKind: r.OperationKind, ModelName: nullable(r.ModelName),
		Metadata: orDefault(r.Metadata, `{}`), Kwargs: orDefault(r.Kwargs, `{}`),
		MultitaskStrategy: r.MultitaskStrategy, MessageCount: r.MessageCount, StopReason: nullable(r.StopReason),
		CreatedAt: r.CreatedAt.Format(runevents.CreatedAtLayout), UpdatedAt: r.UpdatedAt.Format(runevents.CreatedAtLayout),
		Usage: r.Usage,
	}
	if v.MultitaskStrategy == "" {
		v.MultitaskStrategy = runevents.DefaultMultitaskStrategy
	}
	if v.ByModel == nil {
		v.ByModel = map[string]runevents.ModelUsage{}
	}
	return v
}

// putRun is PUT /api/threads/{thread_id}/runs/{run_id}: create the run
// row or replace its mutable fields (every field but created_at and the
// owner, kept from the first write). The body is threadsvc.RunParams:
// status (required), created_at, updated_at, model_name, operation_kind
// (default "run"), metadata (an object), the usage totals (>= 0) and
// token_usage_by_model, assistant_id, kwargs, multitask_strategy,
// message_count and stop_reason.
func (h handlers) putRun(w http.ResponseWriter, r *http.Request) error {
	threadID, runID, err := ThreadAndRun(r)
	if err != nil {
		return err
	}
	raw, err := h.ReadJSON(r)
	if err != nil {
		return err
	}
	p := threadsvc.RunParams{ThreadID: threadID, RunID: runID, User: h.User(r)}
	if err := h.Decode(raw, &p); err != nil {
		return err
	}
	stored, err := h.threads.PutRun(r.Context(), p)
	if err != nil {
		return err
	}
	h.WriteJSON(w, http.StatusOK, newRunView(stored))
	return nil
}

// getRun is GET /api/threads/{thread_id}/runs/{run_id}.
func (h handlers) getRun(w http.ResponseWriter, r *http.Request) error {
	return answerRun(h, w, r, h.threads.GetRun, newRunView)
}

// MaxRunsLimit is the largest limit a run list takes.
const MaxRunsLimit = 1000

// listRuns is GET /api/threads/{thread_id}/runs: the caller's runs of the
// thread, newest first, as a bare array: at most limit (1 to MaxRunsLimit,
// threadsvc.MaxListedRuns when absent, as DeerFlow lists them) after the
// offset newest (0 when absent), the parameters the LangGraph SDK's
// runs.list sends.
func (h handlers) listRuns(w http.ResponseWriter, r *http.Request) error {
	threadID, err := PathID(r, "thread_id")
	if err != nil {
		return err
	}
	q := r.URL.Query()
	limit, err := h.QueryInt(q, "limit", 1, MaxRunsLimit)
	if err != nil {
		return err
	}
	offset, err := h.QueryInt(q, "offset", 0, math.MaxInt32)
	if err != nil {
		return err
	}
	rows, err := h.threads.ListRuns(r.Context(), h.User(r), threadID, int(cmp.Or(limit, threadsvc.MaxListedRuns)), int(offset))
	if err != nil {
		return err
	}
	views := make([]runView, len(rows))
	for i, run := range rows {
		views[i] = newRunView(run)
	}
	h.WriteJSON(w, http.StatusOK, views)
	return nil
}

// answerRun answers a read of one of the caller's runs, named by the
// thread_id and run_id path parameters: what read returns for the caller,
// shown by view, as JSON with status 200; read's error otherwise.
func answerRun[T, V any](h handlers, w http.ResponseWriter, r *http.Request,
	read func(ctx context.Context, user, threadID, runID string) (T, error), view func(T) V) error {
	threadID, runID, err := ThreadAndRun(r)
	if err != nil {
		return err
	}
	v, err := read(r.Context(), h.User(r), threadID, runID)
	if err != nil {
		return err
	}
	h.WriteJSON(w, http.StatusOK, view(v))
	return nil
}

// asIs is the view of a value the API shows as it is.
func asIs[T any](v T) T { return v }
