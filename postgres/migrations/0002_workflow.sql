-- Workflows, their versions and runs, the runs' events, resume tokens and
-- artifacts (package workflow).
--
-- JSON values (definition, input, output, error, data, form_schema) are
-- text, not jsonb: they read back byte for byte as written. Ids are text in
-- the "C" collation, so that ORDER BY id is byte order, as in every other
-- backend. Times are timestamptz (microseconds); event timestamps also keep
-- the writer's UTC offset in seconds, since the envelope transmits it.

CREATE TABLE workflows (
    id text COLLATE "C" PRIMARY KEY,
    owner_id text NOT NULL,
    name text NOT NULL,
    description text NOT NULL,
    latest_version_id text COLLATE "C" NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE INDEX workflows_created ON workflows (created_at, id);
CREATE INDEX workflows_owner_created ON workflows (owner_id, created_at, id);

CREATE TABLE workflow_versions (
    id text COLLATE "C" PRIMARY KEY,
    workflow_id text COLLATE "C" NOT NULL REFERENCES workflows (id),
    number integer NOT NULL CHECK (number >= 1),
    -- definition is NULL when none was given.
    definition text,
    created_at timestamptz NOT NULL,
    CONSTRAINT workflow_versions_number UNIQUE (workflow_id, number)
);

CREATE TABLE workflow_runs (
    id text COLLATE "C" PRIMARY KEY,
    workflow_id text COLLATE "C" NOT NULL REFERENCES workflows (id),
    version_id text COLLATE "C" NOT NULL REFERENCES workflow_versions (id),
    owner_id text NOT NULL,
    status text NOT NULL,
    -- input, output and error are NULL when absent; the JSON null is 'null'.
    input text,
    output text,
    error text,
    -- last_seq is the seq of the run's newest event. The row is the run's
    -- seq counter: appends lock it (SELECT … FOR UPDATE) and raise it in the
    -- transaction that inserts the events, so that commit order equals seq
    -- order across processes.
    last_seq bigint NOT NULL CHECK (last_seq >= 0),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    started_at timestamptz,
    finished_at timestamptz,
    -- lease_owner is '' when the run is not leased.
    lease_owner text NOT NULL,
    lease_expires_at timestamptz
);

-- Listings are newest first, (created_at, id) descending, by owner and
-- optionally by workflow or status.
CREATE INDEX workflow_runs_created ON workflow_runs (created_at, id);
CREATE INDEX workflow_runs_owner_created ON workflow_runs (owner_id, created_at, id);
CREATE INDEX workflow_runs_workflow_created ON workflow_runs (workflow_id, created_at, id);
CREATE INDEX workflow_runs_status_created ON workflow_runs (status, created_at, id);

CREATE TABLE workflow_run_events (
    run_id text COLLATE "C" NOT NULL REFERENCES workflow_runs (id),
    seq bigint NOT NULL CHECK (seq >= 1),
    event text NOT NULL,
    -- node_id and node_run_id are NULL for run-scoped events.
    node_id text,
    node_run_id text,
    ts timestamptz NOT NULL,
    ts_offset integer NOT NULL,
    data text NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE workflow_resume_tokens (
    run_id text COLLATE "C" NOT NULL REFERENCES workflow_runs (id),
    -- hash is the SHA-256 of the token; the token itself is never stored.
    hash bytea NOT NULL,
    node_id text NOT NULL,
    node_run_id text NOT NULL,
    actions text[],
    form_schema text,
    expires_at timestamptz NOT NULL,
    -- consumed_at is set once, by the compare-and-set of a resume.
    consumed_at timestamptz,
    PRIMARY KEY (run_id, hash)
);

-- A run has at most one pending token: a new one replaces it.
CREATE UNIQUE INDEX workflow_resume_tokens_pending ON workflow_resume_tokens (run_id)
    WHERE consumed_at IS NULL;

CREATE TABLE workflow_artifacts (
    run_id text COLLATE "C" NOT NULL REFERENCES workflow_runs (id),
    id text COLLATE "C" NOT NULL,
    node_id text NOT NULL,
    name text NOT NULL,
    mime_type text NOT NULL,
    size_bytes bigint NOT NULL,
    sha256 text NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (run_id, id)
);
