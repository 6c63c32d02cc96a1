-- DeerFlow's run row and feedback fields (issue 15).
--
-- thread_runs gains the run row members of the original RunResponse:
-- assistant_id and stop_reason ('' reads as null), kwargs (a compact JSON
-- object), multitask_strategy and message_count.
ALTER TABLE thread_runs ADD COLUMN assistant_id TEXT NOT NULL DEFAULT '';
ALTER TABLE thread_runs ADD COLUMN kwargs TEXT NOT NULL DEFAULT '{}';
ALTER TABLE thread_runs ADD COLUMN multitask_strategy TEXT NOT NULL DEFAULT 'reject';
ALTER TABLE thread_runs ADD COLUMN message_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE thread_runs ADD COLUMN stop_reason TEXT NOT NULL DEFAULT '';

-- A feedback may rate one message of a run (message_id; '' rates the
-- run) and carry reason tags (a JSON array of strings). A user has one
-- feedback per (thread, run, message_id): SQLite cannot change a UNIQUE
-- constraint in place, so the table is rebuilt.
CREATE TABLE feedback_v5 (
	id         TEXT    PRIMARY KEY,
	thread_id  TEXT    NOT NULL,
	run_id     TEXT    NOT NULL,
	user_id    TEXT    NOT NULL,
	message_id TEXT    NOT NULL,
	-- Compact JSON: a number or a string.
	rating     TEXT    NOT NULL,
	comment    TEXT    NOT NULL,
	tags       TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	UNIQUE (thread_id, run_id, user_id, message_id)
) STRICT;

INSERT INTO feedback_v5 (id, thread_id, run_id, user_id, message_id, rating, comment, tags, created_at, updated_at)
	SELECT id, thread_id, run_id, user_id, '', rating, comment, '[]', created_at, updated_at FROM feedback;

DROP TABLE feedback;

ALTER TABLE feedback_v5 RENAME TO feedback;
