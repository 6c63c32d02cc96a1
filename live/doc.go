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
// Each subscription has a frontier: the seq it subscribed after, then the
// newest seq handed to it. It is never handed, nor cut by, an event at or
// below its frontier, so a follower resuming from an old cursor, which
// replays from the store itself, costs the other followers of its stream
// nothing. A subscription receives every event committed after it was
// registered, in seq order and without a gap, or is cut; the follower
// drops what it already has and reads the store after a cut. Events
// published ahead of a missing seq are held and the hub reads the store
// once for all followers, at most once per PollInterval per stream beyond
// the periodic poll; what the store lacks for good is passed.
//
// Streams with followers are also polled: every PollInterval the hub reads
// the store once per stream (not once per follower) after the stream's
// frontier, and fans out what it finds. That brings events that other
// server instances committed, when a wake-up (PostgreSQL NOTIFY, see Wake
// and WakeSeq) was lost. Wake-ups are coalesced: a stream waits in the
// wake-up queue at most once, and WakeSeq of a seq already delivered reads
// nothing; the periodic poll serves waiting wake-ups between its streams.
// Streams without followers are never polled.
package live
