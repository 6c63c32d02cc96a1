package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

// WorkflowStore is the workflow.Store of a DB (tables of
// migrations/0002_workflow.sql).
//
// Writes (CreateWorkflow, AddVersion, CreateRun, Append, Resume) go through
// the DB's single write loop, so they share its group transactions with
// every other writer of the file and never wait for the write lock inside
// the process. Each call runs in its own savepoint of the group transaction
// (see write): it is all or nothing, and a refused call does not fail the
// others of its group. Concurrent appends to one run are therefore
// committed together, with one sync of the WAL, and still get consecutive
// seqs: the run row is the run's seq counter, and it is read and advanced
// inside the transaction, which holds the database's write lock (BEGIN
// IMMEDIATE) against every connection of every process.
//
// Reads use the read-only pool and prepared statements: ListEvents is one
// range scan of the (run_id, seq) primary key.
//
// Times are stored as microseconds in UTC and read back in UTC, except
// envelope timestamps, which keep their UTC offset. JSON values read back
// byte for byte. Ids that a call stores (workflow, version, run, owner and
// artifact ids) are at most workflow.MaxIDBytes long.
type WorkflowStore struct {
	db     *DB
	closed atomic.Bool
	stmts  []*sql.Stmt // every statement below, for closeStatements
	// claims is the round-robin cursor of Claim (workflow.Queue).
	claims workflow.ClaimCursor

	// Prepared on the writer connection.
	savepoint, release, rollbackTo                            *sql.Stmt
	insertWorkflow, workflowOwner, setLatest                  *sql.Stmt
	insertVersion, nextVersion, versionWorkflow               *sql.Stmt
	insertRun, lockRun, updateRun, insertEvent                *sql.Stmt
	insertArtifact, dropPendingTokens, putToken, consumeToken *sql.Stmt
	tokenUsed                                                 *sql.Stmt

	// Prepared on the read pool.
	getWorkflow, workflowCursor, getVersion *sql.Stmt
	getRun, runCursor, listEvents           *sql.Stmt
	pendingToken, getArtifact               *sql.Stmt
}

var _ workflow.Store = (*WorkflowStore)(nil)

// runColumns are the columns scanRun reads, in its order.
const runColumns = `id, workflow_id, version_id, owner_id, status, input, output, error, last_seq,
	created_at, updated_at, started_at, finished_at, lease_owner, lease_expires_at`

// workflowColumns are the columns scanWorkflow reads, in its order.
const workflowColumns = "id, owner_id, name, description, latest_version_id, created_at, updated_at"

// ownerCond restricts a statement that reads one row by id (?1) to the
// rows the Owner of ownerArgs sees, in the query itself: ?2 is true for
// AnyOwner, ?3 is the user id of any other Owner. The zero Owner sees no
// row (no row has the empty owner).
const ownerCond = "(?2 OR owner_id = ?3)"

// ownerArgs are the arguments of a statement restricted by ownerCond.
func ownerArgs(id string, owner runstream.Owner) []any {
	return []any{id, owner.All(), owner.UserID()}
}

// savepointName names the savepoint of each write request. Requests of a
// group run one after the other, so one name serves them all.
const savepointName = "workflow_request"

func newWorkflowStore(ctx context.Context, db *DB) (*WorkflowStore, error) {
	s := &WorkflowStore{db: db}
	stmts := []struct {
		dst   **sql.Stmt
		pool  *sql.DB
		query string
	}{
		{&s.savepoint, db.writer, "SAVEPOINT " + savepointName},
		{&s.release, db.writer, "RELEASE " + savepointName},
		{&s.rollbackTo, db.writer, "ROLLBACK TO " + savepointName},
		{&s.insertWorkflow, db.writer, `INSERT INTO workflows (` + workflowColumns + `)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`},
		{&s.workflowOwner, db.writer, `SELECT 1 FROM workflows WHERE id = ?1 AND ` + ownerCond},
		{&s.setLatest, db.writer, `UPDATE workflows SET latest_version_id = ?, updated_at = ? WHERE id = ?`},
		{&s.insertVersion, db.writer, `INSERT INTO workflow_versions (id, workflow_id, number, definition, created_at)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`},
		{&s.nextVersion, db.writer, `SELECT coalesce(max(number), 0) + 1 FROM workflow_versions WHERE workflow_id = ?`},
		{&s.versionWorkflow, db.writer, `SELECT workflow_id FROM workflow_versions WHERE id = ?`},
		{&s.insertRun, db.writer, `INSERT INTO workflow_runs (` + runColumns + `)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`},
		// The input, which no write changes, is not read back.
		{&s.lockRun, db.writer, `SELECT id, workflow_id, version_id, owner_id, status, NULL, output, error, last_seq,
			created_at, updated_at, started_at, finished_at, lease_owner, lease_expires_at
			FROM workflow_runs WHERE id = ?1 AND ` + ownerCond},
		{&s.updateRun, db.writer, `UPDATE workflow_runs SET status = ?, output = ?, error = ?, last_seq = ?,
			updated_at = ?, started_at = ?, finished_at = ?, lease_owner = ?, lease_expires_at = ?
			WHERE id = ?`},
		{&s.insertEvent, db.writer, `INSERT INTO workflow_run_events
			(run_id, seq, event, node_id, node_run_id, ts, ts_offset, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`},
		{&s.insertArtifact, db.writer, `INSERT INTO workflow_artifacts
			(run_id, id, node_id, name, mime_type, size_bytes, sha256, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`},
		{&s.dropPendingTokens, db.writer, `DELETE FROM workflow_resume_tokens WHERE run_id = ? AND consumed_at IS NULL`},
		// A new token with the hash of a consumed one replaces it: the old
		// row could only ever answer "used", which the new one supersedes.
		{&s.putToken, db.writer, `INSERT INTO workflow_resume_tokens
			(run_id, hash, node_id, node_run_id, actions, form_schema, expires_at, consumed_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, NULL)
			ON CONFLICT (run_id, hash) DO UPDATE SET node_id = excluded.node_id,
			node_run_id = excluded.node_run_id, actions = excluded.actions,
			form_schema = excluded.form_schema, expires_at = excluded.expires_at, consumed_at = NULL`},
		// The compare-and-set of Resume: one statement.
		{&s.consumeToken, db.writer, `UPDATE workflow_resume_tokens SET consumed_at = ?
			WHERE run_id = ? AND hash = ? AND consumed_at IS NULL AND expires_at > ?`},
		{&s.tokenUsed, db.writer, `SELECT consumed_at IS NOT NULL FROM workflow_resume_tokens WHERE run_id = ? AND hash = ?`},

		{&s.getWorkflow, db.readers, `SELECT ` + workflowColumns + ` FROM workflows WHERE id = ?1 AND ` + ownerCond},
		{&s.workflowCursor, db.readers, `SELECT created_at FROM workflows WHERE id = ?1 AND ` + ownerCond},
		{&s.getVersion, db.readers, `SELECT v.id, v.number, v.definition, v.created_at
			FROM workflows w LEFT JOIN workflow_versions v ON v.id = ?4 AND v.workflow_id = w.id
			WHERE w.id = ?1 AND (?2 OR w.owner_id = ?3)`},
		{&s.getRun, db.readers, `SELECT ` + runColumns + ` FROM workflow_runs WHERE id = ?1 AND ` + ownerCond},
		{&s.runCursor, db.readers, `SELECT created_at FROM workflow_runs WHERE id = ?1 AND ` + ownerCond},
		{&s.listEvents, db.readers, listEventsSQL},
		{&s.pendingToken, db.readers, `SELECT t.node_id, t.node_run_id, t.hash, t.actions, t.form_schema, t.expires_at
			FROM workflow_runs r LEFT JOIN workflow_resume_tokens t ON t.run_id = r.id AND t.consumed_at IS NULL
			WHERE r.id = ? LIMIT 1`},
		{&s.getArtifact, db.readers, `SELECT node_id, name, mime_type, size_bytes, sha256, created_at
			FROM workflow_artifacts WHERE run_id = ? AND id = ?`},
	}
	for _, st := range stmts {
		stmt, err := st.pool.PrepareContext(ctx, st.query)
		if err != nil {
			s.closeStatements()
			return nil, sqlError("sqlite: prepare workflow statements", err)
		}
		*st.dst = stmt
		s.stmts = append(s.stmts, stmt)
	}
	return s, nil
}

// listEventsSQL reads a page of a run's events after a cursor: one row per
// event, or one row of NULL event columns when the run has none in the
// page, or no row when the run does not exist. The events are one range
// scan of the primary key, already in seq order.
const listEventsSQL = `SELECT r.workflow_id, r.version_id, e.seq, e.event, e.node_id, e.node_run_id, e.ts, e.ts_offset, e.data
	FROM workflow_runs r LEFT JOIN workflow_run_events e ON e.run_id = r.id AND e.seq > ?1
	WHERE r.id = ?2 ORDER BY e.seq LIMIT ?3`

func (s *WorkflowStore) closeStatements() error {
	var errs []error
	for _, stmt := range s.stmts {
		errs = append(errs, stmt.Close())
	}
	return errors.Join(errs...)
}

// Durability states the durability of acknowledged writes.
func (s *WorkflowStore) Durability() string { return s.db.Durability() }

// Close makes every later call fail with CodeUnavailable. It does not close
// the DB, which its owner closes.
func (s *WorkflowStore) Close() error {
	s.closed.Store(true)
	return nil
}

func (s *WorkflowStore) checkOpen() error {
	if s.closed.Load() {
		return closedError()
	}
	return nil
}

// write runs f as one request of a group transaction of the write loop,
// inside its own savepoint. When f fails, its writes are rolled back to the
// savepoint and its error answers the caller, while the other requests of
// the group commit. Only when the savepoint cannot be set, rolled back or
// released, or the commit fails, does the group fail; the write loop then
// retries each request alone, so f may run twice and must set its results
// afresh each time.
func (s *WorkflowStore) write(ctx context.Context, f func(ctx context.Context, tx *sql.Tx) error) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	var answer error
	err := s.db.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.StmtContext(ctx, s.savepoint).ExecContext(ctx); err != nil {
			return sqlError("sqlite: workflow write: savepoint", err)
		}
		answer = f(ctx, tx)
		if answer != nil {
			if _, err := tx.StmtContext(ctx, s.rollbackTo).ExecContext(ctx); err != nil {
				return sqlError("sqlite: workflow write: roll back to savepoint", err)
			}
		}
		if _, err := tx.StmtContext(ctx, s.release).ExecContext(ctx); err != nil {
			return sqlError("sqlite: workflow write: release savepoint", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return answer
}

// execChanged runs stmt in tx and reports whether it changed a row.
func execChanged(ctx context.Context, tx *sql.Tx, stmt *sql.Stmt, op string, args ...any) (bool, error) {
	res, err := tx.StmtContext(ctx, stmt).ExecContext(ctx, args...)
	if err != nil {
		return false, sqlError(op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, sqlError(op, err)
	}
	return n > 0, nil
}

// CreateWorkflow stores w with its first version v.
func (s *WorkflowStore) CreateWorkflow(ctx context.Context, w workflow.Workflow, v workflow.Version) (workflow.Workflow, workflow.Version, error) {
	const op = "create workflow"
	switch {
	case w.ID == "":
		return workflow.Workflow{}, workflow.Version{}, runstream.Errorf(runstream.CodeInvalidArgument, "%s: id is required", op)
	case w.OwnerID == "":
		return workflow.Workflow{}, workflow.Version{}, runstream.Errorf(runstream.CodeInvalidArgument, "%s: owner is required", op)
	case v.ID == "":
		return workflow.Workflow{}, workflow.Version{}, runstream.Errorf(runstream.CodeInvalidArgument, "%s: version id is required", op)
	}
	if err := firstError(workflow.CheckIDLength(op, "id", w.ID), workflow.CheckIDLength(op, "owner", w.OwnerID), workflow.CheckIDLength(op, "version id", v.ID)); err != nil {
		return workflow.Workflow{}, workflow.Version{}, err
	}
	now := storeNow()
	w.CreatedAt = orNow(w.CreatedAt, now)
	w.UpdatedAt = orNow(w.UpdatedAt, w.CreatedAt)
	w.LatestVersionID = v.ID
	v.WorkflowID, v.Number = w.ID, 1
	v.CreatedAt = orNow(v.CreatedAt, w.CreatedAt)
	v.Definition = bytes.Clone(v.Definition)
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		ok, err := execChanged(ctx, tx, s.insertWorkflow, "sqlite: create workflow",
			w.ID, w.OwnerID, w.Name, w.Description, w.LatestVersionID, micros(w.CreatedAt), micros(w.UpdatedAt))
		if err != nil {
			return err
		}
		if !ok {
			return runstream.Errorf(runstream.CodeConflict, "%s: workflow %q exists", op, w.ID)
		}
		return s.putVersion(ctx, tx, op, v)
	})
	if err != nil {
		return workflow.Workflow{}, workflow.Version{}, err
	}
	return w, cloneVersion(v), nil
}

// putVersion inserts v, or fails with CodeConflict when its id is taken.
func (s *WorkflowStore) putVersion(ctx context.Context, tx *sql.Tx, op string, v workflow.Version) error {
	ok, err := execChanged(ctx, tx, s.insertVersion, "sqlite: "+op,
		v.ID, v.WorkflowID, v.Number, nullJSON(v.Definition), micros(v.CreatedAt))
	if err != nil {
		return err
	}
	if !ok {
		return runstream.Errorf(runstream.CodeConflict, "%s: version %q exists", op, v.ID)
	}
	return nil
}

// AddVersion stores v as the latest version of its workflow; the number
// v carries is ignored.
func (s *WorkflowStore) AddVersion(ctx context.Context, v workflow.Version, owner runstream.Owner) (workflow.Version, error) {
	const op = "add version"
	if err := runstream.CheckOwner(owner); err != nil {
		return workflow.Version{}, err
	}
	if v.ID == "" {
		return workflow.Version{}, runstream.Errorf(runstream.CodeInvalidArgument, "%s: id is required", op)
	}
	if err := workflow.CheckIDLength(op, "id", v.ID); err != nil {
		return workflow.Version{}, err
	}
	v.CreatedAt = orNow(v.CreatedAt, storeNow())
	v.Definition = bytes.Clone(v.Definition)
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := s.checkWorkflowOwner(ctx, tx, v.WorkflowID, owner); err != nil {
			return err
		}
		if err := tx.StmtContext(ctx, s.nextVersion).QueryRowContext(ctx, v.WorkflowID).Scan(&v.Number); err != nil {
			return sqlError("sqlite: add version: number", err)
		}
		if err := s.putVersion(ctx, tx, op, v); err != nil {
			return err
		}
		_, err := execChanged(ctx, tx, s.setLatest, "sqlite: add version: update workflow", v.ID, micros(v.CreatedAt), v.WorkflowID)
		return err
	})
	if err != nil {
		return workflow.Version{}, err
	}
	return cloneVersion(v), nil
}

// checkWorkflowOwner fails with CodeWorkflowNotFound unless the workflow
// exists and owner sees it.
func (s *WorkflowStore) checkWorkflowOwner(ctx context.Context, tx *sql.Tx, id string, owner runstream.Owner) error {
	var one int
	err := tx.StmtContext(ctx, s.workflowOwner).QueryRowContext(ctx, ownerArgs(id, owner)...).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return workflow.NotFound(id)
	case err != nil:
		return sqlError("sqlite: look up workflow", err)
	}
	return nil
}

// storeNow is the store's clock: UTC, truncated to microseconds.
func storeNow() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// orNow returns t truncated to microseconds in UTC, or now when t is zero.
func orNow(t, now time.Time) time.Time {
	if t.IsZero() {
		return now
	}
	return t.UTC().Truncate(time.Microsecond)
}

// truncated returns t truncated to microseconds in UTC, or zero.
func truncated(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

// micros is the stored form of a time.
func micros(t time.Time) int64 { return t.UnixMicro() }

// nullMicros is the stored form of a time whose zero value is NULL.
func nullMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

// fromMicros reads a stored time, in UTC.
func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// fromNullMicros reads a stored time that may be NULL (the zero time).
func fromNullMicros(us sql.NullInt64) time.Time {
	if !us.Valid {
		return time.Time{}
	}
	return fromMicros(us.Int64)
}

// nullJSON is the stored form of a JSON value: NULL for nil, else its text.
func nullJSON(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

func cloneVersion(v workflow.Version) workflow.Version {
	v.Definition = bytes.Clone(v.Definition)
	return v
}

func cloneRun(r workflow.Run) workflow.Run {
	r.Input, r.Output, r.Error = bytes.Clone(r.Input), bytes.Clone(r.Output), bytes.Clone(r.Error)
	return r
}
