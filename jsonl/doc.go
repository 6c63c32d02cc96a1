// Package jsonl is the run-event store kept in JSON Lines files, one file
// per run. The server keeps thread run events here with
// "runstream serve --run-events jsonl:DIR"; workflows, thread run rows and
// the idempotency keys of other requests stay in the --store, while the
// keys of appends live here, with their rows (see Idempotency keys). The
// layout:
//
//	<Dir>/LOCK                                  held by the open store (flock)
//	<Dir>/threads/<thread_id>/runs/<run_id>.jsonl
//	<Dir>/threads/<thread_id>/last_seq          written by deletes
//
// Every line is one record encoded by runevents.Record.MarshalJSON followed
// by '\n', or a key line (below). '\n' is the only separator: U+2028, U+2029 and U+0085 inside
// strings are ordinary characters. Every row goes to its own run's file,
// also in a batch that spans runs.
//
// # Durability
//
// A write that returned without error has been written and fsynced; a new
// file's directory, and every directory created for it, has been fsynced
// too. So an acknowledged row survives a process crash and a power loss.
// Concurrent writers of one thread share fsyncs (group commit): the first
// writer to reach the disk fsyncs every file the waiting writers touched.
// Readers see a row only once it is durable, and rows become visible in seq
// order, so a follower's after_seq cursor never skips a row.
//
// A failed write or fsync makes the store refuse every later write with
// CodeUnavailable (the page cache can no longer be trusted); reopen it.
// Before returning the error the store truncates the files it touched back
// to their last durable size, so a failed batch leaves nothing behind while
// the process lives. A batch is atomic in the process, not across a crash:
// a crash in the middle of an unacknowledged batch may leave some of its
// whole lines on disk. A keyed batch is atomic across a crash too (see
// Idempotency keys).
//
// # Recovery
//
// A thread is recovered when it is first touched after Open. Its next seq
// is one more than the highest of every seq in its run files and the
// last_seq file, which deletes update first, so seqs are never reused. A
// final fragment without '\n', or a final line that is not even valid JSON
// (a torn write), is truncated away and logged; it was never acknowledged.
// Any other line that does not decode as a record of the thread is skipped
// by every read and counted in one warning per file; it stays on disk until
// a delete rewrites its file. Files written by older systems are read too:
// a row is filed under the run_id it carries, whatever file it is in, and a
// later duplicate of a seq is skipped, so no row is counted twice.
//
// # Idempotency keys
//
// The store is a runevents.IdempotentAppender. A keyed append writes, in
// every run file its batch touches and in the same write as the batch's
// rows there, a key line before those rows:
//
//	{"idempotency_key":{"user_id":…,"key":…,"request_hash":<base64>,"status":201,
//	 "body":<base64>,"created_at":…,"expires_at":…,"first_seq":7,"last_seq":9}}
//
// first_seq..last_seq are the seqs of the whole batch; an if-absent append
// that found its row writes the key line alone, after that row in its
// file, with first_seq = last_seq = the row's seq. The key line shares the
// rows' fsync, and readers skip it (older versions of this package count
// it as a line that is not a record). Keys are per user and expire after
// IdempotencyTTL (24 hours), as in the SQL stores; an expired key is
// absent, and a later append under it writes a new key line.
//
// Recovery rule: a thread's key is whole when every row first_seq..last_seq
// is in the thread, or when first_seq is at most the seq in last_seq (the
// rows were durable before a delete, which may have removed them since);
// whole keys are indexed. A key line that is not whole was torn by a crash
// during its unacknowledged batch: every file holding one of its key lines
// is truncated at that line, which drops the batch's rows that reached the
// disk and anything written after them, and the thread is recovered
// again. A torn key line itself is a torn tail. So after a crash the key
// exists exactly when all its rows do, and a retry either replays the
// first response or appends the batch once.
//
// The key index is built per thread when the thread is recovered. To find
// the keys of threads not yet recovered, the first keyed call after Open
// (AppendIdempotent or LookupIdempotent) reads the run files modified in
// the last IdempotencyTTL for key lines, once: O(their bytes); each keyed
// call then recovers the threads that held its key. The index keeps the
// key's hash and the line's place, not the response, which is read from
// the line on a replay. A delete keeps, in each file it rewrites, the
// unexpired key lines that still commit one of the file's remaining rows:
// a key whose rows are all deleted is forgotten, and a retry under it
// appends again. Files without key lines (written before keys were stored
// here) read as before.
//
// # Concurrency
//
// One process per directory: Open takes an exclusive flock on Dir/LOCK and
// fails while another store (in this or another process) holds it. Inside
// the process, each thread has its own lock; writers hold it while they
// encode and write, not while they fsync. Reads hold it shared.
//
// # Costs and limits
//
// Each touched thread keeps an index in memory: about 32 bytes per row plus
// 32 per message row, one open file per run file, and about 200 bytes per
// idempotency key (with the key itself) until it expires. A keyed append
// writes its response once more, in its key line, per file it touches. Recovering a thread
// parses all its lines once, O(bytes). Then a write costs O(batch) plus a
// shared fsync per touched file; ListMessages, ListMessagesByRun and
// ListEvents find their window by binary search and read only the returned
// lines, in as few reads as the lines are contiguous, decoding lines in the
// form the store writes without reflection; CountMessages and
// LastVisibleAISeqByRun never read files. DeleteByRun and DeleteByThread
// rewrite (or remove) every file holding a deleted row: O(thread rows) plus
// the size of those files. The package needs flock, so it runs on Linux and
// other Unix systems.
package jsonl
