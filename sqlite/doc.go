// Package sqlite stores runstream's data in one SQLite file through
// modernc.org/sqlite (pure Go, no cgo). Open returns a DB whose stores
// share the file: RunEvents (runevents.Store and ThreadReader), Workflows
// (workflow.Store, Queue and NodeOutputStore), Runs (runevents.RunStore)
// and Idempotency (runevents.IdempotencyStore).
//
// # Durability
//
// The file is in WAL mode. With Synchronous "FULL" (the default) the WAL
// is synced at every commit: a write that returned without error survives
// a process crash and power loss. With "NORMAL" the WAL is synced only at
// checkpoints: an acknowledged write survives a process crash, but the
// last transactions may be lost on power loss (the file stays
// consistent). DB.Durability states the mode in effect, as SQLite
// reports it.
//
// # Concurrency
//
// One connection writes; a pool of read-only connections reads. Thanks to
// WAL, reads never wait for the writer and see every write acknowledged
// before they started.
//
// Every write of the process is queued to a single goroutine that takes
// all the writes waiting and runs them in ONE BEGIN IMMEDIATE transaction
// with one commit (group commit): with synchronous=FULL, concurrent
// writers share the sync of the WAL instead of paying one each. Within a
// group, the run-event appends are written together at the end: one seq
// counter update per thread and multi-row inserts. Arguments
// are validated before a write is queued, so a refused write never joins
// a group; if a group still fails in SQL, it is rolled back and its writes
// are retried one by one, so that each caller gets its own answer. A
// caller whose context ends while its write is queued gets the context's
// error and its write is dropped; once the write has started, the caller
// still gets the error but the write may be committed.
//
// Several processes may open the same file. BEGIN IMMEDIATE takes the
// file's write lock, waiting up to Config.BusyTimeout for another process
// to release it (then the write fails with CodeUnavailable), and seqs are
// read from and advanced in the per-thread counter row inside that
// transaction, so writers in any number of processes never give a thread
// a duplicate or a gap.
//
// # Schema
//
// Migrations are embedded (migrations/NNNN_description.sql), applied in
// order at Open, each in its own transaction with its row in
// schema_migrations; Open refuses a file whose schema is newer than the
// binary. run_events keeps, besides the record, the metadata values that
// reads filter on (task_id, a middleware caller flag), so that every
// filter runs in SQL before LIMIT through an index. The engine's queue
// claims a run fairly among owners, under a cap per owner: a claim visits
// up to workflow.ClaimWindow owners round robin from the store's cursor
// (kept in memory, per store; each process has its own) among the owners
// with a waiting run, with two searches per owner in the partial index
// workflow_runs_waiting_owner and one in workflow_runs_leased, so its cost
// does not grow with the number of owners nor their backlogs; node outputs live in
// workflow_node_outputs.
//
// # Limits
//
// Writes are serialised: their throughput is that of one connection
// (tens of thousands of events per second). A group holds at most 1024
// writes. Reads share Config.ReadConns connections, which read pages with
// pread (the file is not memory-mapped). Sharing the file over a network
// file system is not
// supported: WAL needs memory shared by the processes of one host.
package sqlite
