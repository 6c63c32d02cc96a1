-- Claim shares the workers among owners (workflow.Queue). It visits, round
-- robin, up to workflow.ClaimWindow of the owners that have a queued,
-- running or cancelling run, one index search per owner to find the next
-- owner, and one to take the oldest of its runs without a lease: this
-- index holds those runs only, in that order per owner, so an owner's
-- backlog costs a claim one search, not a scan. The lease columns are left
-- out, so that claims and renewals do not touch it.
CREATE INDEX workflow_runs_claimable_owner ON workflow_runs (owner_id, created_at, id)
    WHERE status IN ('queued', 'running', 'cancelling');

-- The runs that hold a lease, by owner: the runs engines execute, whose
-- count per owner Claim ranks and caps owners by, and those whose engine
-- was lost, which Claim takes over first. They are few (about the workers
-- of the deployment): a terminal event, a release and a parked run's
-- release clear the lease. Renewals change only lease_expires_at, which
-- this index leaves out, so they stay HOT updates.
CREATE INDEX workflow_runs_leased ON workflow_runs (owner_id)
    WHERE lease_owner <> '';
