// Package jsonl is the run-event store kept in JSON Lines files, one file
// per run. The server keeps thread run events here with
// "runstream serve --run-events jsonl:DIR"; workflows, thread run rows and
// idempotency keys stay in the --store. The layout:
//
//	<Dir>/LOCK                                  held by the open store (flock)
//	<Dir>/threads/<thread_id>/runs/<run_id>.jsonl
//	<Dir>/threads/<thread_id>/last_seq          written by deletes
//
// Every line is one record encoded by runevents.Record.MarshalJSON followed
// by '\n'. '\n' is the only separator: U+2028, U+2029 and U+0085 inside
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
// whole lines on disk.
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
// 32 per message row, and one open file per run file. Recovering a thread
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
