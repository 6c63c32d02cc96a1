package httpapi

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"slices"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/workflow"
)

// Limits of the workflow endpoints.
const (
	DefaultListLimit     = 50
	MaxListLimit         = 200
	MaxDescriptionLength = 2000
)

// workflowView is the public view of a workflow.
type workflowView struct {
	WorkflowID      string       `json:"workflowId"`
	Name            string       `json:"name"`
	Description     string       `json:"description"`
	LatestVersionID string       `json:"latestVersionId"`
	CreatedAt       time.Time    `json:"createdAt"`
	UpdatedAt       time.Time    `json:"updatedAt"`
	LatestVersion   *versionView `json:"latestVersion,omitempty"`
}

// versionView is the public view of a workflow version.
type versionView struct {
	VersionID  string          `json:"versionId"`
	WorkflowID string          `json:"workflowId"`
	Version    int             `json:"version"`
	Definition json.RawMessage `json:"definition"`
	CreatedAt  time.Time       `json:"createdAt"`
}

func newWorkflowView(w workflow.Workflow) workflowView {
	return workflowView{
		WorkflowID: w.ID, Name: w.Name, Description: w.Description, LatestVersionID: w.LatestVersionID,
		CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt,
	}
}

func newVersionView(v workflow.Version) *versionView {
	return &versionView{VersionID: v.ID, WorkflowID: v.WorkflowID, Version: v.Number, Definition: v.Definition, CreatedAt: v.CreatedAt}
}

// notify tells the engine of a changed run.
func (s *Server) notify(runID string) {
	if s.cfg.Notify != nil {
		s.cfg.Notify(runID)
	}
}

// errNoLog answers the writing workflow endpoints of a server without an
// event log.
func errNoLog() error {
	return runstream.Errorf(runstream.CodeUnavailable, "workflow runs are not enabled on this server")
}

// readWorkflowBody reads a JSON body, or a YAML one (Content-Type
// application/yaml, application/x-yaml or text/yaml) converted to JSON and
// checked as a JSON body is.
func readWorkflowBody(r *http.Request) ([]byte, error) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mt {
	case "application/yaml", "application/x-yaml", "text/yaml":
	default:
		return readJSONBody(r)
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		var maxBytes *http.MaxBytesError
		if errors.As(err, &maxBytes) {
			return nil, runstream.Errorf(runstream.CodePayloadTooLarge, "request body exceeds %d bytes", maxBytes.Limit)
		}
		return nil, runstream.Wrap(err, runstream.CodeInvalidArgument, "could not read the request body")
	}
	body, err := engine.YAMLToJSON(raw)
	if err != nil {
		return nil, err
	}
	if err := CheckJSON(body); err != nil {
		return nil, err
	}
	return body, nil
}

// decodeRequest decodes a checked JSON body into v, refusing unknown fields.
func decodeRequest(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return runstream.Errorf(runstream.CodeInvalidArgument, "invalid request body: %s", jsonErrorText(err))
	}
	return nil
}

// definitionRequest is the body of POST /api/workflows and of POST
// …/versions: {name?, description?, definition}, or the bare definition.
type definitionRequest struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Definition  json.RawMessage `json:"definition"`
}

// readDefinition reads a definition request and compiles its definition.
func (s *Server) readDefinition(r *http.Request) (definitionRequest, *engine.Plan, error) {
	body, err := readWorkflowBody(r)
	if err != nil {
		return definitionRequest{}, nil, err
	}
	var keys map[string]json.RawMessage
	if json.Unmarshal(body, &keys) != nil {
		return definitionRequest{}, nil, runstream.Errorf(runstream.CodeInvalidArgument, "the body must be a JSON object")
	}
	var req definitionRequest
	if _, wrapped := keys["definition"]; wrapped {
		if err := decodeRequest(body, &req); err != nil {
			return definitionRequest{}, nil, err
		}
	} else {
		req.Definition = body
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, req.Definition); err != nil {
		return definitionRequest{}, nil, runstream.Errorf(runstream.CodeInvalidArgument, "definition must be a JSON object")
	}
	req.Definition = compact.Bytes()
	plan, err := s.cfg.Definitions.CompileJSON(req.Definition)
	if err != nil {
		return definitionRequest{}, nil, err
	}
	def := plan.Definition()
	if req.Name == "" {
		req.Name = def.Name
	}
	if req.Description == "" {
		req.Description = def.Description
	}
	switch {
	case len([]rune(req.Name)) > engine.MaxNameLength:
		return definitionRequest{}, nil, runstream.Errorf(runstream.CodeInvalidArgument, "name has more than %d characters", engine.MaxNameLength)
	case len([]rune(req.Description)) > MaxDescriptionLength:
		return definitionRequest{}, nil, runstream.Errorf(runstream.CodeInvalidArgument, "description has more than %d characters", MaxDescriptionLength)
	}
	return req, plan, nil
}

// createWorkflow publishes a workflow with its first version: 201 with the
// workflow view.
func (s *Server) createWorkflow(w http.ResponseWriter, r *http.Request) error {
	req, _, err := s.readDefinition(r)
	if err != nil {
		return err
	}
	wf, v, err := s.cfg.Workflows.CreateWorkflow(r.Context(),
		workflow.Workflow{ID: engine.NewID("wf"), OwnerID: userOf(r), Name: req.Name, Description: req.Description},
		workflow.Version{ID: engine.NewID("wv"), Definition: req.Definition})
	if err != nil {
		return err
	}
	view := newWorkflowView(wf)
	view.LatestVersion = newVersionView(v)
	writeJSON(w, http.StatusCreated, view)
	return nil
}

// addWorkflowVersion publishes a new immutable version, which becomes the
// default for new runs: 201 with the version view.
func (s *Server) addWorkflowVersion(w http.ResponseWriter, r *http.Request) error {
	wf, err := s.cfg.Workflows.GetWorkflow(r.Context(), r.PathValue("workflow_id"), ownerOf(r))
	if err != nil {
		return err
	}
	req, _, err := s.readDefinition(r)
	if err != nil {
		return err
	}
	v, err := s.cfg.Workflows.AddVersion(r.Context(), workflow.Version{ID: engine.NewID("wv"), WorkflowID: wf.ID, Definition: req.Definition}, ownerOf(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, newVersionView(v))
	return nil
}

func (s *Server) getWorkflow(w http.ResponseWriter, r *http.Request) error {
	wf, err := s.cfg.Workflows.GetWorkflow(r.Context(), r.PathValue("workflow_id"), ownerOf(r))
	if err != nil {
		return err
	}
	v, err := s.cfg.Workflows.GetVersion(r.Context(), wf.ID, wf.LatestVersionID, ownerOf(r))
	if err != nil {
		return err
	}
	view := newWorkflowView(wf)
	view.LatestVersion = newVersionView(v)
	writeJSON(w, http.StatusOK, view)
	return nil
}

func (s *Server) listWorkflows(w http.ResponseWriter, r *http.Request) error {
	limit, err := parseLimit(r, DefaultListLimit, MaxListLimit)
	if err != nil {
		return err
	}
	rows, err := s.cfg.Workflows.ListWorkflows(r.Context(), workflow.ListWorkflowsParams{
		Owner: ownerOf(r), BeforeID: r.URL.Query().Get("before"), Limit: limit + 1,
	})
	if err != nil {
		return err
	}
	page := struct {
		Workflows []workflowView `json:"workflows"`
		HasMore   bool           `json:"hasMore"`
		// NextBefore is the before parameter of the next page.
		NextBefore string `json:"nextBefore,omitempty"`
	}{Workflows: []workflowView{}}
	rows, page.HasMore, page.NextBefore = trimPage(rows, limit, func(wf workflow.Workflow) string { return wf.ID })
	for _, wf := range rows {
		page.Workflows = append(page.Workflows, newWorkflowView(wf))
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// createWorkflowRun starts a run of a workflow version (the latest unless
// versionId names one): its input is checked against the inputSchema, and
// run.created and run.queued are written with the run. 201 with the run
// view.
func (s *Server) createWorkflowRun(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Log == nil {
		return errNoLog()
	}
	body, err := readJSONBody(r)
	if err != nil {
		return err
	}
	var req struct {
		Input     json.RawMessage `json:"input"`
		VersionID string          `json:"versionId"`
	}
	if err := decodeRequest(body, &req); err != nil {
		return err
	}
	ctx, owner := r.Context(), ownerOf(r)
	wf, err := s.cfg.Workflows.GetWorkflow(ctx, r.PathValue("workflow_id"), owner)
	if err != nil {
		return err
	}
	versionID := cmp.Or(req.VersionID, wf.LatestVersionID)
	v, err := s.cfg.Workflows.GetVersion(ctx, wf.ID, versionID, owner)
	if err != nil {
		return err
	}
	plan, err := s.cfg.Definitions.CompileJSON(v.Definition)
	if err != nil {
		return err
	}
	input := req.Input
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, input); err != nil {
		return runstream.Errorf(runstream.CodeInvalidArgument, "input must be a JSON value")
	}
	input = compact.Bytes()
	if err := plan.CheckInput(input); err != nil {
		return err
	}
	run, _, err := s.cfg.Log.CreateRun(ctx,
		workflow.Run{ID: engine.NewID("run"), WorkflowID: wf.ID, VersionID: v.ID, OwnerID: userOf(r), Status: workflow.StatusQueued, Input: input},
		[]workflow.NewEvent{
			{Event: workflow.EventRunCreated, Data: engine.RunCreatedData(v, input)},
			{Event: workflow.EventRunQueued, Data: engine.RunQueuedData()},
		})
	if err != nil {
		return err
	}
	s.notify(run.ID)
	writeJSON(w, http.StatusCreated, newRunView(run))
	return nil
}

func (s *Server) listWorkflowRuns(w http.ResponseWriter, r *http.Request) error {
	limit, err := parseLimit(r, DefaultListLimit, MaxListLimit)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	status := workflow.RunStatus(q.Get("status"))
	if status != "" && !status.Valid() {
		return runstream.Errorf(runstream.CodeInvalidArgument, "status %q is not a run status", status).WithDetail("parameter", "status")
	}
	rows, err := s.cfg.Workflows.ListRuns(r.Context(), workflow.ListRunsParams{
		Owner: ownerOf(r), WorkflowID: q.Get("workflowId"), Status: status, BeforeID: q.Get("before"), Limit: limit + 1,
	})
	if err != nil {
		return err
	}
	page := struct {
		Runs       []runView `json:"runs"`
		HasMore    bool      `json:"hasMore"`
		NextBefore string    `json:"nextBefore,omitempty"`
	}{Runs: []runView{}}
	rows, page.HasMore, page.NextBefore = trimPage(rows, limit, func(run workflow.Run) string { return run.ID })
	for _, run := range rows {
		page.Runs = append(page.Runs, newRunView(run))
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// cancelWorkflowRun asks a run to stop: 202 with the run view. A queued run
// or one awaiting input is cancelled at once (run.cancel_requested and
// run.cancelled); a running one gets run.cancel_requested and its engine
// stops its nodes and writes run.cancelled. A run already cancelling is
// left as it is; a terminal one answers WORKFLOW_RUN_ALREADY_TERMINAL.
// The events are appended only if the run's status is still the one they
// were chosen for: of simultaneous cancels one appends, and the others
// read the run again and answer from what they find.
func (s *Server) cancelWorkflowRun(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Log == nil {
		return errNoLog()
	}
	ctx, owner := r.Context(), ownerOf(r)
	runID := r.PathValue("run_id")
	for attempt := 1; ; attempt++ {
		run, err := s.cfg.Workflows.GetRun(ctx, runID, owner)
		if err != nil {
			return err
		}
		events := []workflow.NewEvent{{Event: workflow.EventRunCancelRequested, Data: engine.CancelRequestedData(userOf(r))}}
		switch run.Status {
		case workflow.StatusCompleted, workflow.StatusFailed, workflow.StatusCancelled:
			return runstream.Errorf(runstream.CodeWorkflowRunAlreadyTerminal, "run %s is %s", run.ID, run.Status)
		case workflow.StatusCancelling:
			writeJSON(w, http.StatusAccepted, newRunView(run))
			return nil
		case workflow.StatusQueued, workflow.StatusAwaitingInput:
			events = append(events, workflow.NewEvent{Event: workflow.EventRunCancelled, Data: engine.CancelledData(time.Now())})
		}
		_, err = s.cfg.Log.Append(ctx, workflow.AppendParams{RunID: run.ID, IfStatus: run.Status, Events: events})
		if runstream.ErrorCodeOf(err) == runstream.CodeConflict && attempt < maxCancelAttempts {
			continue // the run changed since it was read
		}
		if err != nil {
			return err
		}
		return s.notifyAndAnswer(w, r, http.StatusAccepted, run.ID)
	}
}

// maxCancelAttempts bounds how often a cancel reads the run again after
// the run changed under it (an engine moving it along meanwhile).
const maxCancelAttempts = 5

// resumeWorkflowRun continues a run paused at a human_input node. A
// request with the run's pending token is validated first (the action
// among the offered ones, the values against the form schema; 422 without
// consuming the token); then the token is consumed with one compare-and-set
// in the store, which appends run.resumed and stores the node's output
// {action, values}. 200 with the run view.
func (s *Server) resumeWorkflowRun(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Log == nil {
		return errNoLog()
	}
	body, err := readJSONBody(r)
	if err != nil {
		return err
	}
	var req struct {
		ResumeToken string          `json:"resumeToken"`
		Action      string          `json:"action"`
		Values      json.RawMessage `json:"values"`
	}
	if err := decodeRequest(body, &req); err != nil {
		return err
	}
	if req.ResumeToken == "" {
		return runstream.Errorf(runstream.CodeInvalidArgument, "resumeToken is required").WithDetail("parameter", "resumeToken")
	}
	ctx, owner := r.Context(), ownerOf(r)
	run, err := s.cfg.Workflows.GetRun(ctx, r.PathValue("run_id"), owner)
	if err != nil {
		return err
	}
	hash := sha256.Sum256([]byte(req.ResumeToken))
	now := time.Now()
	values := req.Values
	if len(values) == 0 || string(values) == "null" {
		values = json.RawMessage("{}")
	}
	// The node a wrong, used or expired token is judged for: the store
	// refuses such a resume before it appends anything.
	nodeID, nodeRunID, action := "unknown", "", cmp.Or(req.Action, "none")
	pending, err := s.cfg.Workflows.PendingResumeToken(ctx, run.ID)
	switch {
	case err != nil && runstream.ErrorCodeOf(err) != runstream.CodeWorkflowResumeTokenInvalid:
		return err
	case err == nil && subtle.ConstantTimeCompare(pending.Hash, hash[:]) == 1 && now.Before(pending.ExpiresAt):
		if !slices.Contains(pending.Actions, req.Action) {
			return runstream.Errorf(runstream.CodeWorkflowResumeActionInvalid, "action %q is not one of the offered actions", req.Action).
				WithDetail("actions", pending.Actions).WithNode(pending.NodeID)
		}
		schema, err := engine.CompileSchema(pending.FormSchema)
		if err != nil {
			return runstream.Wrap(err, runstream.CodeInternal, "the form schema does not compile")
		}
		if err := schema.ValidationError(values, runstream.CodeWorkflowFormInvalid, "values"); err != nil {
			return runstream.AsError(err).WithNode(pending.NodeID)
		}
		nodeID, nodeRunID, action = pending.NodeID, pending.NodeRunID, req.Action
	}
	_, err = s.cfg.Log.Resume(ctx, workflow.ResumeParams{
		RunID: run.ID, Owner: owner, Hash: hash[:], Now: now,
		Events:      []workflow.NewEvent{{Event: workflow.EventRunResumed, NodeID: nodeID, NodeRunID: nodeRunID, Data: engine.ResumedData(action)}},
		NodeOutputs: map[string]json.RawMessage{nodeID: engine.ResumeOutput(action, values)},
	})
	if err != nil {
		return err
	}
	return s.notifyAndAnswer(w, r, http.StatusOK, run.ID)
}

// notifyAndAnswer tells the engine of this process that runID changed and
// answers status with the run's view as it is now.
func (s *Server) notifyAndAnswer(w http.ResponseWriter, r *http.Request, status int, runID string) error {
	s.notify(runID)
	run, err := s.cfg.Workflows.GetRun(r.Context(), runID, ownerOf(r))
	if err != nil {
		return err
	}
	writeJSON(w, status, newRunView(run))
	return nil
}

// trimPage keeps the first limit of rows read with limit+1 to learn
// whether more follow; nextBefore is then the id of the last row kept,
// the before parameter of the next page.
func trimPage[R any](rows []R, limit int, id func(R) string) (kept []R, more bool, nextBefore string) {
	if len(rows) <= limit {
		return rows, false, ""
	}
	return rows[:limit], true, id(rows[limit-1])
}
