package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/sse"
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
	run, err := s.cfg.Workflows.GetRun(r.Context(), r.PathValue("run_id"), ownerOf(r))
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
	run, err := s.cfg.Workflows.GetRun(r.Context(), r.PathValue("run_id"), ownerOf(r))
	if err != nil {
		return err
	}
	events, err := s.cfg.Workflows.ListEvents(r.Context(), run.ID, after, limit)
	if err != nil {
		return err
	}
	page := eventPage{Events: events, NextAfter: after}
	if n := len(events); n > 0 {
		page.NextAfter = events[n-1].Seq
	}
	// The run row was read before the page, so events it does not count yet
	// are simply found by the next page.
	page.HasMore = page.NextAfter < run.LastSeq
	if page.Events == nil {
		page.Events = []workflow.Envelope{}
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// streamRun reads the run a stream request names for user. Requests for
// the same run and user that arrive while a read is in flight share it, so
// that the followers of a run reconnecting at once (after a restart, say)
// make one store read rather than one each. A request stops waiting when
// its client leaves. Every shared read ends before its requests subscribe,
// so its LastSeq is one the store held before they subscribe, as
// Subscribe needs.
func (s *Server) streamRun(ctx context.Context, runID, user string) (workflow.Run, error) {
	read := s.runReads.DoChan(runID+"\x00"+user, func() (any, error) {
		// Not cancelled with the first request: the others wait on it.
		return s.cfg.Workflows.GetRun(context.WithoutCancel(ctx), runID, runstream.OwnedBy(user))
	})
	select {
	case res := <-read:
		if res.Err != nil {
			return workflow.Run{}, res.Err
		}
		return res.Val.(workflow.Run), nil
	case <-ctx.Done():
		return workflow.Run{}, ctx.Err()
	}
}

func (s *Server) streamWorkflowRun(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	cursor, err := parseCursor(r)
	if err != nil {
		return err
	}
	run, err := s.streamRun(ctx, r.PathValue("run_id"), userOf(r))
	if err != nil {
		return err
	}
	w.Header().Set("X-Workflow-Run-Status", string(run.Status))
	// Every event up to run.LastSeq is stored (a cursor may point past it).
	subscribe := func() *live.Subscription { return s.cfg.Hub.Subscribe(eventlog.WorkflowStreamKey(run.ID), run.LastSeq) }
	return s.serveStream(w, r, subscribe, &workflowSource{store: s.cfg.Workflows, run: run}, cursor, slog.String("run_id", run.ID))
}

// workflowSource reads a workflow run's events for a follower.
type workflowSource struct {
	store workflow.Store
	run   workflow.Run
}

func (src *workflowSource) readAfter(ctx context.Context, buf []byte, after int64, limit int) ([]byte, int, int64, bool, error) {
	events, err := src.store.ListEvents(ctx, src.run.ID, after, limit)
	if err != nil || len(events) == 0 {
		return buf, 0, after, false, err
	}
	for _, env := range events {
		if buf, err = eventlog.AppendWorkflowFrame(buf, env); err != nil {
			return buf, 0, after, false, err
		}
	}
	last := events[len(events)-1]
	return buf, len(events), last.Seq, last.Event.Terminal(), nil
}

// end reports the stream over when the run is terminal: at once when the
// cursor is at or past its stored terminal event, else after one
// synthesised terminal frame (data.synthesised true, no id line, never
// stored) for a run that is terminal without a terminal event.
func (src *workflowSource) end(ctx context.Context, cursor int64) ([]byte, bool, bool, error) {
	run, err := src.store.GetRun(ctx, src.run.ID, runstream.AnyOwner)
	if err != nil {
		return nil, false, false, err
	}
	if !run.Status.Terminal() {
		return nil, false, false, nil
	}
	if run.LastSeq > cursor {
		return nil, false, true, nil
	}
	if run.LastSeq > 0 {
		last, err := src.store.ListEvents(ctx, run.ID, run.LastSeq-1, 1)
		if err != nil {
			return nil, false, false, err
		}
		if len(last) == 1 && last[0].Event.Terminal() {
			return nil, true, false, nil
		}
	}
	frame, err := synthesisedTerminal(run)
	return frame, true, false, err
}

// synthesisedTerminal renders the terminal frame of a run that is terminal
// without a terminal event.
func synthesisedTerminal(run workflow.Run) ([]byte, error) {
	event, _ := workflow.TerminalEventFor(run.Status)
	finished := run.FinishedAt
	if finished.IsZero() {
		finished = run.UpdatedAt
	}
	data := map[string]any{"synthesised": true, "finishedAt": finished.Format(workflow.TimestampLayout)}
	switch event {
	case workflow.EventRunCompleted:
		data["output"] = orNull(run.Output)
		data["artifacts"] = []any{}
	case workflow.EventRunFailed:
		errObj := run.Error
		if len(errObj) == 0 {
			errObj, _ = json.Marshal(map[string]any{
				"code":      runstream.CodeWorkflowWorkerLost,
				"message":   "the run ended without a terminal event",
				"retryable": runstream.CodeWorkflowWorkerLost.Retryable(),
			})
		}
		data["error"] = errObj
		data["failedNodeId"] = nil
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	env := workflow.Envelope{
		SchemaVersion: workflow.SchemaVersion, RunID: run.ID, WorkflowID: run.WorkflowID, VersionID: run.VersionID,
		Seq: run.LastSeq, Event: event, Timestamp: finished, Data: raw,
	}
	envJSON, err := env.AppendJSON(nil)
	if err != nil {
		return nil, err
	}
	// No ID: a client that resumes after it keeps the last stored seq.
	return sse.AppendFrame(nil, sse.Frame{Event: string(event), Data: envJSON})
}
