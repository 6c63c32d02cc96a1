// Package runevents is the domain of thread run events: the append-only
// record of what happened during agent runs inside conversation threads.
//
// It defines the Record envelope, the catalogue of event types and
// categories (generated from contracts/run_event_stream.json), and the Store
// interface that the memory, jsonl, sqlite and postgres packages implement.
// It imports only the standard library and the root runstream package.
//
// # Decided semantics
//
// The original system is ambiguous or buggy in places; every backend here
// behaves identically, as proven by the runeventstest conformance suite:
//
//   - seq is per thread, assigned by the store: 1, 2, 3, … with no gaps and
//     no duplicates, in commit order. Seqs are never reused, not even after
//     DeleteByRun or DeleteByThread, so a follower's cursor stays valid.
//   - A limit <= 0 is an error (CodeInvalidArgument); it never means "all".
//   - An empty EventTypes filter means no filter.
//   - With both cursors, ListMessages and ListMessagesByRun return rows of the
//     window AfterSeq < seq < BeforeSeq: the first Limit rows when AfterSeq is
//     given, the last Limit rows otherwise. Results are always ascending.
//   - ListEvents matches TaskID against metadata.task_id (a JSON string
//     equal to it; a number never matches) before applying the limit, when
//     TaskID is not empty or HasTaskID is set (an empty task id given:
//     the rows whose task_id is "" or null).
//   - Returned records are copies: changing one never changes the store.
//   - Content is any JSON value and round-trips byte-for-byte in compact
//     form; Metadata is a JSON object ({} when the writer gave none). A nil
//     Content is stored as the empty string "".
//   - CreatedAt is kept with the writer's offset at microsecond precision;
//     when the writer gives none the store assigns the current time in UTC.
//     It is encoded as RFC 3339 with a numeric offset.
//   - Trace content (category "trace") longer than MaxTraceContent bytes
//     (default 10240) in its text form is cut at a UTF-8 boundary and stored
//     as a string, with metadata content_truncated=true and
//     original_byte_length set. Other categories are stored whole.
//   - Event types are 1–32 characters, categories 1–16; thread and run ids
//     match ^[A-Za-z0-9_-]{1,64}$; text is valid UTF-8 and names hold no
//     NUL, so every backend can store what one accepts. Invalid writes are
//     refused whole: a batch with one invalid event stores nothing.
//   - A batch belongs to one thread (it may span runs); each row is filed
//     under its own run.
//   - Every row carries its owner (UserID; empty for internal writes). Every
//     read and delete takes an Owner: OwnedBy(id) sees only that user's rows,
//     AnyOwner (internal callers only) sees all rows, and the zero Owner is
//     refused, so a forgotten owner fails closed.
//   - PutIfAbsent is a singleton per (thread, run, event type) across owners:
//     it returns the earliest existing row and created=false, or, when that
//     row belongs to another owner, a CodeConflict error without the row.
//
// # Durability
//
// A write that returned without error is durable in the documented mode of
// its backend; each backend's package doc states that mode.
package runevents
