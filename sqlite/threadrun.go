package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// RunStore is the runevents.RunStore of a DB: thread run rows in
// thread_runs and feedback in feedback (migrations/0003_threads.sql,
// 0005_deerflow_rows.sql).
//
// Writes go through the DB's group-commit loop; each is one upsert, so
// the owner check and the write are atomic against every writer of the
// file, in any process. Reads use the read-only pool. PutRun replaces
// every field of an existing row but CreatedAt and OwnerID, and refuses
// (CodeNotFound) a row of another owner. A run's timestamps keep the
// writer's UTC offset at microsecond precision. FindRun, when several
// threads hold the run id, returns the oldest visible row (by CreatedAt,
// then thread id). Feedback ids are "fb_" and 32 random hex digits.
type RunStore struct {
	db *DB
}

var _ runevents.RunStore = (*RunStore)(nil)

func newRunStore(db *DB) *RunStore { return &RunStore{db: db} }

// checkDBOpen fails once db is closed.
func checkDBOpen(db *DB) error {
	select {
	case <-db.quit:
		return closedError()
	default:
		return nil
	}
}

// threadRunColumns are the columns of thread_runs that scanThreadRun reads
// and putRunSQL writes, in their order.
const threadRunColumns = `thread_id, run_id, owner_id, status, operation_kind, model_name, metadata,
	total_input_tokens, total_output_tokens, total_tokens, llm_call_count,
	lead_agent_tokens, subagent_tokens, middleware_tokens, usage_by_model,
	assistant_id, kwargs, multitask_strategy, message_count, stop_reason,
	created_at, created_offset, updated_at, updated_offset`

// putRunSQL creates the row or, when the owner is the same and the stored
// status may become the new one (runevents.RunStatus.MayBecome), replaces
// all but created_at; it returns the stored created_at, and no row when
// another owner holds (thread_id, run_id) or the status may not change.
const putRunSQL = `INSERT INTO thread_runs (` + threadRunColumns + `)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (thread_id, run_id) DO UPDATE SET
		status = excluded.status, operation_kind = excluded.operation_kind,
		model_name = excluded.model_name, metadata = excluded.metadata,
		total_input_tokens = excluded.total_input_tokens, total_output_tokens = excluded.total_output_tokens,
		total_tokens = excluded.total_tokens, llm_call_count = excluded.llm_call_count,
		lead_agent_tokens = excluded.lead_agent_tokens, subagent_tokens = excluded.subagent_tokens,
		middleware_tokens = excluded.middleware_tokens, usage_by_model = excluded.usage_by_model,
		assistant_id = excluded.assistant_id, kwargs = excluded.kwargs,
		multitask_strategy = excluded.multitask_strategy, message_count = excluded.message_count,
		stop_reason = excluded.stop_reason,
		updated_at = excluded.updated_at, updated_offset = excluded.updated_offset
	WHERE thread_runs.owner_id = excluded.owner_id
		AND (thread_runs.status IN ('pending', 'running') OR thread_runs.status = excluded.status
			OR (thread_runs.status = 'interrupted' AND excluded.status = 'error'))
	RETURNING created_at, created_offset`

// runRowArgs prepares r (runevents.PrepareRunRow, now for its missing
// times) and returns it with putRunSQL's arguments.
func runRowArgs(r runevents.ThreadRun, now time.Time) (runevents.ThreadRun, []any, error) {
	r, err := runevents.PrepareRunRow(r, now)
	if err != nil {
		return r, nil, err
	}
	byModel, err := usageByModelText(r.Usage.ByModel)
	if err != nil {
		return r, nil, err
	}
	u := r.Usage
	return r, []any{r.ThreadID, r.RunID, r.OwnerID, string(r.Status), r.OperationKind, r.ModelName, string(r.Metadata),
		u.TotalInputTokens, u.TotalOutputTokens, u.TotalTokens, u.LLMCallCount,
		u.LeadAgentTokens, u.SubagentTokens, u.MiddlewareTokens, byModel,
		r.AssistantID, string(r.Kwargs), r.MultitaskStrategy, r.MessageCount, r.StopReason,
		r.CreatedAt.UnixMicro(), zoneOffset(r.CreatedAt), r.UpdatedAt.UnixMicro(), zoneOffset(r.UpdatedAt)}, nil
}

// PutRun creates or updates the run row.
func (s *RunStore) PutRun(ctx context.Context, r runevents.ThreadRun) (runevents.ThreadRun, error) {
	if err := checkDBOpen(s.db); err != nil {
		return runevents.ThreadRun{}, err
	}
	r, args, err := runRowArgs(r, time.Now())
	if err != nil {
		return runevents.ThreadRun{}, err
	}
	var (
		created       int64
		createdOffset int
		refused       error // the caller's outcome when nothing is written
	)
	err = s.db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		refused = nil
		err := tx.QueryRowContext(ctx, putRunSQL, args...).Scan(&created, &createdOffset)
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, sql.ErrNoRows):
			return sqlError("sqlite: put run", err)
		}
		// Nothing written: say why.
		var owner, status string
		err = tx.QueryRowContext(ctx, "SELECT owner_id, status FROM thread_runs WHERE thread_id = ? AND run_id = ?", r.ThreadID, r.RunID).Scan(&owner, &status)
		switch {
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return sqlError("sqlite: put run", err)
		case err != nil || owner != r.OwnerID:
			refused = errThreadRunNotFound(r.RunID)
		default:
			refused = runevents.ErrRunFinished(r.RunID, runevents.RunStatus(status), r.Status)
		}
		return nil
	})
	if err != nil {
		return runevents.ThreadRun{}, err
	}
	if refused != nil {
		return runevents.ThreadRun{}, refused
	}
	r.CreatedAt = inOffsetZone(time.UnixMicro(created), createdOffset)
	return r, nil
}

// zoneOffset is t's UTC offset in seconds.
func zoneOffset(t time.Time) int {
	_, offset := t.Zone()
	return offset
}

// usageByModelText is the stored form of a usage-by-model map: NULL for a
// nil map, else its JSON object.
func usageByModelText(m map[string]runevents.ModelUsage) (any, error) {
	if m == nil {
		return nil, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, runstream.Wrap(err, runstream.CodeInvalidArgument, "run usage by model cannot be encoded")
	}
	return string(b), nil
}

func errThreadRunNotFound(runID string) error {
	return runstream.Errorf(runstream.CodeNotFound, "run %s not found", runID)
}

// GetRun returns the row of (threadID, runID) visible to owner.
func (s *RunStore) GetRun(ctx context.Context, threadID, runID string, owner runevents.Owner) (runevents.ThreadRun, error) {
	if err := firstError(checkDBOpen(s.db), runevents.ValidateID("thread_id", threadID),
		runevents.ValidateID("run_id", runID), runevents.CheckOwner(owner)); err != nil {
		return runevents.ThreadRun{}, err
	}
	w := where{}
	w.add("thread_id = ?", threadID)
	w.add("run_id = ?", runID)
	w.ownerColumn("owner_id", owner)
	runs, err := s.queryRuns(ctx, "sqlite: get run", "SELECT "+threadRunColumns+" FROM thread_runs WHERE "+w.String(), w.args)
	if err != nil {
		return runevents.ThreadRun{}, err
	}
	if len(runs) == 0 {
		return runevents.ThreadRun{}, errThreadRunNotFound(runID)
	}
	return runs[0], nil
}

// findRunQuery selects the oldest row of runID visible to owner.
func findRunQuery(runID string, owner runevents.Owner) query {
	w := where{}
	w.add("run_id = ?", runID)
	w.ownerColumn("owner_id", owner)
	return query{sql: "SELECT " + threadRunColumns + " FROM thread_runs WHERE " + w.String() +
		" ORDER BY created_at, thread_id LIMIT 1", args: w.args}
}

// FindRun returns the oldest row of runID visible to owner, in whatever
// thread holds it.
func (s *RunStore) FindRun(ctx context.Context, runID string, owner runevents.Owner) (runevents.ThreadRun, error) {
	if err := firstError(checkDBOpen(s.db), runevents.ValidateID("run_id", runID), runevents.CheckOwner(owner)); err != nil {
		return runevents.ThreadRun{}, err
	}
	q := findRunQuery(runID, owner)
	runs, err := s.queryRuns(ctx, "sqlite: find run", q.sql, q.args)
	if err != nil {
		return runevents.ThreadRun{}, err
	}
	if len(runs) == 0 {
		return runevents.ThreadRun{}, errThreadRunNotFound(runID)
	}
	return runs[0], nil
}

// listRunsQuery selects the thread's rows visible to owner, oldest first.
func listRunsQuery(threadID string, owner runevents.Owner) query {
	return threadRunsQuery(threadID, owner, " ORDER BY created_at, run_id")
}

// listRunsNewestQuery selects a page of the thread's rows visible to
// owner, newest first: the index of listRunsQuery read backwards.
func listRunsNewestQuery(threadID string, owner runevents.Owner, limit, offset int) query {
	return threadRunsQuery(threadID, owner, " ORDER BY created_at DESC, run_id DESC LIMIT ? OFFSET ?", limit, max(offset, 0))
}

// threadRunsQuery selects the thread's rows visible to owner, ordered and
// paged by tail, whose arguments follow.
func threadRunsQuery(threadID string, owner runevents.Owner, tail string, tailArgs ...any) query {
	w := where{}
	w.add("thread_id = ?", threadID)
	w.ownerColumn("owner_id", owner)
	return query{sql: "SELECT " + threadRunColumns + " FROM thread_runs WHERE " + w.String() + tail, args: append(w.args, tailArgs...)}
}

// ListRuns returns the thread's runs visible to owner, oldest first (ties
// by run id).
func (s *RunStore) ListRuns(ctx context.Context, threadID string, owner runevents.Owner) ([]runevents.ThreadRun, error) {
	return s.listRuns(ctx, threadID, owner, listRunsQuery(threadID, owner))
}

// ListRunsNewest returns at most limit of the thread's runs visible to
// owner, newest first (ties by run id, descending), after the offset
// newest.
func (s *RunStore) ListRunsNewest(ctx context.Context, threadID string, owner runevents.Owner, limit, offset int) ([]runevents.ThreadRun, error) {
	if limit <= 0 {
		return nil, firstError(checkDBOpen(s.db), runevents.ValidateID("thread_id", threadID), runevents.CheckOwner(owner))
	}
	return s.listRuns(ctx, threadID, owner, listRunsNewestQuery(threadID, owner, limit, offset))
}

// listRuns checks the arguments of a runs list and runs its query q.
func (s *RunStore) listRuns(ctx context.Context, threadID string, owner runevents.Owner, q query) ([]runevents.ThreadRun, error) {
	if err := firstError(checkDBOpen(s.db), runevents.ValidateID("thread_id", threadID), runevents.CheckOwner(owner)); err != nil {
		return nil, err
	}
	return s.queryRuns(ctx, "sqlite: list runs", q.sql, q.args)
}

// queryRuns runs a SELECT of threadRunColumns on the read pool.
func (s *RunStore) queryRuns(ctx context.Context, op, query string, args []any) ([]runevents.ThreadRun, error) {
	rows, err := s.db.reads.query(ctx, query, args...)
	if err != nil {
		return nil, sqlError(op, err)
	}
	defer rows.Close()
	var out []runevents.ThreadRun
	for rows.Next() {
		r, err := scanThreadRun(rows)
		if err != nil {
			return nil, sqlError(op, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, sqlError(op, err)
	}
	return out, nil
}

// scanThreadRun reads the threadRunColumns of one row into a fresh run.
func scanThreadRun(row interface{ Scan(...any) error }) (runevents.ThreadRun, error) {
	var (
		r                            runevents.ThreadRun
		status                       string
		byModel                      sql.NullString
		created, updated             int64
		createdOffset, updatedOffset int
	)
	u := &r.Usage
	if err := row.Scan(&r.ThreadID, &r.RunID, &r.OwnerID, &status, &r.OperationKind, &r.ModelName, (*[]byte)(&r.Metadata),
		&u.TotalInputTokens, &u.TotalOutputTokens, &u.TotalTokens, &u.LLMCallCount,
		&u.LeadAgentTokens, &u.SubagentTokens, &u.MiddlewareTokens, &byModel,
		&r.AssistantID, (*[]byte)(&r.Kwargs), &r.MultitaskStrategy, &r.MessageCount, &r.StopReason,
		&created, &createdOffset, &updated, &updatedOffset); err != nil {
		return runevents.ThreadRun{}, err
	}
	r.Status = runevents.RunStatus(status)
	if byModel.Valid {
		if err := json.Unmarshal([]byte(byModel.String), &u.ByModel); err != nil {
			return runevents.ThreadRun{}, fmt.Errorf("usage_by_model of run %s: %w", r.RunID, err)
		}
	}
	r.CreatedAt = inOffsetZone(time.UnixMicro(created), createdOffset)
	r.UpdatedAt = inOffsetZone(time.UnixMicro(updated), updatedOffset)
	return r, nil
}

// ownerColumn restricts the rows to o's, by the owner stored in column,
// unless o is AnyOwner.
func (w *where) ownerColumn(column string, o runevents.Owner) {
	if !o.All() {
		w.add(column+" = ?", o.UserID())
	}
}
