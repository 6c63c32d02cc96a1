-- DeerFlow's run row and feedback fields (issue 15).
--
-- thread_runs gains the run row members of the original RunResponse:
-- assistant_id and stop_reason ('' reads as null), kwargs (a compact JSON
-- object, as text), multitask_strategy and message_count.
ALTER TABLE thread_runs
    ADD COLUMN assistant_id text NOT NULL DEFAULT '',
    ADD COLUMN kwargs text NOT NULL DEFAULT '{}',
    ADD COLUMN multitask_strategy text NOT NULL DEFAULT 'reject',
    ADD COLUMN message_count bigint NOT NULL DEFAULT 0,
    ADD COLUMN stop_reason text NOT NULL DEFAULT '';

-- A feedback may rate one message of a run (message_id; '' rates the
-- run) and carry reason tags (a JSON array of strings, as text). A user
-- has one feedback per (thread, run, message_id).
ALTER TABLE feedback
    ADD COLUMN message_id text COLLATE "C" NOT NULL DEFAULT '',
    ADD COLUMN tags text NOT NULL DEFAULT '[]',
    DROP CONSTRAINT feedback_user,
    ADD CONSTRAINT feedback_user UNIQUE (thread_id, run_id, user_id, message_id);
