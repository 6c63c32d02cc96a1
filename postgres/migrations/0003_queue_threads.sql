-- The engine queue and node outputs (package workflow: Queue,
-- NodeOutputStore), thread runs, feedback and idempotency keys (package
-- runevents: RunStore, IdempotencyStore).
--
-- As in the earlier migrations, JSON values are text (they read back byte
-- for byte), ids use the "C" collation (byte order), and a writer's times
-- that must read back in the writer's zone keep its UTC offset in seconds.

-- Claim takes the oldest claimable run: (created_at, id) ascending among
-- the queued, running and cancelling runs, whose lease is then checked on
-- the row. The index holds those runs only, so that terminal runs, the
-- bulk of the table, cost a claim nothing.
CREATE INDEX workflow_runs_claimable ON workflow_runs (created_at, id)
    WHERE status IN ('queued', 'running', 'cancelling');

-- The full output of each completed node of a run, written in the
-- transaction of the Append or Resume that completed the node; a node's
-- newer output replaces the older one.
CREATE TABLE workflow_node_outputs (
    run_id text COLLATE "C" NOT NULL REFERENCES workflow_runs (id),
    node_id text COLLATE "C" NOT NULL,
    output text NOT NULL,
    PRIMARY KEY (run_id, node_id)
);

CREATE TABLE thread_runs (
    thread_id text COLLATE "C" NOT NULL,
    run_id text COLLATE "C" NOT NULL,
    -- owner_id is '' for runs written by internal callers. It is kept from
    -- the first write, as is created_at.
    owner_id text NOT NULL,
    status text NOT NULL,
    operation_kind text NOT NULL,
    model_name text NOT NULL,
    -- metadata is a compact JSON object.
    metadata text NOT NULL,
    total_input_tokens bigint NOT NULL,
    total_output_tokens bigint NOT NULL,
    total_tokens bigint NOT NULL,
    llm_call_count bigint NOT NULL,
    lead_agent_tokens bigint NOT NULL,
    subagent_tokens bigint NOT NULL,
    middleware_tokens bigint NOT NULL,
    -- usage_by_model is a JSON object of model name to usage, NULL when the
    -- writer gave none.
    usage_by_model text,
    created_at timestamptz NOT NULL,
    created_at_offset integer NOT NULL,
    updated_at timestamptz NOT NULL,
    updated_at_offset integer NOT NULL,
    PRIMARY KEY (thread_id, run_id)
);

-- ListRuns: a thread's runs, oldest first (ties by run id).
CREATE INDEX thread_runs_thread_created ON thread_runs (thread_id, created_at, run_id);
-- FindRun: the oldest row of a run id, in whatever thread.
CREATE INDEX thread_runs_run_created ON thread_runs (run_id, created_at, thread_id);

-- A user's rating of a run: one per (thread, run, user). Writing again
-- replaces rating and comment and keeps id and created_at.
CREATE TABLE feedback (
    id text COLLATE "C" PRIMARY KEY,
    thread_id text COLLATE "C" NOT NULL,
    run_id text COLLATE "C" NOT NULL,
    user_id text COLLATE "C" NOT NULL,
    -- rating is compact JSON: a number or a string.
    rating text NOT NULL,
    comment text NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    CONSTRAINT feedback_user UNIQUE (thread_id, run_id, user_id)
);

-- The first response to a request made with an Idempotency-Key. Begin
-- inserts the row (reserved: status and body NULL); Complete sets status,
-- body and completed_at; Abort deletes a reserved row. A row whose
-- expires_at has passed counts as absent and is deleted by later Begins.
CREATE TABLE idempotency_keys (
    user_id text COLLATE "C" NOT NULL,
    key text COLLATE "C" NOT NULL,
    -- request_hash is the SHA-256 of the request.
    request_hash bytea NOT NULL,
    status integer,
    body bytea,
    completed_at timestamptz,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (user_id, key),
    CHECK ((status IS NULL) = (body IS NULL) AND (status IS NULL) = (completed_at IS NULL))
);

-- The sweep of expired keys.
CREATE INDEX idempotency_keys_expires ON idempotency_keys (expires_at);
