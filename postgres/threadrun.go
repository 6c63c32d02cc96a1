package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// RunStore is the runevents.RunStore of a DB: thread run rows in
// thread_runs, feedback in feedback (migrations/0003_queue_threads.sql).
// It is safe for concurrent use, by any number of processes sharing the
// database.
//
// Every write is one upsert statement, so the owner check and the write
// are atomic against every other writer. PutRun replaces every field of
// an existing row but CreatedAt and OwnerID, and refuses (CodeNotFound) a
// row of another owner. Metadata is stored as text, compacted, and reads
// back byte for byte. A run's timestamps keep the writer's UTC offset at
// microsecond precision. FindRun, when several threads hold the run id,
// returns the oldest visible row (by CreatedAt, then thread id). Feedback
// ids are "fb_" and 32 random hex digits. Text PostgreSQL cannot hold
// (invalid UTF-8, NUL) is refused with CodeInvalidArgument.
type RunStore struct {
	pool *pgxpool.Pool
}

var _ runevents.RunStore = (*RunStore)(nil)

// Runs returns the thread run store of db. Every call returns the same
// store.
func (db *DB) Runs() *RunStore { return db.runs }

// threadRunColumns are the columns scanThreadRun reads and putRunSQL
// writes, in their order.
const threadRunColumns = `thread_id, run_id, owner_id, status, operation_kind, model_name, metadata,
	total_input_tokens, total_output_tokens, total_tokens, llm_call_count,
	lead_agent_tokens, subagent_tokens, middleware_tokens, usage_by_model,
	assistant_id, kwargs, multitask_strategy, message_count, stop_reason,
	created_at, created_at_offset, updated_at, updated_at_offset`

// putRunSQL creates the row or, when the owner is the same and the stored
// status may become the new one (runevents.RunStatus.MayBecome), replaces
// all but owner_id and created_at. It returns the stored created_at, and
// no row when another owner holds (thread_id, run_id) or the status may
// not change.
const putRunSQL = `INSERT INTO thread_runs (` + threadRunColumns + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
		$16, $17, $18, $19, $20, $21, $22, $23, $24)
	ON CONFLICT (thread_id, run_id) DO UPDATE SET
		status = EXCLUDED.status, operation_kind = EXCLUDED.operation_kind,
		model_name = EXCLUDED.model_name, metadata = EXCLUDED.metadata,
		total_input_tokens = EXCLUDED.total_input_tokens, total_output_tokens = EXCLUDED.total_output_tokens,
		total_tokens = EXCLUDED.total_tokens, llm_call_count = EXCLUDED.llm_call_count,
		lead_agent_tokens = EXCLUDED.lead_agent_tokens, subagent_tokens = EXCLUDED.subagent_tokens,
		middleware_tokens = EXCLUDED.middleware_tokens, usage_by_model = EXCLUDED.usage_by_model,
		assistant_id = EXCLUDED.assistant_id, kwargs = EXCLUDED.kwargs,
		multitask_strategy = EXCLUDED.multitask_strategy, message_count = EXCLUDED.message_count,
		stop_reason = EXCLUDED.stop_reason,
		updated_at = EXCLUDED.updated_at, updated_at_offset = EXCLUDED.updated_at_offset
	WHERE thread_runs.owner_id = EXCLUDED.owner_id
		AND (thread_runs.status IN ('pending', 'running') OR thread_runs.status = EXCLUDED.status
			OR (thread_runs.status = 'interrupted' AND EXCLUDED.status = 'error'))
	RETURNING created_at, created_at_offset`

// PutRun creates or updates the run row.
func (s *RunStore) PutRun(ctx context.Context, r runevents.ThreadRun) (runevents.ThreadRun, error) {
	r, args, err := runRowArgs(r, time.Now())
	if err != nil {
		return runevents.ThreadRun{}, err
	}
	var (
		created time.Time
		offset  int32
	)
	err = s.pool.QueryRow(ctx, putRunSQL, args...).Scan(&created, &offset)
	switch {
	case errors.Is(err, pgx.ErrNoRows): // nothing written: say why
		var owner, status string
		err := s.pool.QueryRow(ctx, "SELECT owner_id, status FROM thread_runs WHERE thread_id = $1 AND run_id = $2", r.ThreadID, r.RunID).Scan(&owner, &status)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return runevents.ThreadRun{}, dbError(err, "put run")
		}
		if err != nil || owner != r.OwnerID {
			return runevents.ThreadRun{}, errThreadRunNotFound(r.RunID)
		}
		return runevents.ThreadRun{}, runevents.ErrRunFinished(r.RunID, runevents.RunStatus(status), r.Status)
	case err != nil:
		return runevents.ThreadRun{}, dbError(err, "put run")
	}
	r.CreatedAt = inOffset(created, offset)
	return r, nil
}

// runRowArgs prepares r (runevents.PrepareRunRow, now for its missing
// times) and returns it with putRunSQL's arguments.
func runRowArgs(r runevents.ThreadRun, now time.Time) (runevents.ThreadRun, []any, error) {
	r, err := runevents.PrepareRunRow(r, now)
	if err != nil {
		return r, nil, err
	}
	var byModel *string
	if r.Usage.ByModel != nil {
		b, err := json.Marshal(r.Usage.ByModel)
		if err != nil {
			return r, nil, runstream.Wrap(err, runstream.CodeInvalidArgument, "run usage by model cannot be encoded")
		}
		text := string(b)
		byModel = &text
	}
	u := r.Usage
	return r, []any{r.ThreadID, r.RunID, r.OwnerID, string(r.Status), r.OperationKind, r.ModelName,
		string(r.Metadata), u.TotalInputTokens, u.TotalOutputTokens, u.TotalTokens, u.LLMCallCount,
		u.LeadAgentTokens, u.SubagentTokens, u.MiddlewareTokens, byModel,
		r.AssistantID, string(r.Kwargs), r.MultitaskStrategy, r.MessageCount, r.StopReason,
		r.CreatedAt, zoneOffset(r.CreatedAt), r.UpdatedAt, zoneOffset(r.UpdatedAt)}, nil
}

// zoneOffset is t's UTC offset in seconds.
func zoneOffset(t time.Time) int32 {
	_, offset := t.Zone()
	return int32(offset)
}

func errThreadRunNotFound(runID string) error {
	return runstream.Errorf(runstream.CodeNotFound, "run %s not found", runID)
}

// GetRun returns the row of (threadID, runID) visible to owner.
func (s *RunStore) GetRun(ctx context.Context, threadID, runID string, owner runevents.Owner) (runevents.ThreadRun, error) {
	if err := firstError(runevents.ValidateID("thread_id", threadID), runevents.ValidateID("run_id", runID),
		runevents.CheckOwner(owner)); err != nil {
		return runevents.ThreadRun{}, err
	}
	var q query
	q.add("thread_id = ?", threadID)
	q.add("run_id = ?", runID)
	return s.oneRun(ctx, "get run", q, owner, runID, "")
}

// FindRun returns the oldest row of runID visible to owner, in whatever
// thread holds it.
func (s *RunStore) FindRun(ctx context.Context, runID string, owner runevents.Owner) (runevents.ThreadRun, error) {
	if err := firstError(runevents.ValidateID("run_id", runID), runevents.CheckOwner(owner)); err != nil {
		return runevents.ThreadRun{}, err
	}
	var q query
	q.add("run_id = ?", runID)
	return s.oneRun(ctx, "find run", q, owner, runID, " ORDER BY created_at, thread_id LIMIT 1")
}

// oneRun selects the first row of q visible to owner, after order.
func (s *RunStore) oneRun(ctx context.Context, op string, q query, owner runevents.Owner, runID, order string) (runevents.ThreadRun, error) {
	if !ownerColumn(&q, "owner_id", owner) {
		return runevents.ThreadRun{}, errThreadRunNotFound(runID)
	}
	r, err := scanThreadRun(s.pool.QueryRow(ctx, "SELECT "+threadRunColumns+" FROM thread_runs"+q.whereClause()+order, q.args...))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return runevents.ThreadRun{}, errThreadRunNotFound(runID)
	case err != nil:
		return runevents.ThreadRun{}, dbError(err, op)
	}
	return r, nil
}

// ListRuns returns the thread's runs visible to owner, oldest first (ties
// by run id).
func (s *RunStore) ListRuns(ctx context.Context, threadID string, owner runevents.Owner) ([]runevents.ThreadRun, error) {
	return s.listRuns(ctx, threadID, owner, func(*query) string { return " ORDER BY created_at, run_id" })
}

// ListRunsNewest returns at most limit of the thread's runs visible to
// owner, newest first (ties by run id, descending), after the offset
// newest.
func (s *RunStore) ListRunsNewest(ctx context.Context, threadID string, owner runevents.Owner, limit, offset int) ([]runevents.ThreadRun, error) {
	if limit <= 0 {
		return nil, firstError(runevents.ValidateID("thread_id", threadID), runevents.CheckOwner(owner))
	}
	return s.listRuns(ctx, threadID, owner, func(q *query) string {
		return " ORDER BY created_at DESC, run_id DESC LIMIT " + q.arg(limit) + " OFFSET " + q.arg(max(offset, 0))
	})
}

// listRuns selects the thread's runs visible to owner, ordered and paged
// by what tail adds to the query.
func (s *RunStore) listRuns(ctx context.Context, threadID string, owner runevents.Owner, tail func(*query) string) ([]runevents.ThreadRun, error) {
	if err := firstError(runevents.ValidateID("thread_id", threadID), runevents.CheckOwner(owner)); err != nil {
		return nil, err
	}
	var q query
	q.add("thread_id = ?", threadID)
	if !ownerColumn(&q, "owner_id", owner) {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, "SELECT "+threadRunColumns+" FROM thread_runs"+q.whereClause()+tail(&q), q.args...)
	if err != nil {
		return nil, dbError(err, "list runs")
	}
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (runevents.ThreadRun, error) { return scanThreadRun(row) })
	if err != nil {
		return nil, dbError(err, "list runs")
	}
	return runs, nil
}

// scanThreadRun reads a row of threadRunColumns.
func scanThreadRun(row pgx.Row) (runevents.ThreadRun, error) {
	var (
		r                            runevents.ThreadRun
		status                       string
		metadata, kwargs             []byte
		byModel                      *string
		created, updated             time.Time
		createdOffset, updatedOffset int32
	)
	u := &r.Usage
	if err := row.Scan(&r.ThreadID, &r.RunID, &r.OwnerID, &status, &r.OperationKind, &r.ModelName, &metadata,
		&u.TotalInputTokens, &u.TotalOutputTokens, &u.TotalTokens, &u.LLMCallCount,
		&u.LeadAgentTokens, &u.SubagentTokens, &u.MiddlewareTokens, &byModel,
		&r.AssistantID, &kwargs, &r.MultitaskStrategy, &r.MessageCount, &r.StopReason,
		&created, &createdOffset, &updated, &updatedOffset); err != nil {
		return runevents.ThreadRun{}, err
	}
	r.Status, r.Metadata, r.Kwargs = runevents.RunStatus(status), metadata, kwargs
	if byModel != nil {
		if err := json.Unmarshal([]byte(*byModel), &u.ByModel); err != nil {
			return runevents.ThreadRun{}, fmt.Errorf("usage_by_model of run %s: %w", r.RunID, err)
		}
	}
	r.CreatedAt, r.UpdatedAt = inOffset(created, createdOffset), inOffset(updated, updatedOffset)
	return r, nil
}

// ownerColumn restricts q to the rows of o by the owner stored in column,
// unless o is AnyOwner. It returns false when no row can be o's: a user id
// PostgreSQL cannot store was never written.
func ownerColumn(q *query, column string, o runevents.Owner) bool {
	if o.All() {
		return true
	}
	if !storableText(o.UserID()) {
		return false
	}
	q.add(column+" = ?", o.UserID())
	return true
}
