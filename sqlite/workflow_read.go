package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

// GetWorkflow returns the workflow if owner sees it.
func (s *WorkflowStore) GetWorkflow(ctx context.Context, id string, owner runstream.Owner) (workflow.Workflow, error) {
	if err := firstError(s.checkOpen(), runstream.CheckOwner(owner)); err != nil {
		return workflow.Workflow{}, err
	}
	w, err := scanWorkflow(s.getWorkflow.QueryRowContext(ctx, ownerArgs(id, owner)...))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return workflow.Workflow{}, workflow.NotFound(id)
	case err != nil:
		return workflow.Workflow{}, sqlError("sqlite: get workflow", err)
	}
	return w, nil
}

// ListWorkflows returns the workflows owner sees, newest first (CreatedAt
// descending, then ID descending), after the workflow p.BeforeID.
func (s *WorkflowStore) ListWorkflows(ctx context.Context, p workflow.ListWorkflowsParams) ([]workflow.Workflow, error) {
	if err := firstError(s.checkOpen(), p.Validate()); err != nil {
		return nil, err
	}
	before, err := s.cursor(ctx, s.workflowCursor, p.Owner, p.BeforeID)
	if err != nil {
		return nil, err
	}
	q := workflowsQuery(p, before)
	rows, err := s.db.reads.query(ctx, q.sql, q.args...)
	if err != nil {
		return nil, sqlError("sqlite: list workflows", err)
	}
	defer rows.Close()
	out := []workflow.Workflow{}
	for rows.Next() {
		wf, err := scanWorkflow(rows)
		if err != nil {
			return nil, sqlError("sqlite: list workflows", err)
		}
		out = append(out, wf)
	}
	if err := rows.Err(); err != nil {
		return nil, sqlError("sqlite: list workflows", err)
	}
	return out, nil
}

// GetVersion returns a version of a workflow owner sees.
func (s *WorkflowStore) GetVersion(ctx context.Context, workflowID, versionID string, owner runstream.Owner) (workflow.Version, error) {
	if err := firstError(s.checkOpen(), runstream.CheckOwner(owner)); err != nil {
		return workflow.Version{}, err
	}
	var (
		id      sql.NullString
		number  sql.NullInt64
		created sql.NullInt64
		v       = workflow.Version{WorkflowID: workflowID}
	)
	err := s.getVersion.QueryRowContext(ctx, append(ownerArgs(workflowID, owner), versionID)...).Scan(&id, &number, (*[]byte)(&v.Definition), &created)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return workflow.Version{}, workflow.NotFound(workflowID)
	case err != nil:
		return workflow.Version{}, sqlError("sqlite: get version", err)
	case !id.Valid:
		return workflow.Version{}, runstream.Errorf(runstream.CodeWorkflowVersionNotFound, "workflow %q has no version %q", workflowID, versionID)
	}
	v.ID, v.Number, v.CreatedAt = id.String, int(number.Int64), fromNullMicros(created)
	return v, nil
}

// GetRun returns the run if owner sees it.
func (s *WorkflowStore) GetRun(ctx context.Context, id string, owner runstream.Owner) (workflow.Run, error) {
	if err := firstError(s.checkOpen(), runstream.CheckOwner(owner)); err != nil {
		return workflow.Run{}, err
	}
	r, err := scanRun(s.getRun.QueryRowContext(ctx, ownerArgs(id, owner)...))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return workflow.Run{}, workflow.RunNotFound(id)
	case err != nil:
		return workflow.Run{}, sqlError("sqlite: get run", err)
	}
	return r, nil
}

// CountRuns returns how many runs are in each of statuses, from the
// status index, in one query. Every status asked for is in the map, 0
// when no run has it.
func (s *WorkflowStore) CountRuns(ctx context.Context, statuses []workflow.RunStatus) (map[workflow.RunStatus]int, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	out := make(map[workflow.RunStatus]int, len(statuses))
	if len(statuses) == 0 {
		return out, nil
	}
	args := make([]any, len(statuses))
	for i, status := range statuses {
		out[status] = 0
		args[i] = string(status)
	}
	q := "SELECT status, count(*) FROM workflow_runs WHERE status IN (" + strings.Repeat(", ?", len(statuses))[2:] + ") GROUP BY status"
	rows, err := s.db.reads.query(ctx, q, args...)
	if err != nil {
		return nil, sqlError("sqlite: count runs", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			status string
			n      int
		)
		if err := rows.Scan(&status, &n); err != nil {
			return nil, sqlError("sqlite: count runs", err)
		}
		out[workflow.RunStatus(status)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, sqlError("sqlite: count runs", err)
	}
	return out, nil
}

// ListRuns returns the runs owner sees that match the filters, newest
// first. The cursor run is looked up among every run owner sees, matching
// the filters or not.
func (s *WorkflowStore) ListRuns(ctx context.Context, p workflow.ListRunsParams) ([]workflow.Run, error) {
	if err := firstError(s.checkOpen(), p.Validate()); err != nil {
		return nil, err
	}
	before, err := s.cursor(ctx, s.runCursor, p.Owner, p.BeforeID)
	if err != nil {
		return nil, err
	}
	q := runsQuery(p, before)
	rows, err := s.db.reads.query(ctx, q.sql, q.args...)
	if err != nil {
		return nil, sqlError("sqlite: list runs", err)
	}
	defer rows.Close()
	out := []workflow.Run{}
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, sqlError("sqlite: list runs", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, sqlError("sqlite: list runs", err)
	}
	return out, nil
}

// cursor is the created_at of the row beforeID, read by lookup (created_at
// by id and ownerArgs), or 0 when beforeID is "". A cursor owner does not
// see fails with CodeInvalidArgument, as an unknown one does.
func (s *WorkflowStore) cursor(ctx context.Context, lookup *sql.Stmt, owner runstream.Owner, beforeID string) (int64, error) {
	if beforeID == "" {
		return 0, nil
	}
	var created int64
	err := lookup.QueryRowContext(ctx, ownerArgs(beforeID, owner)...).Scan(&created)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, runstream.Errorf(runstream.CodeInvalidArgument, "unknown cursor %q", beforeID)
	case err != nil:
		return 0, sqlError("sqlite: look up cursor", err)
	}
	return created, nil
}

// workflowsQuery selects a page of ListWorkflows; before is the created_at
// of the cursor row p.BeforeID.
func workflowsQuery(p workflow.ListWorkflowsParams, before int64) query {
	w := where{}
	if !p.Owner.All() {
		w.add("owner_id = ?", p.Owner.UserID())
	}
	return newestFirst("SELECT "+workflowColumns+" FROM workflows", w, p.BeforeID, before, p.Limit)
}

// runsQuery selects a page of ListRuns; before is the created_at of the
// cursor row p.BeforeID.
func runsQuery(p workflow.ListRunsParams, before int64) query {
	w := where{}
	if !p.Owner.All() {
		w.add("owner_id = ?", p.Owner.UserID())
	}
	if p.WorkflowID != "" {
		w.add("workflow_id = ?", p.WorkflowID)
	}
	if p.Status != "" {
		w.add("status = ?", string(p.Status))
	}
	return newestFirst("SELECT "+runColumns+" FROM workflow_runs", w, p.BeforeID, before, p.Limit)
}

// newestFirst completes a listing query: w's conditions, the rows after
// the cursor row (beforeID, created at before) when beforeID is set, newest
// first (created_at, then id, descending), limit rows.
func newestFirst(selectFrom string, w where, beforeID string, before int64, limit int) query {
	if beforeID != "" {
		w.add("(created_at, id) < (?, ?)", before, beforeID)
	}
	q := selectFrom
	if len(w.conds) > 0 {
		q += " WHERE " + w.String()
	}
	return query{sql: q + " ORDER BY created_at DESC, id DESC LIMIT ?", args: append(w.args, limit)}
}

// ListEvents returns up to limit events of the run after afterSeq,
// ascending; an unknown run fails with CodeWorkflowRunNotFound.
func (s *WorkflowStore) ListEvents(ctx context.Context, runID string, afterSeq int64, limit int) ([]workflow.Envelope, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if err := workflow.CheckEventPage(afterSeq, limit); err != nil {
		return nil, err
	}
	rows, err := s.listEvents.QueryContext(ctx, afterSeq, runID, limit)
	if err != nil {
		return nil, sqlError("sqlite: list events", err)
	}
	defer rows.Close()
	var (
		out                   []workflow.Envelope // grown by append: a follower's most common reads find none or a few
		found                 bool
		workflowID, versionID string
		zones                 zoneCache
		// Declared once: Scan's pointers make them escape, and the
		// RawBytes reuse their buffers from row to row.
		wf, ver, event, node, nodeRun sql.RawBytes
		seq, ts, offset               sql.NullInt64
		data                          []byte
	)
	for rows.Next() {
		if err := rows.Scan(&wf, &ver, &seq, &event, &node, &nodeRun, &ts, &offset, &data); err != nil {
			return nil, sqlError("sqlite: list events", err)
		}
		if !found {
			found, workflowID, versionID = true, string(wf), string(ver)
		}
		if !seq.Valid { // the run has no event after the cursor
			break
		}
		out = append(out, workflow.Envelope{
			SchemaVersion: workflow.SchemaVersion,
			RunID:         runID,
			WorkflowID:    workflowID,
			VersionID:     versionID,
			Seq:           seq.Int64,
			Event:         eventType(event),
			NodeID:        string(node),
			NodeRunID:     string(nodeRun),
			Timestamp:     time.UnixMicro(ts.Int64).In(zones.zone(int(offset.Int64))),
			Data:          data,
		})
	}
	if err := rows.Err(); err != nil {
		return nil, sqlError("sqlite: list events", err)
	}
	if !found {
		return nil, workflow.RunNotFound(runID)
	}
	return out, nil
}

// eventTypes maps the stored text of each known event to its constant, so
// that reading a page does not allocate a string per event type.
var eventTypes = func() map[string]workflow.EventType {
	m := map[string]workflow.EventType{}
	for _, t := range workflow.Events() {
		m[string(t)] = t
	}
	return m
}()

func eventType(b []byte) workflow.EventType {
	if t, ok := eventTypes[string(b)]; ok { // no allocation for the lookup
		return t
	}
	return workflow.EventType(b)
}

// zoneCache gives the location of a UTC offset: UTC for 0, else an unnamed
// fixed zone, made once per offset seen.
type zoneCache map[int]*time.Location

func (c *zoneCache) zone(offset int) *time.Location {
	if offset == 0 {
		return time.UTC
	}
	if loc, ok := (*c)[offset]; ok {
		return loc
	}
	if *c == nil {
		*c = zoneCache{}
	}
	loc := time.FixedZone("", offset)
	(*c)[offset] = loc
	return loc
}

// PendingResumeToken returns the run's unconsumed token, expired or not:
// CodeWorkflowResumeTokenInvalid when there is none,
// CodeWorkflowRunNotFound for an unknown run.
func (s *WorkflowStore) PendingResumeToken(ctx context.Context, runID string) (workflow.ResumeToken, error) {
	if err := s.checkOpen(); err != nil {
		return workflow.ResumeToken{}, err
	}
	var (
		node, nodeRun sql.NullString
		actions       sql.NullString
		expires       sql.NullInt64
		t             = workflow.ResumeToken{RunID: runID}
	)
	err := s.pendingToken.QueryRowContext(ctx, runID).Scan(&node, &nodeRun, &t.Hash, &actions, (*[]byte)(&t.FormSchema), &expires)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return workflow.ResumeToken{}, workflow.RunNotFound(runID)
	case err != nil:
		return workflow.ResumeToken{}, sqlError("sqlite: pending resume token", err)
	case !expires.Valid:
		return workflow.ResumeToken{}, runstream.Errorf(runstream.CodeWorkflowResumeTokenInvalid, "run %q has no pending resume token", runID)
	}
	if err := json.Unmarshal([]byte(actions.String), &t.Actions); err != nil {
		return workflow.ResumeToken{}, sqlError("sqlite: pending resume token: actions", err)
	}
	t.NodeID, t.NodeRunID, t.ExpiresAt = node.String, nodeRun.String, fromMicros(expires.Int64)
	return t, nil
}

// GetArtifact returns an artifact of a run, or CodeNotFound.
func (s *WorkflowStore) GetArtifact(ctx context.Context, runID, artifactID string) (workflow.Artifact, error) {
	if err := s.checkOpen(); err != nil {
		return workflow.Artifact{}, err
	}
	a := workflow.Artifact{ID: artifactID, RunID: runID}
	var created int64
	err := s.getArtifact.QueryRowContext(ctx, runID, artifactID).Scan(&a.NodeID, &a.Name, &a.MimeType, &a.SizeBytes, &a.SHA256, &created)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return workflow.Artifact{}, runstream.Errorf(runstream.CodeNotFound, "run %q has no artifact %q", runID, artifactID)
	case err != nil:
		return workflow.Artifact{}, sqlError("sqlite: get artifact", err)
	}
	a.CreatedAt = fromMicros(created)
	return a, nil
}

// scanWorkflow reads the workflowColumns of one row.
func scanWorkflow(row interface{ Scan(...any) error }) (workflow.Workflow, error) {
	var (
		w                workflow.Workflow
		created, updated int64
	)
	if err := row.Scan(&w.ID, &w.OwnerID, &w.Name, &w.Description, &w.LatestVersionID, &created, &updated); err != nil {
		return workflow.Workflow{}, err
	}
	w.CreatedAt, w.UpdatedAt = fromMicros(created), fromMicros(updated)
	return w, nil
}

// scanRun reads the runColumns of one row.
func scanRun(row interface{ Scan(...any) error }) (workflow.Run, error) {
	var (
		r                               workflow.Run
		status                          string
		created, updated                int64
		started, finished, leaseExpires sql.NullInt64
	)
	if err := row.Scan(&r.ID, &r.WorkflowID, &r.VersionID, &r.OwnerID, &status,
		(*[]byte)(&r.Input), (*[]byte)(&r.Output), (*[]byte)(&r.Error), &r.LastSeq,
		&created, &updated, &started, &finished, &r.LeaseOwner, &leaseExpires); err != nil {
		return workflow.Run{}, err
	}
	r.Status = workflow.RunStatus(status)
	r.CreatedAt, r.UpdatedAt = fromMicros(created), fromMicros(updated)
	r.StartedAt, r.FinishedAt, r.LeaseExpiresAt = fromNullMicros(started), fromNullMicros(finished), fromNullMicros(leaseExpires)
	return r, nil
}
