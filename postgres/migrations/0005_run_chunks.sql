-- The chunk streams of LangGraph-compatible runs (package runchunks): one
-- row per run in stream_runs, its chunks in stream_chunks. Pushes lock the
-- run's row (SELECT … FOR UPDATE), so that two producers of one run, on
-- any instances, apply their pushes one after the other.

CREATE TABLE stream_runs (
    run_id text COLLATE "C" PRIMARY KEY,
    thread_id text COLLATE "C" NOT NULL,
    owner_id text NOT NULL,
    epoch bigint NOT NULL,
    -- next_index is the index of the next new chunk; first_index the lowest
    -- kept (first_index = next_index: none kept).
    next_index bigint NOT NULL,
    first_index bigint NOT NULL,
    status text NOT NULL,
    -- NULL once the run ended.
    lease_expires_at timestamptz,
    -- NULL: no cancel request.
    cancel_action text,
    cancel_requested_at timestamptz,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    -- NULL while the run is active.
    ended_at timestamptz
);

-- The lease sweeper: active runs by lease.
CREATE INDEX stream_runs_lease ON stream_runs (lease_expires_at) WHERE ended_at IS NULL;

-- Retention: ended runs that still keep chunks, by end.
CREATE INDEX stream_runs_ended ON stream_runs (ended_at) WHERE ended_at IS NOT NULL AND first_index < next_index;

CREATE TABLE stream_chunks (
    run_id text COLLATE "C" NOT NULL,
    idx bigint NOT NULL,
    event text NOT NULL,
    -- Compact JSON, as text.
    data text NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (run_id, idx)
);
