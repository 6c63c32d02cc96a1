// Package threadsvc is the thread service: what a caller may do with the
// run events, run rows and feedback of agent threads, whatever transport
// carries the request.
//
// It appends events (a batch, or the singleton write of a run's one row
// of a type) through the append choke point (eventlog.ThreadLog), under
// an idempotency key when the caller gives one; it stores run rows and
// feedback; and it computes the consumer projections of reference §2:
// the legacy message feed, the message pages of the frontend, a run's
// messages and events, its workspace changes, and a thread's token usage.
// It opens a view of a thread for a live follower.
//
// Every method acts for one user: a thread exists for a user when it
// holds rows or run rows of theirs, and one that does not is NOT_FOUND,
// whether it is unknown or another user's, except where DeerFlow answers
// an empty one (the history reads, the runs list, token usage), which
// then answer another user's thread exactly like an empty one; a run the
// user does not own is DeerFlow's "Run <id> not found". Writes to a thread that holds
// only other users' rows are NOT_FOUND too (the check is not atomic with
// the write: two users creating one thread id at the same instant may
// both succeed, and each still reads only their own rows).
//
// The event store it holds (EventStore) has no method that appends, so
// the types keep every append on the choke point.
package threadsvc
