-- Workflow run queue and node outputs (workflow.Queue and
-- workflow.NodeOutputStore).

-- Claim takes the oldest run (created_at, then id) among the runs an
-- engine may execute, and checks their leases. The index holds only those
-- runs (queued, running, cancelling): parked and finished runs, the bulk
-- of a long-lived file, cost a claim nothing. Claim's WHERE repeats this
-- status list word for word, as SQLite requires to use a partial index.
-- The lease columns are left out, so that renewing a lease does not touch
-- the index.
CREATE INDEX workflow_runs_claimable ON workflow_runs (created_at, id)
	WHERE status IN ('queued', 'running', 'cancelling');

-- The full output of each completed node of a run, written with the
-- node.completed (or run.resumed) event that reports it. output is one JSON
-- value, stored byte for byte.
CREATE TABLE workflow_node_outputs (
	run_id  TEXT NOT NULL REFERENCES workflow_runs (id),
	node_id TEXT NOT NULL,
	output  TEXT NOT NULL,
	PRIMARY KEY (run_id, node_id)
) STRICT, WITHOUT ROWID;
