-- Run events of conversation threads (package runevents).
--
-- content and metadata are text, not jsonb: the store returns them
-- byte-for-byte as written (jsonb would reorder keys, drop duplicates,
-- normalise numbers and refuse \u0000). task_id and caller_middleware are
-- derived from metadata by the writer (runevents.Record.MetadataString), so
-- the task filter and the visible-AI query run in SQL with the exact
-- semantics of every other backend. task_id is bytea because a JSON string
-- may decode to text PostgreSQL cannot hold (NUL). Ids are ASCII and use the
-- "C" collation: index comparisons are byte comparisons, whatever the
-- database's locale.

CREATE TABLE run_event_threads (
    thread_id text COLLATE "C" PRIMARY KEY,
    -- last_seq is the highest seq ever assigned in the thread. Writers lock
    -- this row to assign seqs, so commit order equals seq order; deletes
    -- never lower it, so seqs are never reused.
    last_seq bigint NOT NULL CHECK (last_seq >= 0)
);

-- (thread_id, seq) is the key; a surrogate id column would cost a sequence
-- call and one more index per row, and nothing would read it.
CREATE TABLE run_events (
    thread_id text COLLATE "C" NOT NULL,
    run_id text COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    -- user_id is NULL for rows written by internal callers.
    user_id text,
    event_type varchar(32) NOT NULL,
    category varchar(16) NOT NULL,
    content text NOT NULL,
    metadata text NOT NULL,
    -- task_id is metadata.task_id when it is a JSON string, else NULL.
    task_id bytea,
    -- caller_middleware: metadata.caller is a string starting "middleware:".
    caller_middleware boolean NOT NULL,
    created_at timestamptz NOT NULL,
    -- created_at_offset is the writer's UTC offset in seconds, so that
    -- created_at reads back in the writer's zone.
    created_at_offset integer NOT NULL,
    CONSTRAINT run_events_pkey PRIMARY KEY (thread_id, seq)
);

-- Message reads (ListMessages, ListMessagesByRun, CountMessages,
-- LastVisibleAISeqByRun) query category = 'message' as a literal; the
-- index holds message rows only, so other appends do not pay for it.
CREATE INDEX run_events_thread_messages_seq ON run_events (thread_id, seq) WHERE category = 'message';
CREATE INDEX run_events_thread_run_seq ON run_events (thread_id, run_id, seq);
CREATE INDEX run_events_thread_run_task_seq ON run_events (thread_id, run_id, task_id, seq)
    WHERE task_id IS NOT NULL;
