// Package postgres stores runstream data in PostgreSQL through pgx
// (github.com/jackc/pgx/v5, pgxpool).
//
// Open connects, applies the embedded numbered migrations
// (migrations/NNNN_name.sql) that schema_migrations does not record, and
// returns a DB whose RunEvents method is the runevents.Store of the
// database. Migrations run in one transaction under pg_advisory_xact_lock,
// so instances starting at once apply each exactly once.
//
// # Run events
//
// Rows live in run_events, keyed by (thread_id, seq); run_event_threads
// holds one counter row per thread, last_seq. One statement per thread
// adds the number of events appended to the counter (an upsert, which
// locks the counter row until commit) and inserts the rows with the seqs
// that follow. The row lock serialises the writers of a thread across
// every process sharing the database, so commit order is seq order and
// seqs have no gap and no duplicate. Deletes leave the counter alone, so
// seqs are never reused. PutIfAbsent takes the same lock before it looks
// for the existing row, which makes check and insert atomic against every
// writer of the thread.
//
// content and metadata are stored as text, exactly the bytes
// runevents.Prepare produced, not as jsonb: jsonb reorders keys, drops
// duplicate keys, rewrites numbers and refuses \u0000, and every backend
// must return the same bytes. What the queries need from metadata is
// derived by the writer with runevents.FiltersOf, the same
// extraction the other backends use: the task_id column (bytea, NULL
// unless metadata.task_id is a JSON string; bytea because a decoded JSON
// string may hold NUL) with a partial index, so that ListEvents filters by
// task in SQL before its limit, and caller_middleware for
// LastVisibleAISeqByRun. created_at is a timestamptz plus the writer's UTC
// offset in seconds, so that CreatedAt reads back in the writer's zone.
//
// Indexes: the key (thread_id, seq); (thread_id, seq) of message rows only,
// for the message reads; (thread_id, run_id, seq) for ListEvents; and
// (thread_id, run_id, task_id, seq) of rows with a task. Page queries
// (ListMessages, ListMessagesByRun, ListEvents) run with enable_sort off
// for their own implicit transaction: each has an index in its order, and
// this keeps a planner misled by missing or stale statistics from reading
// a whole thread to sort it.
//
// # Workflows
//
// Workflows returns the workflow.Store of the database (tables workflows,
// workflow_versions, workflow_runs, workflow_run_events,
// workflow_resume_tokens, workflow_artifacts). A run's row is its seq
// counter: every append locks it (SELECT … FOR UPDATE), checks the run
// (terminal, lease), inserts the events and writes back the row changes
// workflow.ApplyEvent computed, in one transaction, so appends to one run
// commit in seq order across processes. Appends are group-committed like
// run events (a run always maps to the same committer), in two round
// trips: BEGIN with the locking reads, then the writes with COMMIT. Resume
// consumes its token with one compare-and-set UPDATE in the transaction
// that appends run.resumed. JSON values are text, ids use the "C"
// collation (byte order, as in the other backends).
//
// # Notifications
//
// Every transaction that appends to runs also sends, on channel
// NotifyChannel, "<run id>:<last seq>" per run (never any content);
// PostgreSQL delivers it on commit only. A Listener (DB.NewListener) holds
// a connection of its own outside the pool, listens on the channel,
// reconnects with backoff, and hands each run id and seq to a callback,
// typically live.Hub.Wake of the run's stream. Notifications are hints: the
// hub's periodic poll covers those lost while a listener reconnects.
//
// # Durability
//
// A write that returned without error is committed. With the server's
// default synchronous_commit=on (reported by Durability, read at Open) its
// commit record was flushed to the write-ahead log on disk first, so the
// write survives a crash of the server or the machine; with
// synchronous_commit=off a crash of the server may lose the writes of its
// last moments. Replication guarantees follow the server's own settings.
//
// # Concurrency
//
// A DB and its stores are safe for concurrent use. Put and PutBatch hand
// their prepared, validated records to a committer goroutine (Config.
// Committers of them, a thread always mapped to the same one), which
// writes everything waiting in its queue in one transaction: concurrent
// writers share one commit, and one WAL flush, instead of queueing one by
// one on the thread's counter row. The transaction is one pipeline (its
// statements and its commit in one round trip). If the server refuses it,
// each request is retried in a transaction of its own, so that every
// caller gets its own answer; if its outcome is unknown (connection lost,
// timeout), every request gets the error and none is retried, since a
// retry could store it twice. A caller whose context ends stops waiting
// (CodeUnavailable); a write already handed to the database may still
// commit.
//
// # Limits
//
// Text PostgreSQL cannot hold is refused with CodeInvalidArgument: a NUL
// byte or invalid UTF-8 in user_id, event_type or category, invalid UTF-8
// in content or metadata. A batch is written by one statement, so its size
// is bounded by the server's memory, not by a count. A group transaction
// times out after 30 seconds. Reads and deletes use the caller's context.
// PutIfAbsent finds the existing row by scanning its run in seq order (no
// index on event type, which every append would pay for), so its cost
// grows with the run until the row is found. Errors are *runstream.Error
// values naming the operation; the driver error, never shown to callers,
// is their cause.
//
// # Queue, node outputs and the thread API
//
// The workflow store is also a workflow.Queue and a workflow.NodeOutputStore:
// Claim, serialised across the instances on the schema by a
// transaction-scoped advisory lock whose key names the schema, picks a run
// fairly among owners under a cap per owner (up to workflow.ClaimWindow
// owners visited round robin from the store's cursor, kept in memory per
// store, with two searches per owner in the partial index
// workflow_runs_waiting_owner; the leased runs in workflow_runs_leased),
// so that its cost does not grow with the number of owners nor their
// backlogs, locks it with FOR UPDATE SKIP LOCKED and writes its lease in
// the same statement;
// RenewLease and ReleaseLease are compare-and-set UPDATEs on lease_owner; node
// outputs live in workflow_node_outputs, written in the Append or Resume
// transaction. Runs and Idempotency return the runevents.RunStore (thread_runs,
// feedback) and runevents.IdempotencyStore (idempotency_keys: INSERT … ON
// CONFLICT DO NOTHING, then read); RunEvents is also the runevents.ThreadReader.
package postgres
