package postgres

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runstream/runstream/workflow"
)

// lockedRunColumns are runColumns without the input, which writes never
// need.
const lockedRunColumns = `id, workflow_id, version_id, owner_id, status, NULL, output, error, last_seq,
	created_at, updated_at, started_at, finished_at, lease_owner, lease_expires_at`

// lockRunsSQL reads and locks the rows of the runs $1, in id order (the
// same in every process, so that two transactions cannot deadlock):
// PostgreSQL locks the rows after sorting them.
const lockRunsSQL = `SELECT ` + lockedRunColumns + ` FROM workflow_runs WHERE id = ANY($1) ORDER BY id FOR UPDATE`

// collectRuns reads the rows of lockRunsSQL by run id. A missing run is
// missing from the map.
func collectRuns(rows pgx.Rows) (map[string]*workflow.Run, error) {
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (workflow.Run, error) { return scanRun(row) })
	if err != nil {
		return nil, err
	}
	out := make(map[string]*workflow.Run, len(runs))
	for i := range runs {
		out[runs[i].ID] = &runs[i]
	}
	return out, nil
}

// runWrites collects what one transaction writes for its appends: events,
// the changed run rows, resume tokens, artifacts, and one notification per
// changed run.
type runWrites struct {
	events    eventColumns
	runs      []*workflow.Run // changed runs, each once
	tokens    []workflow.ResumeToken
	artifacts []workflow.Artifact
}

// apply appends checked events to r: it assigns their seqs after r's last,
// applies them to r (workflow.ApplyEvent) and returns their envelopes.
func (w *runWrites) apply(r *workflow.Run, events []workflow.NewEvent, now time.Time) []workflow.Envelope {
	if len(events) == 0 {
		return []workflow.Envelope{}
	}
	out := make([]workflow.Envelope, 0, len(events))
	for _, e := range events {
		e.Data = cloneBytes(e.Data)
		env := workflow.NewEnvelope(*r, r.LastSeq+1, e, now)
		workflow.ApplyEvent(r, env)
		w.events.add(env)
		out = append(out, env)
	}
	if !slices.Contains(w.runs, r) {
		w.runs = append(w.runs, r)
	}
	return out
}

// setToken makes t the run's pending token, replacing an earlier one of the
// same transaction.
func (w *runWrites) setToken(t workflow.ResumeToken) {
	w.tokens = slices.DeleteFunc(w.tokens, func(old workflow.ResumeToken) bool { return old.RunID == t.RunID })
	w.tokens = append(w.tokens, t)
}

const insertWorkflowEvents = `INSERT INTO workflow_run_events (run_id, seq, event, node_id, node_run_id, ts, ts_offset, data)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::integer[], $8::text[])`

const updateRuns = `UPDATE workflow_runs AS r SET status = u.status, last_seq = u.last_seq, updated_at = u.updated_at,
	started_at = u.started_at, finished_at = u.finished_at, output = u.output, error = u.error,
	lease_owner = u.lease_owner, lease_expires_at = u.lease_expires_at
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::timestamptz[], $5::timestamptz[], $6::timestamptz[],
	$7::text[], $8::text[], $9::text[], $10::timestamptz[])
	AS u (id, status, last_seq, updated_at, started_at, finished_at, output, error, lease_owner, lease_expires_at)
WHERE r.id = u.id`

const insertArtifacts = `INSERT INTO workflow_artifacts (run_id, id, node_id, name, mime_type, size_bytes, sha256, created_at)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8::timestamptz[])`

// send writes everything in one pipeline (one round trip) within tx.
func (w *runWrites) send(ctx context.Context, tx pgx.Tx) error {
	b := &pgx.Batch{}
	w.queue(b)
	if b.Len() == 0 {
		return nil
	}
	return tx.SendBatch(ctx, b).Close()
}

// queue adds the writes to b, the notifications last: PostgreSQL delivers
// them when the transaction commits, never if it rolls back.
func (w *runWrites) queue(b *pgx.Batch) {
	if len(w.events.seq) > 0 {
		b.Queue(insertWorkflowEvents, w.events.args()...)
	}
	if len(w.runs) > 0 {
		b.Queue(updateRuns, runArgs(w.runs)...)
	}
	for _, t := range w.tokens {
		// A consumed token with the same hash is forgotten, so that the
		// hash names one token of the run.
		b.Queue(`DELETE FROM workflow_resume_tokens WHERE run_id = $1 AND (consumed_at IS NULL OR hash = $2)`, t.RunID, t.Hash)
		b.Queue(`INSERT INTO workflow_resume_tokens (run_id, hash, node_id, node_run_id, actions, form_schema, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, t.RunID, t.Hash, t.NodeID, t.NodeRunID, t.Actions, nullText(t.FormSchema), t.ExpiresAt)
	}
	if len(w.artifacts) > 0 {
		b.Queue(insertArtifacts, artifactArgs(w.artifacts)...)
	}
	if len(w.runs) > 0 {
		payloads := make([]string, len(w.runs))
		for i, r := range w.runs {
			payloads[i] = notifyPayload(r.ID, r.LastSeq)
		}
		b.Queue(`SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`, NotifyChannel, payloads)
	}
}

// eventColumns holds envelopes column by column, the form
// insertWorkflowEvents takes.
type eventColumns struct {
	runID, event, data []string
	nodeID, nodeRunID  []*string
	seq                []int64
	ts                 []time.Time
	offset             []int32
}

func (c *eventColumns) add(e workflow.Envelope) {
	c.runID = append(c.runID, e.RunID)
	c.seq = append(c.seq, e.Seq)
	c.event = append(c.event, string(e.Event))
	c.nodeID = append(c.nodeID, nullString(e.NodeID))
	c.nodeRunID = append(c.nodeRunID, nullString(e.NodeRunID))
	c.ts = append(c.ts, e.Timestamp)
	_, off := e.Timestamp.Zone()
	c.offset = append(c.offset, int32(off))
	c.data = append(c.data, string(e.Data))
}

func (c *eventColumns) args() []any {
	return []any{c.runID, c.seq, c.event, c.nodeID, c.nodeRunID, c.ts, c.offset, c.data}
}

func runArgs(runs []*workflow.Run) []any {
	n := len(runs)
	var (
		id, status, leaseOwner          = make([]string, n), make([]string, n), make([]string, n)
		lastSeq                         = make([]int64, n)
		updated                         = make([]time.Time, n)
		started, finished, leaseExpires = make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n)
		output, errObj                  = make([]*string, n), make([]*string, n)
	)
	for i, r := range runs {
		id[i], status[i], leaseOwner[i], lastSeq[i], updated[i] = r.ID, string(r.Status), r.LeaseOwner, r.LastSeq, r.UpdatedAt
		started[i], finished[i], leaseExpires[i] = nullTime(r.StartedAt), nullTime(r.FinishedAt), nullTime(r.LeaseExpiresAt)
		output[i], errObj[i] = nullText(r.Output), nullText(r.Error)
	}
	return []any{id, status, lastSeq, updated, started, finished, output, errObj, leaseOwner, leaseExpires}
}

func artifactArgs(as []workflow.Artifact) []any {
	n := len(as)
	var (
		runID, id, node, name, mime, sha = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		size                             = make([]int64, n)
		created                          = make([]time.Time, n)
	)
	for i, a := range as {
		runID[i], id[i], node[i], name[i], mime[i], sha[i] = a.RunID, a.ID, a.NodeID, a.Name, a.MimeType, a.SHA256
		size[i], created[i] = a.SizeBytes, a.CreatedAt
	}
	return []any{runID, id, node, name, mime, size, sha, created}
}

// nullString is s as a text argument: NULL for "".
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// notifyPayload is the payload of the notification of an append: the run
// id and its last seq, never any content.
func notifyPayload(runID string, seq int64) string {
	return runID + ":" + strconv.FormatInt(seq, 10)
}
