package postgres

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

// runColumns are the columns scanRun reads, in its order.
const runColumns = `id, workflow_id, version_id, owner_id, status, input, output, error, last_seq,
	created_at, updated_at, started_at, finished_at, lease_owner, lease_expires_at`

// scanRun reads a row of runColumns.
func scanRun(row pgx.Row) (workflow.Run, error) {
	var (
		r                          workflow.Run
		status                     string
		input, output, errObj      []byte
		started, finished, leaseTo *time.Time
	)
	err := row.Scan(&r.ID, &r.WorkflowID, &r.VersionID, &r.OwnerID, &status, &input, &output, &errObj, &r.LastSeq,
		&r.CreatedAt, &r.UpdatedAt, &started, &finished, &r.LeaseOwner, &leaseTo)
	r.Status, r.Input, r.Output, r.Error = workflow.RunStatus(status), input, output, errObj
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	r.StartedAt, r.FinishedAt, r.LeaseExpiresAt = utcOrZero(started), utcOrZero(finished), utcOrZero(leaseTo)
	return r, err
}

// CreateRun stores r and appends its first events, in one transaction.
func (s *WorkflowStore) CreateRun(ctx context.Context, r workflow.Run, events []workflow.NewEvent) (workflow.Run, []workflow.Envelope, error) {
	if err := workflow.CheckNewRun(r, events); err != nil {
		return workflow.Run{}, nil, err
	}
	if err := storableEvents(events); err != nil {
		return workflow.Run{}, nil, err
	}
	if err := firstError(checkText("create run: id", r.ID), checkText("create run: owner", r.OwnerID),
		checkText("create run: lease owner", r.LeaseOwner), checkText("create run: input", string(r.Input)),
		checkText("create run: output", string(r.Output)), checkText("create run: error", string(r.Error))); err != nil {
		return workflow.Run{}, nil, err
	}
	if err := s.checkOpen(); err != nil {
		return workflow.Run{}, nil, err
	}
	if !lookupable(r.WorkflowID) {
		return workflow.Run{}, nil, workflow.NotFound(r.WorkflowID)
	}
	t := storeNow()
	r = cloneRun(r)
	r.Status = cmp.Or(r.Status, workflow.StatusQueued)
	r.LastSeq = 0
	r.CreatedAt = orNow(r.CreatedAt, t)
	r.UpdatedAt = orNow(r.UpdatedAt, r.CreatedAt)
	r.StartedAt, r.FinishedAt = r.StartedAt.Truncate(time.Microsecond), r.FinishedAt.Truncate(time.Microsecond)
	r.LeaseExpiresAt = r.LeaseExpiresAt.Truncate(time.Microsecond)
	var w runWrites
	envs := w.apply(&r, events, t)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var hasVersion bool
		err := tx.QueryRow(ctx, `SELECT
			EXISTS (SELECT 1 FROM workflow_versions v WHERE v.id = $2 AND v.workflow_id = w.id)
			FROM workflows w WHERE w.id = $1 AND w.owner_id = $3`, r.WorkflowID, r.VersionID, r.OwnerID).Scan(&hasVersion)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return workflow.NotFound(r.WorkflowID)
		case err != nil:
			return err
		case !hasVersion:
			return runstream.Errorf(runstream.CodeWorkflowVersionNotFound, "workflow %q has no version %q", r.WorkflowID, r.VersionID)
		}
		tag, err := tx.Exec(ctx, `INSERT INTO workflow_runs (id, workflow_id, version_id, owner_id, status,
			input, output, error, last_seq, created_at, updated_at, started_at, finished_at, lease_owner, lease_expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) ON CONFLICT (id) DO NOTHING`,
			r.ID, r.WorkflowID, r.VersionID, r.OwnerID, string(r.Status), nullText(r.Input), nullText(r.Output), nullText(r.Error),
			r.LastSeq, r.CreatedAt, r.UpdatedAt, nullTime(r.StartedAt), nullTime(r.FinishedAt), r.LeaseOwner, nullTime(r.LeaseExpiresAt))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return runstream.Errorf(runstream.CodeConflict, "create run: run %q exists", r.ID)
		}
		return w.send(ctx, tx)
	})
	if err != nil {
		return workflow.Run{}, nil, txError(err, "create run")
	}
	return r, envs, nil
}

// GetRun returns the run if owner sees it.
func (s *WorkflowStore) GetRun(ctx context.Context, id string, owner runstream.Owner) (workflow.Run, error) {
	if err := runstream.CheckOwner(owner); err != nil {
		return workflow.Run{}, err
	}
	if err := s.checkOpen(); err != nil {
		return workflow.Run{}, err
	}
	if !lookupable(id) || !ownerStorable(owner) {
		return workflow.Run{}, workflow.RunNotFound(id)
	}
	r, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+runColumns+` FROM workflow_runs WHERE id = $1 AND `+ownerCond,
		ownerArgs(id, owner)...))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return workflow.Run{}, workflow.RunNotFound(id)
	case err != nil:
		return workflow.Run{}, dbError(err, "get run")
	}
	return r, nil
}

// CountRuns returns how many runs are in each of statuses, in one query
// on the status index.
func (s *WorkflowStore) CountRuns(ctx context.Context, statuses []workflow.RunStatus) (map[workflow.RunStatus]int, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	names := make([]string, len(statuses))
	for i, st := range statuses {
		names[i] = string(st)
	}
	rows, err := s.pool.Query(ctx, "SELECT status, count(*) FROM workflow_runs WHERE status = ANY($1) GROUP BY status", names)
	if err != nil {
		return nil, dbError(err, "count runs")
	}
	out := make(map[workflow.RunStatus]int, len(statuses))
	for rows.Next() {
		var status string
		var n int
		if err := rows.Scan(&status, &n); err != nil {
			rows.Close()
			return nil, dbError(err, "count runs")
		}
		out[workflow.RunStatus(status)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(err, "count runs")
	}
	return out, nil
}

// ListRuns returns the runs owner sees that match the filters, newest
// first. The cursor is looked up among every run owner sees, not only the
// matching ones: a run may have left the status filter since the previous
// page.
func (s *WorkflowStore) ListRuns(ctx context.Context, p workflow.ListRunsParams) ([]workflow.Run, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	q, ok, err := newestFirst(ctx, s.pool, "workflow_runs", p.Owner, p.BeforeID)
	if err != nil || !ok || !lookupable(p.WorkflowID) {
		return []workflow.Run{}, err
	}
	if p.WorkflowID != "" {
		q.add("workflow_id = ?", p.WorkflowID)
	}
	if p.Status != "" {
		q.add("status = ?", string(p.Status))
	}
	rows, err := s.pool.Query(ctx, q.page(runColumns, "workflow_runs", p.Limit), q.args...)
	if err != nil {
		return nil, dbError(err, "list runs")
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (workflow.Run, error) { return scanRun(row) })
	if err != nil {
		return nil, dbError(err, "list runs")
	}
	return append([]workflow.Run{}, out...), nil
}

// ListEvents returns up to limit events of the run after afterSeq, with
// one query that also tells an unknown run from one without such events.
func (s *WorkflowStore) ListEvents(ctx context.Context, runID string, afterSeq int64, limit int) ([]workflow.Envelope, error) {
	if err := workflow.CheckEventPage(afterSeq, limit); err != nil {
		return nil, err
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if !lookupable(runID) {
		return nil, workflow.RunNotFound(runID)
	}
	// The columns of a missing event are COALESCEd so that rows scan into
	// plain values; the run's ids and the event name are read without a
	// copy: this is the hot path of every replay.
	rows, err := s.pool.Query(ctx, `SELECT r.workflow_id, r.version_id,
			coalesce(e.seq, 0), coalesce(e.event, ''), coalesce(e.node_id, ''), coalesce(e.node_run_id, ''),
			coalesce(e.ts, 'epoch'), coalesce(e.ts_offset, 0), coalesce(e.data, '')
		FROM workflow_runs r LEFT JOIN LATERAL (
			SELECT * FROM workflow_run_events ev WHERE ev.run_id = r.id AND ev.seq > $2 ORDER BY ev.seq LIMIT $3
		) e ON true
		WHERE r.id = $1 ORDER BY e.seq`, runID, afterSeq, limit)
	if err != nil {
		return nil, dbError(err, "list events")
	}
	defer rows.Close()
	found := false
	var out []workflow.Envelope // grown by append: a follower's most common reads find none or a few
	var (
		workflowID, versionID string
		wf, ver, event        pgtype.DriverBytes
		seq                   int64
		ts                    time.Time
		offset                int32
	)
	for rows.Next() {
		e := workflow.Envelope{SchemaVersion: workflow.SchemaVersion, RunID: runID}
		var data []byte
		if err := rows.Scan(&wf, &ver, &seq, &event, &e.NodeID, &e.NodeRunID, &ts, &offset, &data); err != nil {
			return nil, dbError(err, "list events")
		}
		if !found {
			workflowID, versionID = string(wf), string(ver)
			found = true
		}
		if seq == 0 { // the run has no event after afterSeq
			continue
		}
		e.WorkflowID, e.VersionID = workflowID, versionID
		e.Seq, e.Event, e.Timestamp, e.Data = seq, eventType(event), inOffset(ts, offset), data
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(err, "list events")
	}
	if !found {
		return nil, workflow.RunNotFound(runID)
	}
	return out, nil
}

// inOffset returns t in the zone of offset (seconds east of UTC): UTC for
// 0, else a fixed zone.
func inOffset(t time.Time, offset int32) time.Time {
	if offset == 0 {
		return t.UTC()
	}
	return t.In(time.FixedZone("", int(offset)))
}

// PendingResumeToken returns the run's unconsumed token, expired or not.
func (s *WorkflowStore) PendingResumeToken(ctx context.Context, runID string) (workflow.ResumeToken, error) {
	if err := s.checkOpen(); err != nil {
		return workflow.ResumeToken{}, err
	}
	if !lookupable(runID) {
		return workflow.ResumeToken{}, workflow.RunNotFound(runID)
	}
	t := workflow.ResumeToken{RunID: runID}
	var expires *time.Time
	err := s.pool.QueryRow(ctx, `SELECT coalesce(t.node_id, ''), coalesce(t.node_run_id, ''), t.hash, t.actions, t.form_schema, t.expires_at
		FROM workflow_runs r LEFT JOIN workflow_resume_tokens t ON t.run_id = r.id AND t.consumed_at IS NULL
		WHERE r.id = $1`, runID).Scan(&t.NodeID, &t.NodeRunID, &t.Hash, &t.Actions, &t.FormSchema, &expires)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return workflow.ResumeToken{}, workflow.RunNotFound(runID)
	case err != nil:
		return workflow.ResumeToken{}, dbError(err, "pending resume token")
	case expires == nil:
		return workflow.ResumeToken{}, runstream.Errorf(runstream.CodeWorkflowResumeTokenInvalid, "run %q has no pending resume token", runID)
	}
	t.ExpiresAt = expires.UTC()
	return t, nil
}

// GetArtifact returns an artifact of a run, or CodeNotFound.
func (s *WorkflowStore) GetArtifact(ctx context.Context, runID, artifactID string) (workflow.Artifact, error) {
	if err := s.checkOpen(); err != nil {
		return workflow.Artifact{}, err
	}
	notFound := runstream.Errorf(runstream.CodeNotFound, "run %q has no artifact %q", runID, artifactID)
	if !lookupable(runID) || !lookupable(artifactID) {
		return workflow.Artifact{}, notFound
	}
	a := workflow.Artifact{ID: artifactID, RunID: runID}
	err := s.pool.QueryRow(ctx, `SELECT node_id, name, mime_type, size_bytes, sha256, created_at
		FROM workflow_artifacts WHERE run_id = $1 AND id = $2`, runID, artifactID).
		Scan(&a.NodeID, &a.Name, &a.MimeType, &a.SizeBytes, &a.SHA256, &a.CreatedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return workflow.Artifact{}, notFound
	case err != nil:
		return workflow.Artifact{}, dbError(err, "get artifact")
	}
	a.CreatedAt = a.CreatedAt.UTC()
	return a, nil
}

// storableEvents rejects, with CodeInvalidArgument, the text of events
// that PostgreSQL cannot hold: node ids with invalid UTF-8 or NUL, data
// with invalid UTF-8 (valid JSON holds no raw NUL). The caller has checked
// the events with workflow.CheckEvents.
func storableEvents(events []workflow.NewEvent) error {
	for i, e := range events {
		if !storableText(e.NodeID) || !storableText(e.NodeRunID) || !utf8.Valid(e.Data) || bytes.IndexByte(e.Data, 0) >= 0 {
			return runstream.Errorf(runstream.CodeInvalidArgument, "events[%d]: node ids and data must be valid UTF-8 without NUL characters", i)
		}
	}
	return nil
}

func cloneRun(r workflow.Run) workflow.Run {
	r.Input, r.Output, r.Error = cloneBytes(r.Input), cloneBytes(r.Output), cloneBytes(r.Error)
	return r
}

// eventNames maps a stored event name to its constant, so reading one
// allocates nothing.
var eventNames = func() map[string]workflow.EventType {
	m := map[string]workflow.EventType{}
	for _, t := range workflow.Events() {
		m[string(t)] = t
	}
	return m
}()

func eventType(name []byte) workflow.EventType {
	if t, ok := eventNames[string(name)]; ok {
		return t
	}
	return workflow.EventType(name)
}
