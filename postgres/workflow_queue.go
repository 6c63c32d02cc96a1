package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

var (
	_ workflow.Queue           = (*WorkflowStore)(nil)
	_ workflow.NodeOutputStore = (*WorkflowStore)(nil)
)

// claimSQL leases to $1 until $3 the run Claim takes at $2 under the cap
// $4, visiting at most $6 (workflow.ClaimWindow) owners after the cursor
// $5 (see workflow.Queue), in one statement. It reads a bounded number of
// index entries, whatever the number of owners and their backlogs:
//
//   - after lists the owners after the cursor, and before, when after
//     found fewer than $6, the owners from the first up to the cursor
//     (the ring wraps around), each by one search of
//     workflow_runs_waiting_owner, which holds the waiting runs (queued or
//     running, with no lease); visited is both, numbered in the order
//     visited;
//   - candidates holds, for each visited owner below the cap ($4 = 0: no
//     cap), its oldest waiting run, the first entry of its owner in
//     workflow_runs_waiting_owner, of rank the owner's runs whose lease
//     holds (one search of workflow_runs_leased); then the oldest run whose
//     lease expired (workflow_runs_leased, the few leased runs) and the
//     oldest cancelling run without a lease, both of rank 0 whatever the
//     cap;
//   - next locks the candidate first by (rank, created_at, id) whose row
//     is free (FOR UPDATE OF r SKIP LOCKED), rechecking on the newest
//     version of a row that changed since the statement began that it is
//     still claimable;
//   - claimed writes the lease fields of the row next locked, so that even
//     claims that did not wait for each other (claimLockSQL) never take
//     the same run.
//
// It returns one row: the last owner visited, the next cursor (NULL when
// no owner has a waiting run), then the columns of the run claimed,
// NULL when none is. A candidate locked by another transaction (an append
// to the run) is passed over for the next candidate, or none, and a later
// claim finds it.
//
// A run whose lease holds no expiry is claimable, as in the reference
// store (a zero expiry has passed).
const claimSQL = `WITH RECURSIVE after AS (
	SELECT (SELECT min(owner_id) FROM workflow_runs
		WHERE lease_owner = '' AND status IN ('queued', 'running') AND owner_id > $5) AS owner_id, 1 AS n
	UNION ALL
	SELECT (SELECT min(w.owner_id) FROM workflow_runs w
		WHERE w.lease_owner = '' AND w.status IN ('queued', 'running') AND w.owner_id > a.owner_id), a.n + 1
	FROM after a WHERE a.owner_id IS NOT NULL AND a.n < $6::int
), before AS (
	SELECT (SELECT min(owner_id) FROM workflow_runs
		WHERE lease_owner = '' AND status IN ('queued', 'running') AND owner_id <= $5) AS owner_id,
		(SELECT count(owner_id) FROM after)::int + 1 AS n
	UNION ALL
	SELECT (SELECT min(w.owner_id) FROM workflow_runs w
		WHERE w.lease_owner = '' AND w.status IN ('queued', 'running') AND w.owner_id > b.owner_id AND w.owner_id <= $5), b.n + 1
	FROM before b WHERE b.owner_id IS NOT NULL AND b.n < $6::int
), visited AS (
	SELECT owner_id, n FROM after WHERE owner_id IS NOT NULL
	UNION ALL
	SELECT owner_id, n FROM before WHERE owner_id IS NOT NULL AND n <= $6::int
), executing AS (
	SELECT o.owner_id, (SELECT count(*) FROM workflow_runs w
		WHERE w.owner_id = o.owner_id AND w.lease_owner <> ''
			AND w.status IN ('queued', 'running', 'cancelling') AND w.lease_expires_at > $2) AS n
	FROM visited o
), candidates AS (
	SELECT f.id, e.n AS rank
	FROM executing e
		CROSS JOIN LATERAL (SELECT w.id FROM workflow_runs w
			WHERE w.owner_id = e.owner_id AND w.lease_owner = '' AND w.status IN ('queued', 'running')
			ORDER BY w.owner_id, w.created_at, w.id LIMIT 1) f
	WHERE $4::bigint = 0 OR e.n < $4::bigint
	UNION ALL
	(SELECT id, 0 FROM workflow_runs
	WHERE lease_owner <> '' AND status IN ('queued', 'running', 'cancelling')
		AND (lease_expires_at IS NULL OR lease_expires_at <= $2)
	ORDER BY created_at, id LIMIT 1)
	UNION ALL
	(SELECT id, 0 FROM workflow_runs
	WHERE status = 'cancelling' AND lease_owner = ''
	ORDER BY created_at, id LIMIT 1)
), next AS (
	SELECT r.id FROM candidates c JOIN workflow_runs r ON r.id = c.id
	WHERE r.status IN ('queued', 'running', 'cancelling')
		AND (r.lease_owner = '' OR r.lease_expires_at IS NULL OR r.lease_expires_at <= $2)
	ORDER BY c.rank, r.created_at, r.id
	LIMIT 1
	FOR UPDATE OF r SKIP LOCKED
), claimed AS (
	UPDATE workflow_runs r SET lease_owner = $1, lease_expires_at = $3
	FROM next WHERE r.id = next.id
	RETURNING ` + qualifiedRunColumns + `
)
SELECT (SELECT owner_id FROM visited ORDER BY n DESC LIMIT 1), claimed.*
FROM (SELECT) AS one LEFT JOIN claimed ON true`

// claimLockSQL serialises the claims of every instance sharing the
// schema: sent with claimSQL in one batch, it holds the lock until the
// claim commits (the batch is one implicit transaction, as in queryPage),
// and claimSQL, whose snapshot is taken after the lock, sees the leases of
// every claim before it. So two claims never both count an owner below the
// cap and both take one of its runs, nor both pick the same candidate
// (where the second would pass over it and find none). The lock's key
// names the schema (current_schema(), where claimSQL finds workflow_runs),
// so that deployments in other schemas of the database do not wait for
// it. Each claim holds the lock for one claimSQL, a fraction of a
// millisecond.
const claimLockSQL = `SELECT pg_advisory_xact_lock(` + claimLockKey + `)`

// claimLockKey is the key of claimLockSQL's lock in the current schema.
const claimLockKey = `hashtextextended('runstream_claims ' || coalesce(current_schema(), ''), 0)`

// qualifiedRunColumns are runColumns of the table aliased r.
const qualifiedRunColumns = `r.id, r.workflow_id, r.version_id, r.owner_id, r.status, r.input, r.output, r.error, r.last_seq,
	r.created_at, r.updated_at, r.started_at, r.finished_at, r.lease_owner, r.lease_expires_at`

// Claim leases to workerID until leaseUntil the first candidate by
// (rank, CreatedAt, ID) among the owners it visits, under the cap
// maxPerOwner (see workflow.Queue), with claimLockSQL and claimSQL in one
// round trip. A candidate whose row another transaction holds at that
// moment (an append to the run) is passed over for the next candidate
// (another owner's run, or a run taken over) or none, and a later claim
// finds it. Claiming does not change the run's UpdatedAt. The cursor is
// this store's: another instance keeps its own, and claims of this store
// that overlap in time may start from the same cursor (the engine claims
// one after another).
func (s *WorkflowStore) Claim(ctx context.Context, workerID string, now, leaseUntil time.Time, maxPerOwner int) (workflow.Run, bool, error) {
	if err := checkLease("claim", workerID, leaseUntil); err != nil {
		return workflow.Run{}, false, err
	}
	if err := workflow.CheckClaimCap(maxPerOwner); err != nil {
		return workflow.Run{}, false, err
	}
	if err := s.checkOpen(); err != nil {
		return workflow.Run{}, false, err
	}
	args := []any{workerID, now.UTC(), leaseTime(leaseUntil), int64(maxPerOwner), s.claims.Owner(), workflow.ClaimWindow}
	res, err := queryAfter(ctx, s.pool, claimLockSQL, claimSQL, args, scanClaim)
	if err != nil {
		return workflow.Run{}, false, dbError(err, "claim")
	}
	if res.cursor != nil {
		s.claims.Move(*res.cursor)
	}
	return res.run, res.ok, nil
}

// claimResult is the row of claimSQL: the next cursor (nil when no owner
// has a waiting run), and the run leased, if any.
type claimResult struct {
	cursor *string
	run    workflow.Run
	ok     bool
}

// scanClaim reads the one row of claimSQL and closes rows.
func scanClaim(rows pgx.Rows) (claimResult, error) {
	defer rows.Close()
	var res claimResult
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return res, err
		}
		return res, errors.New("claim: the statement returned no row")
	}
	var err error
	if rows.RawValues()[1] == nil {
		// No run claimed: read the cursor, skip the run's NULL columns.
		dest := make([]any, len(rows.FieldDescriptions()))
		dest[0] = &res.cursor
		err = rows.Scan(dest...)
	} else {
		res.run, err = scanRun(cursorRow{rows, &res.cursor})
		res.ok = true
	}
	if err != nil {
		return claimResult{}, err
	}
	rows.Close()
	return res, rows.Err()
}

// cursorRow is the row of claimSQL as scanRun reads it: Scan reads the
// first column, the cursor, into cursor, then the run's columns into dest.
type cursorRow struct {
	pgx.Rows
	cursor **string
}

func (r cursorRow) Scan(dest ...any) error {
	return r.Rows.Scan(append([]any{r.cursor}, dest...)...)
}

// renewSQL and releaseSQL are the compare-and-set UPDATEs of the run $1
// leased to $2. Each tells, in one statement (one round trip), whether it
// matched (changed) and whether the run exists (found): the outcome and the
// reason of a miss.
const (
	renewSQL = `WITH changed AS (
	UPDATE workflow_runs SET lease_expires_at = $3 WHERE id = $1 AND lease_owner = $2 RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM changed), EXISTS (SELECT 1 FROM workflow_runs WHERE id = $1)`
	releaseSQL = `WITH changed AS (
	UPDATE workflow_runs SET lease_owner = '', lease_expires_at = NULL WHERE id = $1 AND lease_owner = $2 RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM changed), EXISTS (SELECT 1 FROM workflow_runs WHERE id = $1)`
)

// RenewLease moves the lease workerID holds on a run to leaseUntil, with
// one compare-and-set UPDATE (see workflow.Queue). A lease that expired
// but that nobody took over is renewed.
func (s *WorkflowStore) RenewLease(ctx context.Context, runID, workerID string, leaseUntil time.Time) error {
	if err := checkLease("renew lease", workerID, leaseUntil); err != nil {
		return err
	}
	return s.setLease(ctx, "renew lease", renewSQL, runID, workerID, leaseTime(leaseUntil))
}

// ReleaseLease clears the lease workerID holds on a run, with one
// compare-and-set UPDATE, so that the run is claimable at once (see
// workflow.Queue).
func (s *WorkflowStore) ReleaseLease(ctx context.Context, runID, workerID string) error {
	if workerID == "" {
		return runstream.Errorf(runstream.CodeInvalidArgument, "release lease: worker id is required")
	}
	if err := checkText("release lease: worker id", workerID); err != nil {
		return err
	}
	return s.setLease(ctx, "release lease", releaseSQL, runID, workerID)
}

// setLease runs renewSQL or releaseSQL and turns a miss into
// CodeWorkflowRunNotFound or CodeConflict.
func (s *WorkflowStore) setLease(ctx context.Context, op, sql, runID, workerID string, more ...any) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	if !lookupable(runID) {
		return workflow.RunNotFound(runID)
	}
	var changed, found bool
	if err := s.pool.QueryRow(ctx, sql, append([]any{runID, workerID}, more...)...).Scan(&changed, &found); err != nil {
		return dbError(err, op)
	}
	switch {
	case !found:
		return workflow.RunNotFound(runID)
	case !changed:
		return errNotLeased(runID, workerID)
	}
	return nil
}

func errNotLeased(runID, workerID string) error {
	return runstream.Errorf(runstream.CodeConflict, "run %q is not leased to %q", runID, workerID)
}

// checkLease validates the worker and expiry of a claim or renewal: a
// worker id PostgreSQL cannot store is refused like an empty one.
func checkLease(op, workerID string, leaseUntil time.Time) error {
	switch {
	case workerID == "":
		return runstream.Errorf(runstream.CodeInvalidArgument, "%s: worker id is required", op)
	case leaseUntil.IsZero():
		return runstream.Errorf(runstream.CodeInvalidArgument, "%s: lease expiry is required", op)
	}
	return checkText(op+": worker id", workerID)
}

// leaseTime is a lease expiry as it is stored: UTC, microseconds.
func leaseTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// NodeOutputs returns the stored outputs of the run's nodes, with one
// query that also tells an unknown run from one without outputs.
func (s *WorkflowStore) NodeOutputs(ctx context.Context, runID string) (map[string]json.RawMessage, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if !lookupable(runID) {
		return nil, workflow.RunNotFound(runID)
	}
	rows, err := s.pool.Query(ctx, `SELECT o.node_id, o.output
		FROM workflow_runs r LEFT JOIN workflow_node_outputs o ON o.run_id = r.id
		WHERE r.id = $1`, runID)
	if err != nil {
		return nil, dbError(err, "node outputs")
	}
	defer rows.Close()
	found := false
	out := map[string]json.RawMessage{}
	for rows.Next() {
		found = true
		var node *string
		var output []byte
		if err := rows.Scan(&node, &output); err != nil {
			return nil, dbError(err, "node outputs")
		}
		if node != nil { // nil: the run has no output
			out[*node] = output
		}
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(err, "node outputs")
	}
	if !found {
		return nil, workflow.RunNotFound(runID)
	}
	return out, nil
}

// storableNodeOutputs rejects, with CodeInvalidArgument, node outputs
// that PostgreSQL cannot hold: node ids with invalid UTF-8 or NUL, outputs
// with invalid UTF-8 (valid JSON holds no raw NUL). The caller has checked
// the outputs with workflow.CheckNodeOutputs.
func storableNodeOutputs(outputs map[string]json.RawMessage) error {
	for id, out := range outputs {
		if !storableText(id) || !utf8.Valid(out) {
			return runstream.Errorf(runstream.CodeInvalidArgument, "node outputs: node ids and outputs must be valid UTF-8 without NUL characters")
		}
	}
	return nil
}

// nodeOutputKey names a stored node output.
type nodeOutputKey struct{ run, node string }

// nodeOutputs collects the node outputs one transaction writes. An output
// added again for a node replaces the earlier one, so that the upsert
// never meets one key twice (which PostgreSQL refuses).
type nodeOutputs map[nodeOutputKey]string

// add keeps copies of the outputs of run (checked by
// workflow.CheckNodeOutputs and storableNodeOutputs).
func (o nodeOutputs) add(runID string, outputs map[string]json.RawMessage) {
	for node, out := range outputs {
		o[nodeOutputKey{runID, node}] = string(out)
	}
}

// upsertNodeOutputs writes node outputs given column by column, replacing
// the stored output of a node.
const upsertNodeOutputs = `INSERT INTO workflow_node_outputs (run_id, node_id, output)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
ON CONFLICT (run_id, node_id) DO UPDATE SET output = EXCLUDED.output`

// queue adds the upsert of the outputs to b, in key order (the same in
// every transaction), when there is any.
func (o nodeOutputs) queue(b *pgx.Batch) {
	if len(o) == 0 {
		return
	}
	keys := slices.SortedFunc(maps.Keys(o), func(a, b nodeOutputKey) int {
		return cmp.Or(cmp.Compare(a.run, b.run), cmp.Compare(a.node, b.node))
	})
	runs, nodes, outs := make([]string, len(keys)), make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		runs[i], nodes[i], outs[i] = k.run, k.node, o[k]
	}
	b.Queue(upsertNodeOutputs, runs, nodes, outs)
}

// send writes the outputs within tx, when there is any.
func (o nodeOutputs) send(ctx context.Context, tx pgx.Tx) error {
	b := &pgx.Batch{}
	o.queue(b)
	if b.Len() == 0 {
		return nil
	}
	return tx.SendBatch(ctx, b).Close()
}
