-- The chunk streams of LangGraph-compatible runs (package runchunks): one
-- row per run in stream_runs, its chunks in stream_chunks. Instants are
-- INTEGER microseconds since the Unix epoch (UTC).

CREATE TABLE stream_runs (
	run_id              TEXT    PRIMARY KEY,
	thread_id           TEXT    NOT NULL,
	owner_id            TEXT    NOT NULL,
	epoch               INTEGER NOT NULL,
	-- The index of the next new chunk; first_index is the lowest kept
	-- (first_index = next_index: none kept).
	next_index          INTEGER NOT NULL,
	first_index         INTEGER NOT NULL,
	status              TEXT    NOT NULL,
	-- 0 once the run ended.
	lease_expires_at    INTEGER NOT NULL,
	-- NULL: no cancel request.
	cancel_action       TEXT,
	cancel_requested_at INTEGER,
	created_at          INTEGER NOT NULL,
	updated_at          INTEGER NOT NULL,
	-- NULL while the run is active.
	ended_at            INTEGER
) STRICT;

-- The lease sweeper: active runs by lease.
CREATE INDEX stream_runs_lease ON stream_runs (lease_expires_at) WHERE ended_at IS NULL;

-- Retention: ended runs that still keep chunks, by end.
CREATE INDEX stream_runs_ended ON stream_runs (ended_at) WHERE ended_at IS NOT NULL AND first_index < next_index;

CREATE TABLE stream_chunks (
	run_id     TEXT    NOT NULL,
	idx        INTEGER NOT NULL,
	event      TEXT    NOT NULL,
	-- Compact JSON (up to megabytes: a rowid table, not WITHOUT ROWID).
	data       BLOB    NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (run_id, idx)
) STRICT;
