// Package live is the in-process hub that fans committed events out to the
// followers of a stream (a workflow run or a thread).
//
// The hub never blocks a publisher: each subscription has a bounded buffer
// (events and bytes); a follower that falls behind is cut — its buffer is
// dropped and the subscription is marked, so the follower reads what it
// missed from the store, which is the only source of truth. The hub is a
// fast path, never the record: a lost or dropped live event can delay
// delivery, never lose it.
//
// Streams with followers are also polled: every PollInterval the hub reads
// the store once per stream (not once per follower) after the newest seq it
// has seen, and fans out what it finds. That brings events that other
// server instances committed, when a wake-up (PostgreSQL NOTIFY, see Wake)
// was lost. Streams without followers are never polled.
package live
