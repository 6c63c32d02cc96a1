-- workflow_runs_claimable (0004_queue.sql) served Claim before it shared
-- the workers among owners (0007_claim_owners.sql): Claim now reads
-- workflow_runs_waiting_owner and workflow_runs_leased only, so the index
-- cost every change of a run's status a write and saved nothing.
DROP INDEX IF EXISTS workflow_runs_claimable;
