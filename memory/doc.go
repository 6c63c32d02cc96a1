// Package memory holds in-process implementations of the runstream stores:
// the reference implementation of each store interface and the fake that
// tests of other packages use.
//
// # Run events
//
// RunEventStore implements runevents.Store.
//
// Durability: none. Rows live in process memory and are lost when the
// process exits; a write is visible to every reader as soon as it returns.
//
// Concurrency: one sync.RWMutex per store. Writes take it exclusively, so
// seq assignment, PutIfAbsent's check-and-append and deletes are atomic
// with respect to each other; reads share it.
//
// Limits: everything is kept in memory: per row its content and metadata
// plus about 160 bytes (twice that for message rows, which are also indexed
// by thread). A page costs O(log n + k): a binary search for the cursor in
// the run's or thread's rows, then k rows scanned, k being the page plus
// the rows its filters skip (other owners' rows, other event types or
// tasks). Deletes cost O(n) in the thread's message rows and the run's rows.
//
// # Workflows, thread runs, idempotency
//
// WorkflowStore implements workflow.Store, workflow.Queue and
// workflow.NodeOutputStore; RunStore implements runevents.RunStore;
// IdempotencyStore implements runevents.IdempotencyStore; RunEventStore is
// also a runevents.ThreadReader. Same durability (none); each store has one
// mutex that serialises its writes; listings sort the visible rows
// (O(n log n)).
package memory
