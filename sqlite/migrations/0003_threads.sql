-- Thread runs, feedback and idempotency keys (package runevents: RunStore
-- and IdempotencyStore).
--
-- Instants are INTEGER microseconds since the Unix epoch, so that they
-- order as instants. A run's created_at and updated_at are the writer's
-- times: their UTC offset in seconds rides along in *_offset, so that they
-- read back in the writer's zone, as run_events.created_at does.

CREATE TABLE thread_runs (
	thread_id           TEXT    NOT NULL,
	run_id              TEXT    NOT NULL,
	-- '' for runs written by internal callers. Kept from the first write.
	owner_id            TEXT    NOT NULL,
	status              TEXT    NOT NULL,
	operation_kind      TEXT    NOT NULL,
	model_name          TEXT    NOT NULL,
	-- Compact JSON object.
	metadata            TEXT    NOT NULL,
	total_input_tokens  INTEGER NOT NULL,
	total_output_tokens INTEGER NOT NULL,
	total_tokens        INTEGER NOT NULL,
	llm_call_count      INTEGER NOT NULL,
	lead_agent_tokens   INTEGER NOT NULL,
	subagent_tokens     INTEGER NOT NULL,
	middleware_tokens   INTEGER NOT NULL,
	-- JSON object of model name -> usage; NULL when the writer gave none.
	usage_by_model      TEXT,
	-- Kept from the first write.
	created_at          INTEGER NOT NULL,
	created_offset      INTEGER NOT NULL,
	updated_at          INTEGER NOT NULL,
	updated_offset      INTEGER NOT NULL,
	PRIMARY KEY (thread_id, run_id)
) STRICT;

-- ListRuns: a thread's runs, oldest first, without a sort.
CREATE INDEX thread_runs_thread ON thread_runs (thread_id, created_at, run_id);

-- FindRun: the oldest row of a run id, in whatever thread.
CREATE INDEX thread_runs_run ON thread_runs (run_id, created_at, thread_id);

-- A user's rating of a run: one per (thread, run, user); writing again
-- replaces rating and comment and keeps id and created_at.
CREATE TABLE feedback (
	id         TEXT    PRIMARY KEY,
	thread_id  TEXT    NOT NULL,
	run_id     TEXT    NOT NULL,
	user_id    TEXT    NOT NULL,
	-- Compact JSON: a number or a string.
	rating     TEXT    NOT NULL,
	comment    TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	UNIQUE (thread_id, run_id, user_id)
) STRICT;

-- The first response to a request made with an Idempotency-Key. A row is
-- 'reserved' from Begin until Complete makes it 'completed' (status and
-- body set) or Abort deletes it. Rows older than the store's TTL count as
-- absent and are swept by later Begins.
CREATE TABLE idempotency_keys (
	user_id      TEXT    NOT NULL,
	key          TEXT    NOT NULL,
	-- SHA-256 of the request.
	request_hash BLOB    NOT NULL,
	state        TEXT    NOT NULL CHECK (state IN ('reserved', 'completed')),
	status       INTEGER NOT NULL,
	body         BLOB    NOT NULL,
	-- When Begin reserved the key, then when Complete stored the response.
	created_at   INTEGER NOT NULL,
	PRIMARY KEY (user_id, key)
) STRICT;

-- The sweep of expired keys.
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
