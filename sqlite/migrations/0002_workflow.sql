-- Workflow store (package workflow): workflows, their immutable versions,
-- runs, run events, resume tokens and artifact metadata.
--
-- Times are INTEGER microseconds since the Unix epoch (UTC), so that they
-- order as instants; a NULL time is the zero time.Time. JSON values (version
-- definition, run input/output/error, event data, form schema) are TEXT,
-- stored byte for byte as written; NULL is a nil value.

CREATE TABLE workflows (
	id                TEXT    PRIMARY KEY,
	owner_id          TEXT    NOT NULL,
	name              TEXT    NOT NULL,
	description       TEXT    NOT NULL,
	latest_version_id TEXT    NOT NULL,
	created_at        INTEGER NOT NULL,
	updated_at        INTEGER NOT NULL
) STRICT;

-- ListWorkflows, newest first: one owner's, or everyone's.
CREATE INDEX workflows_owner_created ON workflows (owner_id, created_at, id);
CREATE INDEX workflows_created ON workflows (created_at, id);

CREATE TABLE workflow_versions (
	id          TEXT    PRIMARY KEY,
	workflow_id TEXT    NOT NULL REFERENCES workflows (id),
	-- Counts the workflow's versions from 1.
	number      INTEGER NOT NULL,
	definition  TEXT,
	created_at  INTEGER NOT NULL,
	UNIQUE (workflow_id, number)
) STRICT;

CREATE TABLE workflow_runs (
	id               TEXT    PRIMARY KEY,
	workflow_id      TEXT    NOT NULL REFERENCES workflows (id),
	version_id       TEXT    NOT NULL REFERENCES workflow_versions (id),
	owner_id         TEXT    NOT NULL,
	status           TEXT    NOT NULL,
	input            TEXT,
	output           TEXT,
	error            TEXT,
	-- The seq of the run's newest event: the run's seq counter, read and
	-- advanced by the write transaction that appends events.
	last_seq         INTEGER NOT NULL,
	created_at       INTEGER NOT NULL,
	updated_at       INTEGER NOT NULL,
	started_at       INTEGER,
	finished_at      INTEGER,
	-- '' when no engine holds the run.
	lease_owner      TEXT    NOT NULL,
	lease_expires_at INTEGER
) STRICT;

-- ListRuns, newest first, for each filter of one owner…
CREATE INDEX workflow_runs_owner_created ON workflow_runs (owner_id, created_at, id);
CREATE INDEX workflow_runs_owner_workflow ON workflow_runs (owner_id, workflow_id, created_at, id);
CREATE INDEX workflow_runs_owner_status ON workflow_runs (owner_id, status, created_at, id);
-- …and of every owner (the engine and administrators).
CREATE INDEX workflow_runs_created ON workflow_runs (created_at, id);
CREATE INDEX workflow_runs_workflow ON workflow_runs (workflow_id, created_at, id);
CREATE INDEX workflow_runs_status ON workflow_runs (status, created_at, id);

-- Immutable once written. Clustered on (run_id, seq), so that reading a
-- page after a cursor is one range scan of the table itself.
CREATE TABLE workflow_run_events (
	run_id      TEXT    NOT NULL REFERENCES workflow_runs (id),
	seq         INTEGER NOT NULL,
	event       TEXT    NOT NULL,
	-- '' for run-scoped events.
	node_id     TEXT    NOT NULL,
	node_run_id TEXT    NOT NULL,
	-- The envelope timestamp: the instant, and its UTC offset in seconds.
	ts          INTEGER NOT NULL,
	ts_offset   INTEGER NOT NULL,
	data        TEXT    NOT NULL,
	PRIMARY KEY (run_id, seq)
) STRICT, WITHOUT ROWID;

-- The hash of a resume token, never the token. Consumed tokens stay, so
-- that a second use is told apart from a wrong token; a run has at most
-- one row with consumed_at NULL.
CREATE TABLE workflow_resume_tokens (
	run_id      TEXT    NOT NULL REFERENCES workflow_runs (id),
	hash        BLOB    NOT NULL,
	node_id     TEXT    NOT NULL,
	node_run_id TEXT    NOT NULL,
	-- JSON array of strings.
	actions     TEXT    NOT NULL,
	form_schema TEXT,
	expires_at  INTEGER NOT NULL,
	consumed_at INTEGER,
	PRIMARY KEY (run_id, hash)
) STRICT, WITHOUT ROWID;

CREATE TABLE workflow_artifacts (
	run_id     TEXT    NOT NULL REFERENCES workflow_runs (id),
	id         TEXT    NOT NULL,
	node_id    TEXT    NOT NULL,
	name       TEXT    NOT NULL,
	mime_type  TEXT    NOT NULL,
	size_bytes INTEGER NOT NULL,
	sha256     TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (run_id, id)
) STRICT, WITHOUT ROWID;
