package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/runstream/runstream/workflow"
)

// runView is the public view of a workflow run. It never contains a resume
// token.
type runView struct {
	RunID      string             `json:"runId"`
	WorkflowID string             `json:"workflowId"`
	VersionID  string             `json:"versionId"`
	Status     workflow.RunStatus `json:"status"`
	Input      json.RawMessage    `json:"input"`
	Output     json.RawMessage    `json:"output"`
	Error      json.RawMessage    `json:"error"`
	LastSeq    int64              `json:"lastSeq"`
	CreatedAt  time.Time          `json:"createdAt"`
	UpdatedAt  time.Time          `json:"updatedAt"`
	StartedAt  *time.Time         `json:"startedAt"`
	FinishedAt *time.Time         `json:"finishedAt"`
}

func newRunView(r workflow.Run) runView {
	v := runView{
		RunID: r.ID, WorkflowID: r.WorkflowID, VersionID: r.VersionID, Status: r.Status,
		Input: orNull(r.Input), Output: orNull(r.Output), Error: orNull(r.Error),
		LastSeq: r.LastSeq, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	if !r.StartedAt.IsZero() {
		v.StartedAt = &r.StartedAt
	}
	if !r.FinishedAt.IsZero() {
		v.FinishedAt = &r.FinishedAt
	}
	return v
}

func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

func (s *Server) getWorkflowRun(w http.ResponseWriter, r *http.Request) error {
	run, err := s.workflows.GetRun(r.Context(), userOf(r), r.PathValue("run_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newRunView(run))
	return nil
}

// eventPage is a page of workflow events.
type eventPage struct {
	Events    []workflow.Envelope `json:"events"`
	HasMore   bool                `json:"hasMore"`
	NextAfter int64               `json:"nextAfter"`
}

func (s *Server) listWorkflowRunEvents(w http.ResponseWriter, r *http.Request) error {
	after, err := parseAfter(r)
	if err != nil {
		return err
	}
	limit, err := parseLimit(r, workflow.DefaultEventPageLimit, workflow.MaxEventPageLimit)
	if err != nil {
		return err
	}
	page, err := s.workflows.ListEvents(r.Context(), userOf(r), r.PathValue("run_id"), after, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, eventPage{Events: page.Events, HasMore: page.HasMore, NextAfter: page.NextAfter})
	return nil
}

// streamWorkflowRun follows a run's events over SSE
// (workflowsvc.Service.OpenRunStream); the run's status when the stream
// opened is in X-Workflow-Run-Status.
func (s *Server) streamWorkflowRun(w http.ResponseWriter, r *http.Request) error {
	cursor, err := parseCursor(r)
	if err != nil {
		return err
	}
	st, err := s.workflows.OpenRunStream(r.Context(), userOf(r), r.PathValue("run_id"))
	if err != nil {
		return err
	}
	if _, err := s.workflows.CheckCursor(r.Context(), userOf(r), st.Run(), cursor); err != nil {
		return err
	}
	w.Header().Set("X-Workflow-Run-Status", string(st.Run().Status))
	return s.serveStream(w, r, st, cursor, slog.String("run_id", st.Run().ID))
}
