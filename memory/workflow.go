package memory

import (
	"bytes"
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

// WorkflowStore is the in-memory workflow.Store. The zero value is not
// usable; call NewWorkflowStore.
//
// Durability: none; rows live in process memory.
//
// Concurrency: one sync.Mutex serializes every call, so seq assignment,
// the run row changes of Append and the token compare-and-set of Resume
// are atomic with respect to each other. Every row goes in and out as a
// copy: callers may modify what they pass and what they get.
//
// Limits: everything is kept in memory. Listing workflows or runs sorts
// every visible row (O(n log n)); reading events costs O(k).
type WorkflowStore struct {
	cfg config

	mu        sync.Mutex
	workflows map[string]*workflowRow
	versions  map[string]workflow.Version // every version, by id
	runs      map[string]*runRow
	closed    bool

	// claims is the round-robin cursor of Claim (workflow.Queue).
	claims workflow.ClaimCursor
}

var _ workflow.Store = (*WorkflowStore)(nil)

type workflowRow struct {
	w        workflow.Workflow
	versions int // number of the latest version
}

type runRow struct {
	r workflow.Run
	// events[i] has seq i+1.
	events []workflow.Envelope
	// tokens holds every token the run was given that was not replaced:
	// the consumed ones, so that reuse is told apart from a wrong token,
	// and at most one pending one.
	tokens    []workflow.ResumeToken
	artifacts map[string]workflow.Artifact
	// outputs holds the full output of completed nodes (NodeOutputs).
	outputs map[string]json.RawMessage
}

// NewWorkflowStore returns an empty store. Of the options only WithClock
// applies: it stamps rows and events written without a time.
func NewWorkflowStore(opts ...Option) *WorkflowStore {
	cfg := config{now: time.Now}
	for _, o := range opts {
		o(&cfg)
	}
	return &WorkflowStore{
		cfg:       cfg,
		workflows: map[string]*workflowRow{},
		versions:  map[string]workflow.Version{},
		runs:      map[string]*runRow{},
	}
}

// Durability reports that acknowledged writes survive nothing.
func (s *WorkflowStore) Durability() string { return "none (process memory)" }

// Close empties the store; later calls fail with CodeUnavailable.
func (s *WorkflowStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed, s.workflows, s.versions, s.runs = true, nil, nil, nil
	return nil
}

func errWorkflowStoreClosed() error {
	return runstream.Errorf(runstream.CodeUnavailable, "workflow store is closed")
}

// lock takes the mutex and fails when the store is closed; on success the
// caller unlocks.
func (s *WorkflowStore) lock() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errWorkflowStoreClosed()
	}
	return nil
}

// now is the store's clock in UTC, truncated to microseconds as every
// backend stores times.
func (s *WorkflowStore) now() time.Time { return s.cfg.now().UTC().Truncate(time.Microsecond) }

// CreateWorkflow stores w with its first version v.
func (s *WorkflowStore) CreateWorkflow(_ context.Context, w workflow.Workflow, v workflow.Version) (workflow.Workflow, workflow.Version, error) {
	switch {
	case w.ID == "":
		return workflow.Workflow{}, workflow.Version{}, runstream.Errorf(runstream.CodeInvalidArgument, "create workflow: id is required")
	case w.OwnerID == "":
		return workflow.Workflow{}, workflow.Version{}, runstream.Errorf(runstream.CodeInvalidArgument, "create workflow: owner is required")
	case v.ID == "":
		return workflow.Workflow{}, workflow.Version{}, runstream.Errorf(runstream.CodeInvalidArgument, "create workflow: version id is required")
	}
	for _, id := range []struct{ name, id string }{{"id", w.ID}, {"owner", w.OwnerID}, {"version id", v.ID}} {
		if err := workflow.CheckIDLength("create workflow", id.name, id.id); err != nil {
			return workflow.Workflow{}, workflow.Version{}, err
		}
	}
	if err := s.lock(); err != nil {
		return workflow.Workflow{}, workflow.Version{}, err
	}
	defer s.mu.Unlock()
	if _, ok := s.workflows[w.ID]; ok {
		return workflow.Workflow{}, workflow.Version{}, runstream.Errorf(runstream.CodeConflict, "create workflow: workflow %q exists", w.ID)
	}
	if _, ok := s.versions[v.ID]; ok {
		return workflow.Workflow{}, workflow.Version{}, runstream.Errorf(runstream.CodeConflict, "create workflow: version %q exists", v.ID)
	}
	now := s.now()
	w.CreatedAt = orDefault(w.CreatedAt, now)
	w.UpdatedAt = orDefault(w.UpdatedAt, w.CreatedAt)
	w.LatestVersionID = v.ID
	v.WorkflowID, v.Number = w.ID, 1
	v.CreatedAt = orDefault(v.CreatedAt, w.CreatedAt)
	v.Definition = bytes.Clone(v.Definition)
	s.workflows[w.ID] = &workflowRow{w: w, versions: 1}
	s.versions[v.ID] = v
	return w, cloneVersion(v), nil
}

// GetWorkflow returns the workflow if owner sees it.
func (s *WorkflowStore) GetWorkflow(_ context.Context, id string, owner runstream.Owner) (workflow.Workflow, error) {
	if err := runstream.CheckOwner(owner); err != nil {
		return workflow.Workflow{}, err
	}
	if err := s.lock(); err != nil {
		return workflow.Workflow{}, err
	}
	defer s.mu.Unlock()
	row, err := s.workflowLocked(id, owner)
	if err != nil {
		return workflow.Workflow{}, err
	}
	return row.w, nil
}

func (s *WorkflowStore) workflowLocked(id string, owner runstream.Owner) (*workflowRow, error) {
	row, ok := s.workflows[id]
	if !ok || !owner.Sees(row.w.OwnerID) {
		return nil, workflow.NotFound(id)
	}
	return row, nil
}

// ListWorkflows returns the workflows owner sees, newest first.
func (s *WorkflowStore) ListWorkflows(_ context.Context, p workflow.ListWorkflowsParams) ([]workflow.Workflow, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var rows []workflow.Workflow
	for _, row := range s.workflows {
		if p.Owner.Sees(row.w.OwnerID) {
			rows = append(rows, row.w)
		}
	}
	key := func(w workflow.Workflow) listKey { return listKey{w.CreatedAt, w.ID} }
	return pageNewest(rows, key, p.BeforeID, p.Limit, nil)
}

// AddVersion stores v as the latest version of its workflow.
func (s *WorkflowStore) AddVersion(_ context.Context, v workflow.Version, owner runstream.Owner) (workflow.Version, error) {
	if err := runstream.CheckOwner(owner); err != nil {
		return workflow.Version{}, err
	}
	if v.ID == "" {
		return workflow.Version{}, runstream.Errorf(runstream.CodeInvalidArgument, "add version: id is required")
	}
	if err := workflow.CheckIDLength("add version", "id", v.ID); err != nil {
		return workflow.Version{}, err
	}
	if err := s.lock(); err != nil {
		return workflow.Version{}, err
	}
	defer s.mu.Unlock()
	row, err := s.workflowLocked(v.WorkflowID, owner)
	if err != nil {
		return workflow.Version{}, err
	}
	if _, ok := s.versions[v.ID]; ok {
		return workflow.Version{}, runstream.Errorf(runstream.CodeConflict, "add version: version %q exists", v.ID)
	}
	row.versions++
	v.Number = row.versions
	v.CreatedAt = orDefault(v.CreatedAt, s.now())
	v.Definition = bytes.Clone(v.Definition)
	s.versions[v.ID] = v
	row.w.LatestVersionID, row.w.UpdatedAt = v.ID, v.CreatedAt
	return cloneVersion(v), nil
}

// GetVersion returns a version of a workflow owner sees.
func (s *WorkflowStore) GetVersion(_ context.Context, workflowID, versionID string, owner runstream.Owner) (workflow.Version, error) {
	if err := runstream.CheckOwner(owner); err != nil {
		return workflow.Version{}, err
	}
	if err := s.lock(); err != nil {
		return workflow.Version{}, err
	}
	defer s.mu.Unlock()
	if _, err := s.workflowLocked(workflowID, owner); err != nil {
		return workflow.Version{}, err
	}
	v, ok := s.versions[versionID]
	if !ok || v.WorkflowID != workflowID {
		return workflow.Version{}, runstream.Errorf(runstream.CodeWorkflowVersionNotFound, "workflow %q has no version %q", workflowID, versionID)
	}
	return cloneVersion(v), nil
}

// CreateRun stores r and appends its first events.
func (s *WorkflowStore) CreateRun(_ context.Context, r workflow.Run, events []workflow.NewEvent) (workflow.Run, []workflow.Envelope, error) {
	if err := workflow.CheckNewRun(r, events); err != nil {
		return workflow.Run{}, nil, err
	}
	if err := s.lock(); err != nil {
		return workflow.Run{}, nil, err
	}
	defer s.mu.Unlock()
	if _, err := s.workflowLocked(r.WorkflowID, runstream.OwnedBy(r.OwnerID)); err != nil {
		return workflow.Run{}, nil, err
	}
	if v, ok := s.versions[r.VersionID]; !ok || v.WorkflowID != r.WorkflowID {
		return workflow.Run{}, nil, runstream.Errorf(runstream.CodeWorkflowVersionNotFound, "workflow %q has no version %q", r.WorkflowID, r.VersionID)
	}
	if _, ok := s.runs[r.ID]; ok {
		return workflow.Run{}, nil, runstream.Errorf(runstream.CodeConflict, "create run: run %q exists", r.ID)
	}
	now := s.now()
	r = cloneRun(r)
	r.Status = cmp.Or(r.Status, workflow.StatusQueued)
	r.LastSeq = 0
	r.CreatedAt = orDefault(r.CreatedAt, now)
	r.UpdatedAt = orDefault(r.UpdatedAt, r.CreatedAt)
	row := &runRow{r: r, artifacts: map[string]workflow.Artifact{}}
	out := row.appendLocked(events, now)
	s.runs[r.ID] = row
	return cloneRun(row.r), out, nil
}

// GetRun returns the run if owner sees it.
func (s *WorkflowStore) GetRun(_ context.Context, id string, owner runstream.Owner) (workflow.Run, error) {
	if err := runstream.CheckOwner(owner); err != nil {
		return workflow.Run{}, err
	}
	if err := s.lock(); err != nil {
		return workflow.Run{}, err
	}
	defer s.mu.Unlock()
	row, err := s.runLocked(id, owner)
	if err != nil {
		return workflow.Run{}, err
	}
	return cloneRun(row.r), nil
}

func (s *WorkflowStore) runLocked(id string, owner runstream.Owner) (*runRow, error) {
	row, ok := s.runs[id]
	if !ok || !owner.Sees(row.r.OwnerID) {
		return nil, workflow.RunNotFound(id)
	}
	return row, nil
}

// CountRuns returns how many runs are in each of statuses.
func (s *WorkflowStore) CountRuns(_ context.Context, statuses []workflow.RunStatus) (map[workflow.RunStatus]int, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := make(map[workflow.RunStatus]int, len(statuses))
	for _, row := range s.runs {
		if slices.Contains(statuses, row.r.Status) {
			out[row.r.Status]++
		}
	}
	return out, nil
}

// ListRuns returns the runs owner sees that match the filters, newest
// first.
func (s *WorkflowStore) ListRuns(_ context.Context, p workflow.ListRunsParams) ([]workflow.Run, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var rows []workflow.Run
	for _, row := range s.runs {
		if p.Owner.Sees(row.r.OwnerID) {
			rows = append(rows, row.r)
		}
	}
	key := func(r workflow.Run) listKey { return listKey{r.CreatedAt, r.ID} }
	// The cursor is looked up among every visible run, not only the
	// matching ones: a run may have left the status filter since the
	// previous page.
	page, err := pageNewest(rows, key, p.BeforeID, p.Limit, func(r workflow.Run) bool {
		return (p.WorkflowID == "" || r.WorkflowID == p.WorkflowID) && (p.Status == "" || r.Status == p.Status)
	})
	if err != nil {
		return nil, err
	}
	for i := range page {
		page[i] = cloneRun(page[i])
	}
	return page, nil
}

// Append appends p.Events to a run, all or nothing.
func (s *WorkflowStore) Append(_ context.Context, p workflow.AppendParams) ([]workflow.Envelope, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	row, err := s.runLocked(p.RunID, runstream.AnyOwner)
	if err != nil {
		return nil, err
	}
	if err := p.Accepts(row.r); err != nil {
		return nil, err
	}
	for _, a := range p.Artifacts {
		if _, ok := row.artifacts[a.ID]; ok {
			return nil, runstream.Errorf(runstream.CodeConflict, "append: run %q has an artifact %q", p.RunID, a.ID)
		}
	}
	now := s.now()
	if t := p.ResumeToken; t != nil {
		row.tokens = slices.DeleteFunc(row.tokens, func(old workflow.ResumeToken) bool { return old.ConsumedAt.IsZero() })
		tok := cloneToken(*t)
		tok.RunID, tok.ConsumedAt = p.RunID, time.Time{}
		row.tokens = append(row.tokens, tok)
	}
	for _, a := range p.Artifacts {
		a.RunID = p.RunID
		a.CreatedAt = orDefault(a.CreatedAt, now)
		row.artifacts[a.ID] = a
	}
	row.storeOutputsLocked(p.NodeOutputs)
	return row.appendLocked(p.Events, now), nil
}

// appendLocked appends checked events and returns copies of their
// envelopes.
func (row *runRow) appendLocked(events []workflow.NewEvent, now time.Time) []workflow.Envelope {
	out := make([]workflow.Envelope, 0, len(events))
	for _, e := range events {
		e.Data = bytes.Clone(e.Data)
		env := workflow.NewEnvelope(row.r, int64(len(row.events))+1, e, now)
		row.events = append(row.events, env)
		workflow.ApplyEvent(&row.r, env)
		out = append(out, cloneEnvelope(env))
	}
	return out
}

// ListEvents returns up to limit events of the run after afterSeq; an
// unknown run fails with CodeWorkflowRunNotFound.
func (s *WorkflowStore) ListEvents(_ context.Context, runID string, afterSeq int64, limit int) ([]workflow.Envelope, error) {
	if err := workflow.CheckEventPage(afterSeq, limit); err != nil {
		return nil, err
	}
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	row, err := s.runLocked(runID, runstream.AnyOwner)
	if err != nil {
		return nil, err
	}
	if afterSeq >= int64(len(row.events)) {
		return []workflow.Envelope{}, nil
	}
	page := row.events[afterSeq:min(int64(len(row.events)), afterSeq+int64(limit))]
	out := make([]workflow.Envelope, len(page))
	for i, e := range page {
		out[i] = cloneEnvelope(e)
	}
	return out, nil
}

// Resume consumes the token whose hash is p.Hash and appends p.Events.
// The token is judged before the run: an unknown hash fails with
// CodeWorkflowResumeTokenInvalid, a consumed one with
// CodeWorkflowResumeTokenUsed, an expired one (p.Now >= ExpiresAt) with
// CodeWorkflowResumeTokenExpired; only a usable token on a run that is not
// awaiting input fails with CodeWorkflowRunNotAwaitingInput. A failed call
// consumes nothing and appends nothing.
func (s *WorkflowStore) Resume(_ context.Context, p workflow.ResumeParams) ([]workflow.Envelope, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	row, err := s.runLocked(p.RunID, p.Owner)
	if err != nil {
		return nil, err
	}
	i := -1
	for j, t := range row.tokens {
		// Every token is compared in full, so the time taken does not
		// tell how much of a hash matched or which token did.
		if subtle.ConstantTimeCompare(t.Hash, p.Hash) == 1 {
			i = j
		}
	}
	switch {
	case i < 0:
		return nil, runstream.Errorf(runstream.CodeWorkflowResumeTokenInvalid, "resume: the token does not match run %q", p.RunID)
	case !row.tokens[i].ConsumedAt.IsZero():
		return nil, runstream.Errorf(runstream.CodeWorkflowResumeTokenUsed, "resume: the token of run %q was already used", p.RunID)
	case !p.Now.Before(row.tokens[i].ExpiresAt):
		return nil, runstream.Errorf(runstream.CodeWorkflowResumeTokenExpired, "resume: the token of run %q has expired", p.RunID)
	case row.r.Status != workflow.StatusAwaitingInput:
		return nil, workflow.NotAwaitingInput(p.RunID, row.r.Status)
	}
	row.tokens[i].ConsumedAt = p.Now.UTC().Truncate(time.Microsecond)
	row.storeOutputsLocked(p.NodeOutputs)
	return row.appendLocked(p.Events, s.now()), nil
}

// PendingResumeToken returns the run's unconsumed token, expired or not:
// CodeWorkflowResumeTokenInvalid when there is none,
// CodeWorkflowRunNotFound for an unknown run.
func (s *WorkflowStore) PendingResumeToken(_ context.Context, runID string) (workflow.ResumeToken, error) {
	if err := s.lock(); err != nil {
		return workflow.ResumeToken{}, err
	}
	defer s.mu.Unlock()
	row, err := s.runLocked(runID, runstream.AnyOwner)
	if err != nil {
		return workflow.ResumeToken{}, err
	}
	for _, t := range row.tokens {
		if t.ConsumedAt.IsZero() {
			return cloneToken(t), nil
		}
	}
	return workflow.ResumeToken{}, runstream.Errorf(runstream.CodeWorkflowResumeTokenInvalid, "run %q has no pending resume token", runID)
}

// GetArtifact returns an artifact of a run, or CodeNotFound.
func (s *WorkflowStore) GetArtifact(_ context.Context, runID, artifactID string) (workflow.Artifact, error) {
	if err := s.lock(); err != nil {
		return workflow.Artifact{}, err
	}
	defer s.mu.Unlock()
	if row, ok := s.runs[runID]; ok {
		if a, ok := row.artifacts[artifactID]; ok {
			return a, nil
		}
	}
	return workflow.Artifact{}, runstream.Errorf(runstream.CodeNotFound, "run %q has no artifact %q", runID, artifactID)
}

// listKey orders listings newest first: CreatedAt descending, then ID
// descending.
type listKey struct {
	createdAt time.Time
	id        string
}

func (k listKey) newerFirst(o listKey) int {
	if c := o.createdAt.Compare(k.createdAt); c != 0 {
		return c
	}
	return strings.Compare(o.id, k.id)
}

// pageNewest sorts rows newest first and returns up to limit of those
// after the row named beforeID that keep accepts (all when keep is nil).
// A beforeID that names none of rows fails with
// CodeInvalidArgument, whether unknown or another owner's.
func pageNewest[T any](rows []T, key func(T) listKey, beforeID string, limit int, keep func(T) bool) ([]T, error) {
	slices.SortFunc(rows, func(a, b T) int { return key(a).newerFirst(key(b)) })
	start := 0
	if beforeID != "" {
		i := slices.IndexFunc(rows, func(r T) bool { return key(r).id == beforeID })
		if i < 0 {
			return nil, runstream.Errorf(runstream.CodeInvalidArgument, "unknown cursor %q", beforeID)
		}
		start = i + 1
	}
	out := []T{}
	for _, r := range rows[start:] {
		if len(out) == limit {
			break
		}
		if keep == nil || keep(r) {
			out = append(out, r)
		}
	}
	return out, nil
}

// orDefault returns t truncated to microseconds, or def when t is zero.
func orDefault(t, def time.Time) time.Time {
	if t.IsZero() {
		return def
	}
	return t.Truncate(time.Microsecond)
}

func cloneVersion(v workflow.Version) workflow.Version {
	v.Definition = bytes.Clone(v.Definition)
	return v
}

func cloneRun(r workflow.Run) workflow.Run {
	r.Input, r.Output, r.Error = bytes.Clone(r.Input), bytes.Clone(r.Output), bytes.Clone(r.Error)
	return r
}

func cloneEnvelope(e workflow.Envelope) workflow.Envelope {
	e.Data = bytes.Clone(e.Data)
	return e
}

func cloneToken(t workflow.ResumeToken) workflow.ResumeToken {
	t.Hash, t.Actions, t.FormSchema = bytes.Clone(t.Hash), slices.Clone(t.Actions), bytes.Clone(t.FormSchema)
	return t
}
