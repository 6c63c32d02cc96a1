package postgres

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

// WorkflowStore is the workflow.Store of a DB, with the semantics of the
// reference memory store.
//
// Concurrency: safe for concurrent use by any number of processes sharing
// the database. A run's row is its seq counter: every write to a run locks
// it (SELECT … FOR UPDATE) in its transaction, so appends to one run, from
// any process, commit one after another in seq order. Appends of one
// process go through group committers (one per run, sharded by run id) that
// commit the appends waiting for the same committer in one transaction.
//
// Notifications: every transaction that appends events sends, on channel
// NotifyChannel, one notification per run it appended to, with the payload
// "<run id>:<last seq>" (never any content). PostgreSQL delivers it on
// commit, so a refused or rolled-back append notifies nobody. See Listener.
//
// Storage: JSON values are stored as text and read back byte for byte;
// times are stored with microsecond precision and read back in UTC, except
// envelope timestamps, which keep the offset they were written with. Text
// PostgreSQL cannot hold (invalid UTF-8, NUL) fails with
// CodeInvalidArgument, as do ids longer than workflow.MaxIDBytes.
type WorkflowStore struct {
	pool       *pgxpool.Pool
	durability string

	mu         sync.RWMutex // guards closed against the sends to committers
	closed     bool
	committers []*appendCommitter

	// claims is the round-robin cursor of Claim (workflow.Queue).
	claims workflow.ClaimCursor
}

var _ workflow.Store = (*WorkflowStore)(nil)

func newWorkflowStore(pool *pgxpool.Pool, durability string, committers int, onCommit func(int)) *WorkflowStore {
	s := &WorkflowStore{pool: pool, durability: durability}
	for range committers {
		s.committers = append(s.committers, newAppendCommitter(pool, onCommit))
	}
	return s
}

// Workflows returns the workflow store of db. Every call returns the same
// store.
func (db *DB) Workflows() *WorkflowStore { return db.workflows }

// Durability reports the durability mode of the DB (see DB.Durability).
func (s *WorkflowStore) Durability() string { return s.durability }

// Close stops accepting calls, waits for the queued appends to be committed
// and answered, and returns. It does not close the pool, which belongs to
// the DB. Close is idempotent; later calls fail with CodeUnavailable.
func (s *WorkflowStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for _, c := range s.committers {
		close(c.queue)
	}
	s.mu.Unlock()
	for _, c := range s.committers {
		<-c.stopped
	}
	return nil
}

func (s *WorkflowStore) checkOpen() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return errWorkflowsClosed()
	}
	return nil
}

func errWorkflowsClosed() *runstream.Error {
	return runstream.Errorf(runstream.CodeUnavailable, "postgres: workflow store is closed")
}

// storeNow is the store's clock in UTC, truncated to microseconds as
// PostgreSQL stores times.
func storeNow() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// orNow returns t truncated to microseconds, or now when t is zero.
func orNow(t, now time.Time) time.Time {
	if t.IsZero() {
		return now
	}
	return t.Truncate(time.Microsecond)
}

// CreateWorkflow stores w with its first version v.
func (s *WorkflowStore) CreateWorkflow(ctx context.Context, w workflow.Workflow, v workflow.Version) (workflow.Workflow, workflow.Version, error) {
	switch {
	case w.ID == "":
		return workflow.Workflow{}, workflow.Version{}, runstream.Errorf(runstream.CodeInvalidArgument, "create workflow: id is required")
	case w.OwnerID == "":
		return workflow.Workflow{}, workflow.Version{}, runstream.Errorf(runstream.CodeInvalidArgument, "create workflow: owner is required")
	case v.ID == "":
		return workflow.Workflow{}, workflow.Version{}, runstream.Errorf(runstream.CodeInvalidArgument, "create workflow: version id is required")
	}
	if err := firstError(checkID("create workflow: id", w.ID), checkID("create workflow: version id", v.ID),
		checkID("create workflow: owner", w.OwnerID), checkText("create workflow: name", w.Name),
		checkText("create workflow: description", w.Description), checkText("create workflow: definition", string(v.Definition))); err != nil {
		return workflow.Workflow{}, workflow.Version{}, err
	}
	if err := s.checkOpen(); err != nil {
		return workflow.Workflow{}, workflow.Version{}, err
	}
	t := storeNow()
	w.CreatedAt = orNow(w.CreatedAt, t)
	w.UpdatedAt = orNow(w.UpdatedAt, w.CreatedAt)
	w.LatestVersionID = v.ID
	v.WorkflowID, v.Number = w.ID, 1
	v.CreatedAt = orNow(v.CreatedAt, w.CreatedAt)
	v.Definition = cloneBytes(v.Definition)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO workflows (id, owner_id, name, description, latest_version_id, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING`,
			w.ID, w.OwnerID, w.Name, w.Description, w.LatestVersionID, w.CreatedAt, w.UpdatedAt)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return runstream.Errorf(runstream.CodeConflict, "create workflow: workflow %q exists", w.ID)
		}
		return insertVersion(ctx, tx, "create workflow", v)
	})
	if err != nil {
		return workflow.Workflow{}, workflow.Version{}, txError(err, "create workflow")
	}
	return w, cloneVersion(v), nil
}

// insertVersion inserts v, or fails with CodeConflict when its id is used.
func insertVersion(ctx context.Context, tx pgx.Tx, op string, v workflow.Version) error {
	tag, err := tx.Exec(ctx, `INSERT INTO workflow_versions (id, workflow_id, number, definition, created_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING`,
		v.ID, v.WorkflowID, v.Number, nullText(v.Definition), v.CreatedAt)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return runstream.Errorf(runstream.CodeConflict, "%s: version %q exists", op, v.ID)
	}
	return nil
}

const workflowColumns = `id, owner_id, name, description, latest_version_id, created_at, updated_at`

func scanWorkflow(row pgx.Row) (workflow.Workflow, error) {
	var w workflow.Workflow
	err := row.Scan(&w.ID, &w.OwnerID, &w.Name, &w.Description, &w.LatestVersionID, &w.CreatedAt, &w.UpdatedAt)
	w.CreatedAt, w.UpdatedAt = w.CreatedAt.UTC(), w.UpdatedAt.UTC()
	return w, err
}

// GetWorkflow returns the workflow if owner sees it.
func (s *WorkflowStore) GetWorkflow(ctx context.Context, id string, owner runstream.Owner) (workflow.Workflow, error) {
	if err := runstream.CheckOwner(owner); err != nil {
		return workflow.Workflow{}, err
	}
	if err := s.checkOpen(); err != nil {
		return workflow.Workflow{}, err
	}
	if !lookupable(id) || !ownerStorable(owner) {
		return workflow.Workflow{}, workflow.NotFound(id)
	}
	w, err := scanWorkflow(s.pool.QueryRow(ctx, `SELECT `+workflowColumns+` FROM workflows WHERE id = $1 AND `+ownerCond,
		ownerArgs(id, owner)...))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return workflow.Workflow{}, workflow.NotFound(id)
	case err != nil:
		return workflow.Workflow{}, dbError(err, "get workflow")
	}
	return w, nil
}

// ownerCond restricts a query of one row by id ($1) to the rows the Owner
// of ownerArgs sees, in the query itself: $2 is true for AnyOwner, $3 is
// the user id of any other Owner. The zero Owner sees no row (no row has
// the empty owner).
const ownerCond = `($2 OR owner_id = $3)`

// ownerArgs are the arguments of a query restricted by ownerCond. The
// caller checks ownerStorable first.
func ownerArgs(id string, owner runstream.Owner) []any {
	return []any{id, owner.All(), owner.UserID()}
}

// ownerStorable reports whether owner's user id can be a query argument:
// false for a user id PostgreSQL cannot store, which owns no row.
func ownerStorable(owner runstream.Owner) bool {
	return owner.All() || storableText(owner.UserID())
}

// ListWorkflows returns the workflows owner sees, newest first.
func (s *WorkflowStore) ListWorkflows(ctx context.Context, p workflow.ListWorkflowsParams) ([]workflow.Workflow, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	q, ok, err := newestFirst(ctx, s.pool, "workflows", p.Owner, p.BeforeID)
	if err != nil || !ok {
		return []workflow.Workflow{}, err
	}
	rows, err := s.pool.Query(ctx, q.page(workflowColumns, "workflows", p.Limit), q.args...)
	if err != nil {
		return nil, dbError(err, "list workflows")
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (workflow.Workflow, error) { return scanWorkflow(row) })
	if err != nil {
		return nil, dbError(err, "list workflows")
	}
	return append([]workflow.Workflow{}, out...), nil
}

// AddVersion stores v as the latest version of its workflow. The workflow
// row is locked, so that concurrent calls number their versions one after
// the other.
func (s *WorkflowStore) AddVersion(ctx context.Context, v workflow.Version, owner runstream.Owner) (workflow.Version, error) {
	if err := runstream.CheckOwner(owner); err != nil {
		return workflow.Version{}, err
	}
	if v.ID == "" {
		return workflow.Version{}, runstream.Errorf(runstream.CodeInvalidArgument, "add version: id is required")
	}
	if err := firstError(checkID("add version: id", v.ID), checkText("add version: definition", string(v.Definition))); err != nil {
		return workflow.Version{}, err
	}
	if err := s.checkOpen(); err != nil {
		return workflow.Version{}, err
	}
	if !lookupable(v.WorkflowID) || !ownerStorable(owner) {
		return workflow.Version{}, workflow.NotFound(v.WorkflowID)
	}
	v.CreatedAt = orNow(v.CreatedAt, storeNow())
	v.Definition = cloneBytes(v.Definition)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var one int32
		err := tx.QueryRow(ctx, `SELECT 1 FROM workflows WHERE id = $1 AND `+ownerCond+` FOR UPDATE`,
			ownerArgs(v.WorkflowID, owner)...).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return workflow.NotFound(v.WorkflowID)
		}
		if err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(number), 0) + 1 FROM workflow_versions WHERE workflow_id = $1`,
			v.WorkflowID).Scan(&v.Number); err != nil {
			return err
		}
		if err := insertVersion(ctx, tx, "add version", v); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE workflows SET latest_version_id = $2, updated_at = $3 WHERE id = $1`,
			v.WorkflowID, v.ID, v.CreatedAt)
		return err
	})
	if err != nil {
		return workflow.Version{}, txError(err, "add version")
	}
	return cloneVersion(v), nil
}

// GetVersion returns a version of a workflow owner sees.
func (s *WorkflowStore) GetVersion(ctx context.Context, workflowID, versionID string, owner runstream.Owner) (workflow.Version, error) {
	if err := runstream.CheckOwner(owner); err != nil {
		return workflow.Version{}, err
	}
	if err := s.checkOpen(); err != nil {
		return workflow.Version{}, err
	}
	if !lookupable(workflowID) || !ownerStorable(owner) {
		return workflow.Version{}, workflow.NotFound(workflowID)
	}
	if !lookupable(versionID) {
		versionID = "" // no version has the empty id
	}
	var (
		id         *string
		number     *int32
		definition []byte
		created    *time.Time
	)
	err := s.pool.QueryRow(ctx, `SELECT v.id, v.number, v.definition, v.created_at
		FROM workflows w LEFT JOIN workflow_versions v ON v.id = $4 AND v.workflow_id = w.id
		WHERE w.id = $1 AND ($2 OR w.owner_id = $3)`, append(ownerArgs(workflowID, owner), versionID)...).Scan(&id, &number, &definition, &created)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return workflow.Version{}, workflow.NotFound(workflowID)
	case err != nil:
		return workflow.Version{}, dbError(err, "get version")
	case id == nil:
		return workflow.Version{}, runstream.Errorf(runstream.CodeWorkflowVersionNotFound, "workflow %q has no version %q", workflowID, versionID)
	}
	return workflow.Version{ID: *id, WorkflowID: workflowID, Number: int(*number), Definition: definition, CreatedAt: created.UTC()}, nil
}

// listQuery builds the conditions of a newest-first listing; "?" in a
// condition stands for its argument.
type listQuery struct {
	where []string
	args  []any
}

func (q *listQuery) add(cond string, args ...any) {
	for _, a := range args {
		q.args = append(q.args, a)
		cond = strings.Replace(cond, "?", "$"+strconv.Itoa(len(q.args)), 1)
	}
	q.where = append(q.where, cond)
}

// page selects columns of the first limit rows of table that match q,
// newest first: created_at descending, then id descending (byte order).
func (q *listQuery) page(columns, table string, limit int) string {
	sql := "SELECT " + columns + " FROM " + table
	if len(q.where) > 0 {
		sql += " WHERE " + strings.Join(q.where, " AND ")
	}
	return sql + " ORDER BY created_at DESC, id DESC LIMIT " + strconv.Itoa(limit)
}

// newestFirst starts a listing of table for owner after the row beforeID.
// The cursor row is looked up among every row owner sees: an id owner
// does not see fails with CodeInvalidArgument. ok is false when owner can
// see no row at all.
func newestFirst(ctx context.Context, pool *pgxpool.Pool, table string, owner runstream.Owner, beforeID string) (q listQuery, ok bool, err error) {
	if !owner.All() {
		if !storableText(owner.UserID()) {
			if beforeID != "" {
				return q, false, errUnknownCursor(beforeID)
			}
			return q, false, nil
		}
		q.add("owner_id = ?", owner.UserID())
	}
	if beforeID == "" {
		return q, true, nil
	}
	if !lookupable(beforeID) {
		return q, false, errUnknownCursor(beforeID)
	}
	var created time.Time
	cursor := listQuery{where: append([]string{}, q.where...), args: append([]any{}, q.args...)}
	cursor.add("id = ?", beforeID)
	err = pool.QueryRow(ctx, cursor.page("created_at", table, 1), cursor.args...).Scan(&created)
	if errors.Is(err, pgx.ErrNoRows) {
		return q, false, errUnknownCursor(beforeID)
	}
	if err != nil {
		return q, false, dbError(err, "list "+table)
	}
	q.add("(created_at, id) < (?, ?)", created, beforeID)
	return q, true, nil
}

func errUnknownCursor(id string) error {
	return runstream.Errorf(runstream.CodeInvalidArgument, "unknown cursor %q", id)
}

// txError returns the *runstream.Error a transaction function returned, or
// wraps a driver error.
func txError(err error, op string) error {
	var e *runstream.Error
	if errors.As(err, &e) {
		return e
	}
	return dbError(err, op)
}

// checkID refuses an id longer than workflow.MaxIDBytes or not storable.
func checkID(what, id string) error {
	if len(id) > workflow.MaxIDBytes {
		return runstream.Errorf(runstream.CodeInvalidArgument, "%s is longer than %d bytes", what, workflow.MaxIDBytes)
	}
	return checkText(what, id)
}

// checkText refuses text PostgreSQL cannot hold.
func checkText(what, s string) error {
	if !storableText(s) {
		return runstream.Errorf(runstream.CodeInvalidArgument, "%s must be valid UTF-8 without NUL characters", what)
	}
	return nil
}

// lookupable reports whether id may name a stored row; a read of any other
// id finds nothing.
func lookupable(id string) bool {
	return len(id) <= workflow.MaxIDBytes && utf8.ValidString(id) && !strings.ContainsRune(id, 0)
}

// nullText is b as a text argument: NULL for nil.
func nullText(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// nullTime is t as a timestamptz argument: NULL for the zero time.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// utcOrZero reads back a nullable time.
func utcOrZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

func cloneVersion(v workflow.Version) workflow.Version {
	v.Definition = cloneBytes(v.Definition)
	return v
}
