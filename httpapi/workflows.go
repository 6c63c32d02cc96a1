package httpapi

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
	"github.com/runstream/runstream/workflowsvc"
)

// Limits of the workflow list endpoints.
const (
	DefaultListLimit = 50
	MaxListLimit     = 200
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
	raw, err := readBody(r)
	if err != nil {
		return nil, bodyReadError(err)
	}
	body, err := workflowsvc.DefinitionFromYAML(raw)
	if err != nil {
		return nil, err
	}
	if err := CheckJSON(body); err != nil {
		return nil, err
	}
	return body, nil
}

// decodeRequest decodes a checked JSON body, which must be an object,
// into v, a struct, refusing unknown fields. null is no object: decoded,
// it would leave v as an empty object would.
func decodeRequest(body []byte, v any) error {
	if trimmed := bytes.TrimSpace(body); len(trimmed) == 0 || trimmed[0] != '{' {
		return runstream.Errorf(runstream.CodeInvalidArgument, "the body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return runstream.Errorf(runstream.CodeInvalidArgument, "invalid request body: %s", jsonErrorText(err))
	}
	return nil
}

// readDefinition reads the body of POST /api/workflows and of POST
// …/versions: {name?, description?, definition}, or the bare definition.
func readDefinition(r *http.Request) (workflowsvc.Definition, error) {
	body, err := readWorkflowBody(r)
	if err != nil {
		return workflowsvc.Definition{}, err
	}
	var keys map[string]json.RawMessage
	if json.Unmarshal(body, &keys) != nil || keys == nil { // null decodes to a nil map
		return workflowsvc.Definition{}, runstream.Errorf(runstream.CodeInvalidArgument, "the body must be a JSON object")
	}
	if _, wrapped := keys["definition"]; !wrapped {
		return workflowsvc.Definition{Definition: body}, nil
	}
	var req struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Definition  json.RawMessage `json:"definition"`
	}
	if err := decodeRequest(body, &req); err != nil {
		return workflowsvc.Definition{}, err
	}
	return workflowsvc.Definition{Name: req.Name, Description: req.Description, Definition: req.Definition}, nil
}

// createWorkflow publishes a workflow with its first version: 201 with the
// workflow view.
func (s *Server) createWorkflow(w http.ResponseWriter, r *http.Request) error {
	def, err := readDefinition(r)
	if err != nil {
		return err
	}
	wf, v, err := s.workflows.Publish(r.Context(), userOf(r), def)
	if err != nil {
		return err
	}
	view := newWorkflowView(wf)
	view.LatestVersion = newVersionView(v)
	writeJSON(w, http.StatusCreated, view)
	return nil
}

// addWorkflowVersion publishes a new immutable version, which becomes the
// default for new runs: 201 with the version view. An unknown workflow
// answers NOT_FOUND before the body is read.
func (s *Server) addWorkflowVersion(w http.ResponseWriter, r *http.Request) error {
	wf, err := s.workflows.GetWorkflow(r.Context(), userOf(r), r.PathValue("workflow_id"))
	if err != nil {
		return err
	}
	def, err := readDefinition(r)
	if err != nil {
		return err
	}
	v, err := s.workflows.AddVersion(r.Context(), userOf(r), wf.ID, def)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, newVersionView(v))
	return nil
}

func (s *Server) getWorkflow(w http.ResponseWriter, r *http.Request) error {
	wf, v, err := s.workflows.GetWorkflowLatest(r.Context(), userOf(r), r.PathValue("workflow_id"))
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
	rows, err := s.workflows.ListWorkflows(r.Context(), userOf(r), r.URL.Query().Get("before"), limit)
	if err != nil {
		return err
	}
	page := struct {
		Workflows []workflowView `json:"workflows"`
		HasMore   bool           `json:"hasMore"`
		// NextBefore is the before parameter of the next page.
		NextBefore string `json:"nextBefore,omitempty"`
	}{Workflows: []workflowView{}, HasMore: rows.HasMore, NextBefore: rows.NextBefore}
	for _, wf := range rows.Rows {
		page.Workflows = append(page.Workflows, newWorkflowView(wf))
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// createWorkflowRun starts a run of a workflow version (the latest unless
// versionId names one): 201 with the run view.
func (s *Server) createWorkflowRun(w http.ResponseWriter, r *http.Request) error {
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
	run, err := s.workflows.StartRun(r.Context(), workflowsvc.StartRunParams{
		User: userOf(r), WorkflowID: r.PathValue("workflow_id"), VersionID: req.VersionID, Input: req.Input,
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, newRunView(run))
	return nil
}

func (s *Server) listWorkflowRuns(w http.ResponseWriter, r *http.Request) error {
	limit, err := parseLimit(r, DefaultListLimit, MaxListLimit)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	rows, err := s.workflows.ListRuns(r.Context(), workflowsvc.ListRunsParams{
		User: userOf(r), WorkflowID: q.Get("workflowId"), Status: q.Get("status"), Before: q.Get("before"), Limit: limit,
	})
	if err != nil {
		return err
	}
	page := struct {
		Runs       []runView `json:"runs"`
		HasMore    bool      `json:"hasMore"`
		NextBefore string    `json:"nextBefore,omitempty"`
	}{Runs: []runView{}, HasMore: rows.HasMore, NextBefore: rows.NextBefore}
	for _, run := range rows.Rows {
		page.Runs = append(page.Runs, newRunView(run))
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// cancelWorkflowRun asks a run to stop (workflowsvc.Service.CancelRun):
// 202 with the run view.
func (s *Server) cancelWorkflowRun(w http.ResponseWriter, r *http.Request) error {
	run, err := s.workflows.CancelRun(r.Context(), userOf(r), r.PathValue("run_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, newRunView(run))
	return nil
}

// resumeWorkflowRun continues a run paused at a human_input node
// (workflowsvc.Service.ResumeRun): 200 with the run view.
func (s *Server) resumeWorkflowRun(w http.ResponseWriter, r *http.Request) error {
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
	run, err := s.workflows.ResumeRun(r.Context(), workflowsvc.ResumeParams{
		User: userOf(r), RunID: r.PathValue("run_id"), Token: req.ResumeToken, Action: req.Action, Values: req.Values,
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newRunView(run))
	return nil
}
