-- Claim shares the workers among owners (workflow.Queue). It visits, round
-- robin, up to workflow.ClaimWindow of the owners that have a waiting run
-- (queued or running, with no lease), one index search per owner to find
-- the next owner, and takes the first entry of each, its oldest waiting
-- run: this index holds those runs only, in that order per owner, so an
-- owner's backlog costs a claim one search, not a scan, and owners whose
-- runs all execute are not visited. A claim and a release move a run out
-- of it and back; renewals, which change only lease_expires_at, do not
-- touch it (they stay HOT updates).
CREATE INDEX workflow_runs_waiting_owner ON workflow_runs (owner_id, created_at, id)
    WHERE lease_owner = '' AND status IN ('queued', 'running');

-- The runs that hold a lease, by owner: the runs engines execute, whose
-- count per owner Claim ranks and caps owners by, and those whose engine
-- was lost, which Claim takes over first. They are few (about the workers
-- of the deployment): a terminal event, a release and a parked run's
-- release clear the lease. Renewals change only lease_expires_at, which
-- this index leaves out, so they stay HOT updates.
CREATE INDEX workflow_runs_leased ON workflow_runs (owner_id)
    WHERE lease_owner <> '';
