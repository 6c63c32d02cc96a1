package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

// The run queue and node outputs of the WorkflowStore (tables and indexes
// of migrations/0004_queue.sql and 0007_claim_owners.sql).
//
// Claim, RenewLease and ReleaseLease are write requests of the DB's write
// loop, like Append: each runs in the group transaction, which holds the
// file's write lock (BEGIN IMMEDIATE) against every connection of every
// process, so that a lease read and changed by one request cannot change
// in between. Their statements are not prepared: an engine claims a few
// times a second, not thousands.

var (
	_ workflow.Queue           = (*WorkflowStore)(nil)
	_ workflow.NodeOutputStore = (*WorkflowStore)(nil)
)

// claimableSQL picks the run Claim takes at ?1 (microseconds) under the
// cap ?2, visiting at most ?4 (workflow.ClaimWindow) owners after the
// cursor ?3 (see workflow.Queue). It reads a bounded number of index
// entries, whatever the number of owners and their backlogs:
//
//   - after lists the owners after the cursor, and before, when after
//     found fewer than ?4, the owners from the first up to the cursor
//     (the ring wraps around), each by one search of
//     workflow_runs_waiting_owner, which holds the waiting runs (queued or
//     running, with no lease); visited is both, numbered in the order
//     visited;
//   - executing counts the runs of each visited owner whose lease holds,
//     one search each in the partial index workflow_runs_leased;
//   - candidates holds, for each visited owner below the cap (?2 = 0: no
//     cap), its oldest waiting run, the first entry of its owner in
//     workflow_runs_waiting_owner, of rank its count; then the oldest run
//     whose lease expired (workflow_runs_leased, the few leased runs) and
//     the oldest cancelling run without a lease (workflow_runs_status,
//     which cancelling runs are few of), both of rank 0 whatever the cap.
//
// It returns the candidate first by (rank, created_at, id) (CROSS JOIN
// keeps the candidates the outer loop: each is one search by id), or
// NULL, and the last owner visited, the next cursor (NULL when no owner
// has a waiting run). The partial indexes' WHERE are repeated word for
// word, as SQLite requires to use a partial index, and INDEXED BY makes
// the statement fail to prepare should an index be lost. A lease with an
// owner and no expiry counts as expired, as in the memory store.
const claimableSQL = `WITH RECURSIVE
	after (owner_id, n) AS MATERIALIZED (
		SELECT (SELECT min(owner_id) FROM workflow_runs INDEXED BY workflow_runs_waiting_owner
			WHERE lease_owner = '' AND status IN ('queued', 'running') AND owner_id > ?3), 1
		UNION ALL
		SELECT (SELECT min(owner_id) FROM workflow_runs INDEXED BY workflow_runs_waiting_owner
			WHERE lease_owner = '' AND status IN ('queued', 'running') AND owner_id > after.owner_id), n + 1
		FROM after WHERE owner_id IS NOT NULL AND n < ?4
	),
	before (owner_id, n) AS (
		SELECT (SELECT min(owner_id) FROM workflow_runs INDEXED BY workflow_runs_waiting_owner
			WHERE lease_owner = '' AND status IN ('queued', 'running') AND owner_id <= ?3),
			(SELECT count(owner_id) FROM after) + 1
		UNION ALL
		SELECT (SELECT min(owner_id) FROM workflow_runs INDEXED BY workflow_runs_waiting_owner
			WHERE lease_owner = '' AND status IN ('queued', 'running') AND owner_id > before.owner_id AND owner_id <= ?3), n + 1
		FROM before WHERE owner_id IS NOT NULL AND n < ?4
	),
	visited (owner_id, n) AS MATERIALIZED (
		SELECT owner_id, n FROM after WHERE owner_id IS NOT NULL
		UNION ALL
		SELECT owner_id, n FROM before WHERE owner_id IS NOT NULL AND n <= ?4
	),
	executing (owner_id, n) AS (
		SELECT o.owner_id, (SELECT count(*) FROM workflow_runs INDEXED BY workflow_runs_leased
			WHERE owner_id = o.owner_id AND lease_owner <> ''
				AND status IN ('queued', 'running', 'cancelling') AND lease_expires_at > ?1)
		FROM visited AS o
	),
	candidates (id, rank) AS (
		SELECT (SELECT id FROM workflow_runs INDEXED BY workflow_runs_waiting_owner
				WHERE owner_id = e.owner_id AND lease_owner = '' AND status IN ('queued', 'running')
				ORDER BY created_at, id LIMIT 1),
			e.n
		FROM executing AS e
		WHERE ?2 = 0 OR e.n < ?2
		UNION ALL
		SELECT * FROM (SELECT id, 0 FROM workflow_runs INDEXED BY workflow_runs_leased
			WHERE lease_owner <> '' AND status IN ('queued', 'running', 'cancelling')
				AND (lease_expires_at IS NULL OR lease_expires_at <= ?1)
			ORDER BY created_at, id LIMIT 1)
		UNION ALL
		SELECT * FROM (SELECT id, 0 FROM workflow_runs INDEXED BY workflow_runs_status
			WHERE status = 'cancelling' AND lease_owner = ''
			ORDER BY created_at, id LIMIT 1)
	)
	SELECT (SELECT r.id FROM candidates AS c CROSS JOIN workflow_runs AS r
			WHERE r.id = c.id
			ORDER BY c.rank, r.created_at, r.id LIMIT 1),
		(SELECT owner_id FROM visited ORDER BY n DESC LIMIT 1)`

// claimSQL leases the run claimableSQL picked, ?3, to ?1 until ?2, and
// returns the run as it leaves it. Both run in the write loop's
// transaction, so nothing changes between the pick and the lease.
const claimSQL = `UPDATE workflow_runs SET lease_owner = ?1, lease_expires_at = ?2
	WHERE id = ?3
	RETURNING ` + runColumns

// The compare-and-sets of RenewLease (?1 the new expiry) and ReleaseLease:
// they change the run only when ?3 holds its lease.
const (
	renewLeaseSQL   = `UPDATE workflow_runs SET lease_expires_at = ?1 WHERE id = ?2 AND lease_owner = ?3`
	releaseLeaseSQL = `UPDATE workflow_runs SET lease_owner = '', lease_expires_at = NULL WHERE id = ?2 AND lease_owner = ?3`
	runExistsSQL    = `SELECT 1 FROM workflow_runs WHERE id = ?`
)

// Node outputs: written by Append and Resume, read by NodeOutputs. The
// read returns one row per output, or one row of NULLs when the run has
// none, or no row when the run does not exist.
const (
	putNodeOutputSQL = `INSERT INTO workflow_node_outputs (run_id, node_id, output) VALUES (?, ?, ?)
		ON CONFLICT (run_id, node_id) DO UPDATE SET output = excluded.output`
	nodeOutputsSQL = `SELECT o.node_id, o.output FROM workflow_runs r
		LEFT JOIN workflow_node_outputs o ON o.run_id = r.id WHERE r.id = ?`
)

// Claim leases to workerID until leaseUntil the first candidate by
// (rank, CreatedAt, ID) among the owners it visits, under the cap
// maxPerOwner (see workflow.Queue): claimableSQL then claimSQL, in the
// write loop, which runs one claim at a time against every process, so
// the cap holds exactly. The cursor is the store's, in this process: the
// write loop serialises its claims, and another process (or another DB
// on the same file) keeps its own. If ctx ends while the request is in the
// write loop, Claim fails and the run may still have been leased: it is
// claimable again once the lease expires.
func (s *WorkflowStore) Claim(ctx context.Context, workerID string, now, leaseUntil time.Time, maxPerOwner int) (workflow.Run, bool, error) {
	if err := firstError(s.checkOpen(), checkLease("claim", workerID, leaseUntil), workflow.CheckClaimCap(maxPerOwner)); err != nil {
		return workflow.Run{}, false, err
	}
	until, at := micros(truncated(leaseUntil)), micros(now)
	var (
		run     workflow.Run
		ok      bool
		cursor  string
		started bool
	)
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		// The op runs again when its write group is retried: it starts
		// from the cursor of its first run, so that it visits the same
		// owners and does not skip a window.
		if !started {
			cursor, started = s.claims.Owner(), true
		}
		run, ok = workflow.Run{}, false
		var id, next sql.NullString
		if err := tx.QueryRowContext(ctx, claimableSQL, at, maxPerOwner, cursor, workflow.ClaimWindow).Scan(&id, &next); err != nil {
			return sqlError("sqlite: claim", err)
		}
		if next.Valid {
			s.claims.Move(next.String)
		}
		if !id.Valid {
			return nil
		}
		var err error
		if run, err = scanRun(tx.QueryRowContext(ctx, claimSQL, workerID, until, id.String)); err != nil {
			return sqlError("sqlite: claim", err)
		}
		ok = true
		return nil
	})
	if err != nil {
		return workflow.Run{}, false, err
	}
	return run, ok, nil
}

// RenewLease moves the lease workerID holds on a run to leaseUntil, with
// one compare-and-set.
func (s *WorkflowStore) RenewLease(ctx context.Context, runID, workerID string, leaseUntil time.Time) error {
	const op = "renew lease"
	if err := firstError(s.checkOpen(), checkLease(op, workerID, leaseUntil)); err != nil {
		return err
	}
	return s.setLease(ctx, op, renewLeaseSQL, runID, workerID, micros(truncated(leaseUntil)))
}

// ReleaseLease clears the lease workerID holds on a run, with one
// compare-and-set.
func (s *WorkflowStore) ReleaseLease(ctx context.Context, runID, workerID string) error {
	const op = "release lease"
	if err := s.checkOpen(); err != nil {
		return err
	}
	if workerID == "" {
		return runstream.Errorf(runstream.CodeInvalidArgument, "%s: worker id is required", op)
	}
	return s.setLease(ctx, op, releaseLeaseSQL, runID, workerID, nil)
}

// setLease runs the compare-and-set query (?1 expiry, ?2 run id, ?3
// worker id) and, when it changed nothing, tells an unknown run
// (CodeWorkflowRunNotFound) from a run not leased to workerID
// (CodeConflict).
func (s *WorkflowStore) setLease(ctx context.Context, op, query, runID, workerID string, expiry any) error {
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, query, expiry, runID, workerID)
		if err != nil {
			return sqlError("sqlite: "+op, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return sqlError("sqlite: "+op, err)
		}
		if n > 0 {
			return nil
		}
		var one int
		err = tx.QueryRowContext(ctx, runExistsSQL, runID).Scan(&one)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return workflow.RunNotFound(runID)
		case err != nil:
			return sqlError("sqlite: "+op+": look up run", err)
		}
		return runstream.Errorf(runstream.CodeConflict, "%s: run %q is not leased to %q", op, runID, workerID)
	})
}

// checkLease rejects an empty worker id or expiry with
// CodeInvalidArgument.
func checkLease(op, workerID string, leaseUntil time.Time) error {
	switch {
	case workerID == "":
		return runstream.Errorf(runstream.CodeInvalidArgument, "%s: worker id is required", op)
	case leaseUntil.IsZero():
		return runstream.Errorf(runstream.CodeInvalidArgument, "%s: lease expiry is required", op)
	}
	return nil
}

// NodeOutputs returns the stored outputs of the run's nodes, read in one
// statement on the read pool.
func (s *WorkflowStore) NodeOutputs(ctx context.Context, runID string) (map[string]json.RawMessage, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	rows, err := s.db.reads.query(ctx, nodeOutputsSQL, runID)
	if err != nil {
		return nil, sqlError("sqlite: node outputs", err)
	}
	defer rows.Close()
	var (
		out    map[string]json.RawMessage // nil until the run is found
		node   sql.NullString
		output []byte
	)
	for rows.Next() {
		if err := rows.Scan(&node, &output); err != nil {
			return nil, sqlError("sqlite: node outputs", err)
		}
		if out == nil {
			out = map[string]json.RawMessage{}
		}
		if node.Valid {
			out[node.String] = output // Scan copied it into a new slice
		}
		output = nil
	}
	if err := rows.Err(); err != nil {
		return nil, sqlError("sqlite: node outputs", err)
	}
	if out == nil {
		return nil, workflow.RunNotFound(runID)
	}
	return out, nil
}

// nodeOutput is one row of workflow_node_outputs, copied from the caller's
// arguments before the write is queued.
type nodeOutput struct {
	nodeID, output string
}

// nodeOutputRows copies outputs, checked by workflow.CheckNodeOutputs.
func nodeOutputRows(outputs map[string]json.RawMessage) []nodeOutput {
	rows := make([]nodeOutput, 0, len(outputs))
	for id, v := range outputs {
		rows = append(rows, nodeOutput{nodeID: id, output: string(v)})
	}
	return rows
}

// putNodeOutputs stores the outputs of a run's nodes in tx, replacing the
// older output of a node.
func putNodeOutputs(ctx context.Context, tx *sql.Tx, runID string, outputs []nodeOutput) error {
	for _, o := range outputs {
		if _, err := tx.ExecContext(ctx, putNodeOutputSQL, runID, o.nodeID, o.output); err != nil {
			return sqlError("sqlite: store node output", err)
		}
	}
	return nil
}
