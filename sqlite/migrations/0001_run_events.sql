-- Thread run events (package runevents) and the per-thread seq counter.
--
-- run_events rows are immutable once written; task_id and middleware_caller
-- are derived from metadata by the writer (runevents.Record.MetadataString)
-- so that filters run in SQL, before LIMIT, with exactly the memory store's
-- semantics.
CREATE TABLE run_events (
	id                INTEGER PRIMARY KEY,
	thread_id         TEXT    NOT NULL,
	run_id            TEXT    NOT NULL,
	-- '' for rows written by internal callers.
	user_id           TEXT    NOT NULL DEFAULT '',
	event_type        TEXT    NOT NULL,
	category          TEXT    NOT NULL,
	-- Compact JSON of any kind.
	content           TEXT    NOT NULL,
	-- Compact JSON object.
	metadata          TEXT    NOT NULL,
	-- metadata.task_id when it is a JSON string, else NULL.
	task_id           TEXT,
	-- 1 when metadata.caller is a string starting with "middleware:".
	middleware_caller INTEGER NOT NULL DEFAULT 0,
	seq               INTEGER NOT NULL,
	-- RFC 3339 with the writer's numeric offset and microseconds.
	created_at        TEXT    NOT NULL,
	UNIQUE (thread_id, seq)
) STRICT;

-- ListEvents, DeleteByRun, PutIfAbsent: one run in seq order. event_type
-- rides along so that type filters (and PutIfAbsent's search for the
-- earliest row of a type) are checked in the index, without reading rows;
-- a separate (thread_id, run_id, event_type, seq) index would cost every
-- append more than it saves the rare PutIfAbsent.
CREATE INDEX run_events_run ON run_events (thread_id, run_id, seq, event_type);

-- ListMessages, CountMessages: the thread's message rows.
CREATE INDEX run_events_messages ON run_events (thread_id, seq)
	WHERE category = 'message';

-- ListMessagesByRun, LastVisibleAISeqByRun: one run's message rows.
CREATE INDEX run_events_run_messages ON run_events (thread_id, run_id, seq)
	WHERE category = 'message';

-- ListEvents with TaskID: one subagent task of a run.
CREATE INDEX run_events_run_tasks ON run_events (thread_id, run_id, task_id, seq)
	WHERE task_id IS NOT NULL;

-- The last seq handed out per thread. It only grows, so seqs are never
-- reused after deletes, and the upsert that bumps it serialises the writers
-- of a thread across processes.
CREATE TABLE run_event_threads (
	thread_id TEXT    PRIMARY KEY,
	last_seq  INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
