package workflowsvc

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/redact"
	"github.com/runstream/runstream/workflow"
	"golang.org/x/sync/singleflight"
)

// inputRedactor cleans run inputs as the event log cleans events.
var inputRedactor = redact.New(redact.Options{})

// MaxDescriptionLength bounds a workflow's description, in characters.
const MaxDescriptionLength = 2000

// Store is what the service reads, and the definitions it writes: the
// methods of workflow.Store that do not write run events. Runs and their
// events are written through the event log only.
type Store interface {
	CreateWorkflow(ctx context.Context, w workflow.Workflow, v workflow.Version) (workflow.Workflow, workflow.Version, error)
	GetWorkflow(ctx context.Context, id string, owner runstream.Owner) (workflow.Workflow, error)
	ListWorkflows(ctx context.Context, p workflow.ListWorkflowsParams) ([]workflow.Workflow, error)
	AddVersion(ctx context.Context, v workflow.Version, owner runstream.Owner) (workflow.Version, error)
	GetVersion(ctx context.Context, workflowID, versionID string, owner runstream.Owner) (workflow.Version, error)
	GetRun(ctx context.Context, id string, owner runstream.Owner) (workflow.Run, error)
	ListRuns(ctx context.Context, p workflow.ListRunsParams) ([]workflow.Run, error)
	ListEvents(ctx context.Context, runID string, afterSeq int64, limit int) ([]workflow.Envelope, error)
	PendingResumeToken(ctx context.Context, runID string) (workflow.ResumeToken, error)
	GetArtifact(ctx context.Context, runID, artifactID string) (workflow.Artifact, error)
}

var _ Store = workflow.Store(nil)

// Config holds the optional parts of a Service.
type Config struct {
	// Definitions compiles the definitions published and checks run
	// inputs. Defaults to engine.DefaultRegistry().
	Definitions *engine.Registry
	// Artifacts holds the bytes of run artifacts, the blobs the engine
	// writes. Nil: OpenArtifact answers UNAVAILABLE.
	Artifacts engine.ArtifactBlobs
	// Notify, when set, is told of each run the service queued, resumed or
	// asked to cancel, with the context of the call that did
	// (engine.Engine.NotifyContext), so that an engine of this process
	// reacts before its next poll, and the run's trace follows the call's.
	Notify func(ctx context.Context, runID string)
	// Outcome, when set, is told of the end of each CancelRun ("cancel")
	// and ResumeRun ("resume") call: err is nil when it succeeded (metrics).
	Outcome func(op string, err error)
}

// Service is the workflow service. It is safe for concurrent use.
type Service struct {
	store Store
	log   *eventlog.WorkflowLog
	hub   *live.Hub
	cfg   Config
	// runReads shares the run reads of simultaneous stream openings.
	runReads singleflight.Group
}

// New returns the service over store that writes run events with log and
// follows runs on hub. A nil log makes a read-only service: StartRun,
// CancelRun and ResumeRun answer UNAVAILABLE.
func New(store Store, log *eventlog.WorkflowLog, hub *live.Hub, cfg Config) *Service {
	if cfg.Definitions == nil {
		cfg.Definitions = engine.DefaultRegistry()
	}
	return &Service{store: store, log: log, hub: hub, cfg: cfg}
}

// notify tells the engine of a run changed by the work of ctx.
func (s *Service) notify(ctx context.Context, runID string) {
	if s.cfg.Notify != nil {
		s.cfg.Notify(ctx, runID)
	}
}

// writable returns UNAVAILABLE for a read-only service.
func (s *Service) writable() error {
	if s.log == nil {
		return runstream.Errorf(runstream.CodeUnavailable, "workflow runs are not enabled on this server")
	}
	return nil
}

// DefinitionFromYAML converts a YAML definition document to JSON.
func DefinitionFromYAML(raw []byte) ([]byte, error) { return engine.YAMLToJSON(raw) }

// Definition is a definition to publish, with the name and description
// of its workflow; empty ones are taken from the definition.
type Definition struct {
	Name        string
	Description string
	Definition  json.RawMessage
}

// compile compacts and compiles d's definition and fills its name and
// description, checking their lengths.
func (s *Service) compile(d Definition) (Definition, error) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, d.Definition); err != nil {
		return Definition{}, runstream.Errorf(runstream.CodeInvalidArgument, "definition must be a JSON object")
	}
	d.Definition = compact.Bytes()
	// Before the compile, whose errors may quote what they refuse.
	if err := engine.CheckDefinitionCredentials(d.Definition); err != nil {
		return Definition{}, err
	}
	switch {
	case engine.ValueShaped(d.Name):
		return Definition{}, engine.LiteralCredential("the name", "/name")
	case engine.ValueShaped(d.Description):
		return Definition{}, engine.LiteralCredential("the description", "/description")
	}
	plan, err := s.cfg.Definitions.CompileJSON(d.Definition)
	if err != nil {
		return Definition{}, err
	}
	def := plan.Definition()
	d.Name = cmp.Or(d.Name, def.Name)
	d.Description = cmp.Or(d.Description, def.Description)
	switch {
	case len([]rune(d.Name)) > engine.MaxNameLength:
		return Definition{}, runstream.Errorf(runstream.CodeInvalidArgument, "name has more than %d characters", engine.MaxNameLength)
	case len([]rune(d.Description)) > MaxDescriptionLength:
		return Definition{}, runstream.Errorf(runstream.CodeInvalidArgument, "description has more than %d characters", MaxDescriptionLength)
	}
	return d, nil
}

// Publish compiles d and stores it as a new workflow of user with its
// first version.
func (s *Service) Publish(ctx context.Context, user string, d Definition) (workflow.Workflow, workflow.Version, error) {
	d, err := s.compile(d)
	if err != nil {
		return workflow.Workflow{}, workflow.Version{}, err
	}
	return s.store.CreateWorkflow(ctx,
		workflow.Workflow{ID: engine.NewID("wf"), OwnerID: user, Name: d.Name, Description: d.Description},
		workflow.Version{ID: engine.NewID("wv"), Definition: d.Definition})
}

// AddVersion compiles d and stores it as a new immutable version of the
// user's workflow, which becomes the default for new runs. d's name and
// description are checked but not stored.
func (s *Service) AddVersion(ctx context.Context, user, workflowID string, d Definition) (workflow.Version, error) {
	d, err := s.compile(d)
	if err != nil {
		return workflow.Version{}, err
	}
	return s.store.AddVersion(ctx, workflow.Version{ID: engine.NewID("wv"), WorkflowID: workflowID, Definition: d.Definition}, runstream.OwnedBy(user))
}

// GetWorkflow returns the user's workflow.
func (s *Service) GetWorkflow(ctx context.Context, user, id string) (workflow.Workflow, error) {
	return s.store.GetWorkflow(ctx, id, runstream.OwnedBy(user))
}

// GetWorkflowLatest returns the user's workflow and its latest version.
func (s *Service) GetWorkflowLatest(ctx context.Context, user, id string) (workflow.Workflow, workflow.Version, error) {
	wf, err := s.store.GetWorkflow(ctx, id, runstream.OwnedBy(user))
	if err != nil {
		return workflow.Workflow{}, workflow.Version{}, err
	}
	v, err := s.store.GetVersion(ctx, wf.ID, wf.LatestVersionID, runstream.OwnedBy(user))
	return wf, v, err
}

// Page is a page of a list read newest first: Rows, whether more follow,
// and NextBefore, the id of the last row, from which the next page reads.
type Page[R any] struct {
	Rows       []R
	HasMore    bool
	NextBefore string
}

// page keeps the first limit of rows read with limit+1 to learn whether
// more follow.
func page[R any](rows []R, limit int, id func(R) string) Page[R] {
	if len(rows) <= limit {
		return Page[R]{Rows: rows}
	}
	return Page[R]{Rows: rows[:limit], HasMore: true, NextBefore: id(rows[limit-1])}
}

// ListWorkflows returns a page of the user's workflows, newest first, of
// up to limit rows with ids before before (all when empty).
func (s *Service) ListWorkflows(ctx context.Context, user, before string, limit int) (Page[workflow.Workflow], error) {
	rows, err := s.store.ListWorkflows(ctx, workflow.ListWorkflowsParams{Owner: runstream.OwnedBy(user), BeforeID: before, Limit: limit + 1})
	if err != nil {
		return Page[workflow.Workflow]{}, err
	}
	return page(rows, limit, func(wf workflow.Workflow) string { return wf.ID }), nil
}

// ListRunsParams selects the runs of ListRuns.
type ListRunsParams struct {
	User string
	// WorkflowID and Status, when not empty, filter the runs. A status
	// that is not a run status is INVALID_ARGUMENT.
	WorkflowID string
	Status     string
	// Before and Limit page the runs, newest first.
	Before string
	Limit  int
}

// ListRuns returns a page of the user's runs, newest first.
func (s *Service) ListRuns(ctx context.Context, p ListRunsParams) (Page[workflow.Run], error) {
	status := workflow.RunStatus(p.Status)
	if status != "" && !status.Valid() {
		return Page[workflow.Run]{}, runstream.Errorf(runstream.CodeInvalidArgument, "status %s is not a run status", redact.Quote(string(status))).WithDetail("parameter", "status")
	}
	rows, err := s.store.ListRuns(ctx, workflow.ListRunsParams{
		Owner: runstream.OwnedBy(p.User), WorkflowID: p.WorkflowID, Status: status, BeforeID: p.Before, Limit: p.Limit + 1,
	})
	if err != nil {
		return Page[workflow.Run]{}, err
	}
	return page(rows, p.Limit, func(run workflow.Run) string { return run.ID }), nil
}

// GetRun returns the user's run.
func (s *Service) GetRun(ctx context.Context, user, runID string) (workflow.Run, error) {
	return s.store.GetRun(ctx, runID, runstream.OwnedBy(user))
}

// CheckCursor refuses a cursor past the run's last event
// (WORKFLOW_INVALID_CURSOR, with the last seq in details.last_seq): no
// event the run sent has that seq, and a follower past the end would skip
// the events up to it, the terminal one included, and wait for ever. run
// may be a read made before the event the client resumes after was
// committed (one shared by several openings, say): a cursor past it is
// checked against a fresh read of the user's run, which CheckCursor
// returns; otherwise it returns run.
func (s *Service) CheckCursor(ctx context.Context, user string, run workflow.Run, cursor int64) (workflow.Run, error) {
	if cursor <= run.LastSeq {
		return run, nil
	}
	fresh, err := s.store.GetRun(ctx, run.ID, runstream.OwnedBy(user))
	if err != nil {
		return workflow.Run{}, err
	}
	if cursor > fresh.LastSeq {
		return workflow.Run{}, runstream.Errorf(runstream.CodeWorkflowInvalidCursor, "the cursor is past the run's last event, seq %d", fresh.LastSeq).
			WithDetail("last_seq", fresh.LastSeq)
	}
	return fresh, nil
}

// EventPage is a page of a run's events.
type EventPage struct {
	Events []workflow.Envelope
	// HasMore reports events after NextAfter, the seq to read the next
	// page after.
	HasMore   bool
	NextAfter int64
}

// ListEvents returns up to limit events of the user's run with seq after
// after, ascending.
func (s *Service) ListEvents(ctx context.Context, user, runID string, after int64, limit int) (EventPage, error) {
	run, err := s.store.GetRun(ctx, runID, runstream.OwnedBy(user))
	if err != nil {
		return EventPage{}, err
	}
	if run, err = s.CheckCursor(ctx, user, run, after); err != nil {
		return EventPage{}, err
	}
	events, err := s.store.ListEvents(ctx, run.ID, after, limit)
	if err != nil {
		return EventPage{}, err
	}
	p := EventPage{Events: events, NextAfter: after}
	if n := len(events); n > 0 {
		p.NextAfter = events[n-1].Seq
	}
	// The run row was read before the page, so events it does not count yet
	// are simply found by the next page.
	p.HasMore = p.NextAfter < run.LastSeq
	if p.Events == nil {
		p.Events = []workflow.Envelope{}
	}
	return p, nil
}

// StartRunParams starts a run.
type StartRunParams struct {
	User       string
	WorkflowID string
	// VersionID names the version to run; empty: the latest.
	VersionID string
	// Input is the run's input, checked against the definition's
	// inputSchema; empty: {}.
	Input json.RawMessage
}

// StartRun starts a run of one of the user's workflows: its input is
// checked against the inputSchema, then redacted (package redact), and
// run.created and run.queued are written with the run, which it returns.
func (s *Service) StartRun(ctx context.Context, p StartRunParams) (workflow.Run, error) {
	if err := s.writable(); err != nil {
		return workflow.Run{}, err
	}
	owner := runstream.OwnedBy(p.User)
	wf, err := s.store.GetWorkflow(ctx, p.WorkflowID, owner)
	if err != nil {
		return workflow.Run{}, err
	}
	v, err := s.store.GetVersion(ctx, wf.ID, cmp.Or(p.VersionID, wf.LatestVersionID), owner)
	if err != nil {
		return workflow.Run{}, err
	}
	plan, err := s.cfg.Definitions.CompileJSON(v.Definition)
	if err != nil {
		return workflow.Run{}, err
	}
	input := p.Input
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, input); err != nil {
		return workflow.Run{}, runstream.Errorf(runstream.CodeInvalidArgument, "input must be a JSON value")
	}
	input = compact.Bytes()
	if err := checkNumbers(input); err != nil {
		return workflow.Run{}, err
	}
	if err := plan.CheckInput(input); err != nil {
		return workflow.Run{}, err
	}
	// The run keeps its input redacted, as its events do: what is checked
	// is the caller's input, what is stored, shown and run is the clean one.
	if input, _, err = inputRedactor.JSON(input); err != nil {
		return workflow.Run{}, runstream.Errorf(runstream.CodeInvalidArgument, "input must be a JSON value")
	}
	run, _, err := s.log.CreateRun(ctx,
		workflow.Run{ID: engine.NewID("run"), WorkflowID: wf.ID, VersionID: v.ID, OwnerID: p.User, Status: workflow.StatusQueued, Input: input},
		[]workflow.NewEvent{
			{Event: workflow.EventRunCreated, Data: engine.RunCreatedData(v, input)},
			{Event: workflow.EventRunQueued, Data: engine.RunQueuedData()},
		})
	if err != nil {
		return workflow.Run{}, err
	}
	s.notify(ctx, run.ID)
	return run, nil
}

// checkNumbers refuses an input holding a number that float64 cannot hold
// (1e999), which the engine could not evaluate, with VALIDATION_FAILED
// naming its JSON pointer under /input (redacted), never its text.
func checkNumbers(input json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil // valid JSON: json.Compact accepted it
	}
	path, bad := numberOutOfRange(v, "/input")
	if !bad {
		return nil
	}
	path = redact.Text(path)
	const msg = "number out of range: JSON numbers must be finite 64-bit floating-point values"
	return runstream.Errorf(runstream.CodeValidationFailed, "%s: %s", path, msg).
		WithDetail("problems", []map[string]string{{"path": path, "message": msg}})
}

// numberOutOfRange returns the JSON pointer, below path, of the first
// number of v (in member-name order) that float64 cannot hold.
func numberOutOfRange(v any, path string) (string, bool) {
	switch x := v.(type) {
	case json.Number:
		if _, err := strconv.ParseFloat(string(x), 64); err != nil {
			return path, true
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if p, bad := numberOutOfRange(x[k], path+"/"+pointerEscaper.Replace(k)); bad {
				return p, true
			}
		}
	case []any:
		for i, e := range x {
			if p, bad := numberOutOfRange(e, path+"/"+strconv.Itoa(i)); bad {
				return p, true
			}
		}
	}
	return "", false
}

// pointerEscaper escapes a member name in a JSON pointer (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// maxCancelAttempts bounds how often a cancel reads the run again after
// the run changed under it (an engine moving it along meanwhile).
const maxCancelAttempts = 5

// CancelRun asks the user's run to stop and returns the run as it is then.
// A queued run or one awaiting input is cancelled at once
// (run.cancel_requested and run.cancelled); a running one gets
// run.cancel_requested and its engine stops its nodes and writes
// run.cancelled. A run already cancelling is returned as it is; a terminal
// one is WORKFLOW_RUN_ALREADY_TERMINAL. The events are appended only if
// the run's status is still the one they were chosen for: of simultaneous
// cancels one appends, and the others read the run again and answer from
// what they find.
func (s *Service) CancelRun(ctx context.Context, user, runID string) (workflow.Run, error) {
	run, err := s.cancelRun(ctx, user, runID)
	s.outcome("cancel", err)
	return run, err
}

// outcome reports the end of a cancel or resume to Config.Outcome.
func (s *Service) outcome(op string, err error) {
	if s.cfg.Outcome != nil {
		s.cfg.Outcome(op, err)
	}
}

func (s *Service) cancelRun(ctx context.Context, user, runID string) (workflow.Run, error) {
	if err := s.writable(); err != nil {
		return workflow.Run{}, err
	}
	owner := runstream.OwnedBy(user)
	for attempt := 1; ; attempt++ {
		run, err := s.store.GetRun(ctx, runID, owner)
		if err != nil {
			return workflow.Run{}, err
		}
		events := []workflow.NewEvent{{Event: workflow.EventRunCancelRequested, Data: engine.CancelRequestedData(user)}}
		switch run.Status {
		case workflow.StatusCompleted, workflow.StatusFailed, workflow.StatusCancelled:
			return workflow.Run{}, runstream.Errorf(runstream.CodeWorkflowRunAlreadyTerminal, "run %s is %s", run.ID, run.Status)
		case workflow.StatusCancelling:
			return run, nil
		case workflow.StatusQueued, workflow.StatusAwaitingInput:
			events = append(events, workflow.NewEvent{Event: workflow.EventRunCancelled, Data: engine.CancelledData(time.Now())})
		}
		_, err = s.log.Append(ctx, workflow.AppendParams{RunID: run.ID, IfStatus: run.Status, Events: events})
		if runstream.ErrorCodeOf(err) == runstream.CodeConflict && attempt < maxCancelAttempts {
			continue // the run changed since it was read
		}
		if err != nil {
			return workflow.Run{}, err
		}
		return s.notifyAndRead(ctx, owner, run.ID)
	}
}

// ResumeParams resumes a run paused at a human_input node.
type ResumeParams struct {
	User  string
	RunID string
	// Token is the run's pending resume token; required.
	Token string
	// Action is one of the actions the node offers; Values the form's
	// values (empty or null: {}).
	Action string
	Values json.RawMessage
}

// ResumeRun continues the user's run paused at a human_input node and
// returns the run as it is then. A request with the run's pending token is
// validated first (the action among the offered ones, the values against
// the form schema; WORKFLOW_RESUME_ACTION_INVALID or WORKFLOW_FORM_INVALID
// without consuming the token); then the token is consumed with one
// compare-and-set in the store, which appends run.resumed and stores the
// node's output {action, values}.
func (s *Service) ResumeRun(ctx context.Context, p ResumeParams) (workflow.Run, error) {
	run, err := s.resumeRun(ctx, p)
	s.outcome("resume", err)
	return run, err
}

func (s *Service) resumeRun(ctx context.Context, p ResumeParams) (workflow.Run, error) {
	if err := s.writable(); err != nil {
		return workflow.Run{}, err
	}
	if p.Token == "" {
		return workflow.Run{}, runstream.Errorf(runstream.CodeInvalidArgument, "resumeToken is required").WithDetail("parameter", "resumeToken")
	}
	owner := runstream.OwnedBy(p.User)
	run, err := s.store.GetRun(ctx, p.RunID, owner)
	if err != nil {
		return workflow.Run{}, err
	}
	hash := sha256.Sum256([]byte(p.Token))
	now := time.Now()
	values := p.Values
	if len(values) == 0 || string(values) == "null" {
		values = json.RawMessage("{}")
	}
	// The node a wrong, used or expired token is judged for: the store
	// refuses such a resume before it appends anything.
	nodeID, nodeRunID, action := "unknown", "", cmp.Or(p.Action, "none")
	pending, err := s.store.PendingResumeToken(ctx, run.ID)
	switch {
	case err != nil && runstream.ErrorCodeOf(err) != runstream.CodeWorkflowResumeTokenInvalid:
		return workflow.Run{}, err
	case err == nil && subtle.ConstantTimeCompare(pending.Hash, hash[:]) == 1 && now.Before(pending.ExpiresAt):
		if err := checkResume(pending, p.Action, values); err != nil {
			return workflow.Run{}, err
		}
		nodeID, nodeRunID, action = pending.NodeID, pending.NodeRunID, p.Action
	}
	_, err = s.log.Resume(ctx, workflow.ResumeParams{
		RunID: run.ID, Owner: owner, Hash: hash[:], Now: now,
		Events:      []workflow.NewEvent{{Event: workflow.EventRunResumed, NodeID: nodeID, NodeRunID: nodeRunID, Data: engine.ResumedData(action)}},
		NodeOutputs: map[string]json.RawMessage{nodeID: engine.ResumeOutput(action, values)},
	})
	if err != nil {
		return workflow.Run{}, err
	}
	return s.notifyAndRead(ctx, owner, run.ID)
}

// checkResume checks the action and the values of a resume against the
// pending token's offer.
func checkResume(pending workflow.ResumeToken, action string, values json.RawMessage) error {
	if !slices.Contains(pending.Actions, action) {
		return runstream.Errorf(runstream.CodeWorkflowResumeActionInvalid, "action %s is not one of the offered actions", redact.Quote(action)).
			WithDetail("actions", pending.Actions).WithNode(pending.NodeID)
	}
	schema, err := engine.CompileSchema(pending.FormSchema)
	if err != nil {
		return runstream.Wrap(err, runstream.CodeInternal, "the form schema does not compile")
	}
	if err := schema.ValidationError(values, runstream.CodeWorkflowFormInvalid, "values"); err != nil {
		return runstream.AsError(err).WithNode(pending.NodeID)
	}
	return nil
}

// notifyAndRead tells the engine of this process that runID changed and
// returns the run as it is now.
func (s *Service) notifyAndRead(ctx context.Context, owner runstream.Owner, runID string) (workflow.Run, error) {
	s.notify(ctx, runID)
	return s.store.GetRun(ctx, runID, owner)
}

// OpenArtifact returns an artifact of the user's run and its bytes, which
// the caller closes. A server without artifact storage answers
// UNAVAILABLE.
func (s *Service) OpenArtifact(ctx context.Context, user, runID, artifactID string) (workflow.Artifact, io.ReadCloser, error) {
	if s.cfg.Artifacts == nil {
		return workflow.Artifact{}, nil, runstream.Errorf(runstream.CodeUnavailable, "artifact storage is not configured on this server")
	}
	run, err := s.store.GetRun(ctx, runID, runstream.OwnedBy(user))
	if err != nil {
		return workflow.Artifact{}, nil, err
	}
	a, err := s.store.GetArtifact(ctx, run.ID, artifactID)
	if err != nil {
		if runstream.ErrorCodeOf(err) == runstream.CodeNotFound {
			return workflow.Artifact{}, nil, runstream.Errorf(runstream.CodeNotFound, "run %s has no artifact %s", run.ID, redact.Quote(artifactID))
		}
		return workflow.Artifact{}, nil, err
	}
	body, err := s.cfg.Artifacts.Open(ctx, run.ID, a.ID)
	if err != nil {
		return workflow.Artifact{}, nil, err
	}
	return a, body, nil
}
