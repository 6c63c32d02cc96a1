package runevents

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// ListThreadEventsParams selects rows of every category of a thread after a
// seq, ascending: the replay of the thread stream.
type ListThreadEventsParams struct {
	ThreadID string
	Owner    Owner
	// AfterSeq keeps rows with seq > AfterSeq.
	AfterSeq int64
	// BeforeSeq, when positive, keeps rows with seq < BeforeSeq: a range
	// of the thread, which a replay reads along with the next range.
	BeforeSeq int64
	// Limit is the maximum number of rows; it must be positive.
	Limit int
	// RunID, when not empty, keeps rows of that run only.
	RunID string
	// Category, when not empty, keeps rows of that category only.
	Category Category
}

// Validate checks p: thread id, run id when given, owner, positive limit,
// non-negative cursor.
func (p ListThreadEventsParams) Validate() error {
	errs := []error{ValidateID("thread_id", p.ThreadID), CheckOwner(p.Owner), CheckLimit(p.Limit)}
	if p.RunID != "" {
		errs = append(errs, ValidateID("run_id", p.RunID))
	}
	if p.AfterSeq < 0 {
		errs = append(errs, runstreamInvalid("after_seq must not be negative"))
	}
	if p.BeforeSeq < 0 {
		errs = append(errs, runstreamInvalid("before_seq must not be negative"))
	}
	return firstError(errs...)
}

// ThreadReader reads a thread's rows of every category after a seq. Every
// run-event backend implements it; the thread stream needs it.
type ThreadReader interface {
	ListThreadEvents(ctx context.Context, p ListThreadEventsParams) ([]Record, error)
}

// ThreadJSONReader is implemented by the backends that write a thread's
// rows as JSON envelopes (Record.AppendJSON) straight from how they store
// them. A thread stream's replay copies the envelopes into its frames
// instead of reading Records and encoding them: the Records, their copies
// and the decoding and encoding of their times were most of a replay's
// cost.
type ThreadJSONReader interface {
	// ScanThreadJSON calls fn, in order, with the seq, event type and JSON
	// envelope of each row ListThreadEvents(p) returns, the envelope byte
	// for byte what Record.AppendJSON writes of that row. envelope is
	// valid during the call only. It stops at, and returns, the first
	// error of fn.
	ScanThreadJSON(ctx context.Context, p ListThreadEventsParams, fn func(seq int64, eventType string, envelope []byte) error) error
}

// ThreadHead is implemented by the backends that read a thread's newest
// seq without reading its rows. A thread's followers subscribe to its
// live events after it, so that the hub does not read history they read
// from the store themselves.
type ThreadHead interface {
	// LastThreadSeq returns the highest seq handed out in the thread,
	// whoever owns the row and whether or not it was deleted since; 0 for
	// a thread without rows. Only committed appends count.
	LastThreadSeq(ctx context.Context, threadID string) (int64, error)
}

// ThreadOwner is implemented by the backends that read the owner of a
// thread's first row without reading the row. The thread service's
// ownership check, on every append's path, uses it when it is there.
type ThreadOwner interface {
	// FirstThreadOwner returns the user_id of the thread's row with the
	// lowest seq, whoever owns it, and false for a thread without rows.
	FirstThreadOwner(ctx context.Context, threadID string) (userID string, ok bool, err error)
}

// ErrNotFirstOwner is OwnedAppender's answer for a thread without rows or
// whose first row is another user's: nothing was written.
var ErrNotFirstOwner = errors.New("runevents: the thread has no rows of the caller's first")

// OwnedAppender is implemented by the backends that check a thread's
// owner inside the append's own transaction, so that an append to a
// thread the caller already owns costs no read of its own. The thread
// service appends through it first and checks ownership the long way
// (ThreadOwner, run rows) only when it answers ErrNotFirstOwner, as for
// a thread's first append.
type OwnedAppender interface {
	// PutBatchOwned is PutBatch when the thread's row with the lowest seq,
	// read in the same transaction, is userID's (userID must not be
	// empty); otherwise it writes nothing and returns ErrNotFirstOwner.
	PutBatchOwned(ctx context.Context, userID string, events []NewEvent) ([]Record, error)
}

// GroupCommitter is implemented by the backends that commit concurrent
// appends together, in one transaction: they hand each group's records to
// one function, so that the live fan-out (package eventlog) publishes a
// commit at once and a follower writes its events in one frame batch,
// where appends published one by one would wake it once per append.
type GroupCommitter interface {
	// OnGroupCommit sets f (nil: none), replacing the function set before.
	// f is called after each commit of appends made by Put, PutBatch and
	// PutBatchOwned, once their callers are answered, with their records:
	// ascending by seq within each thread, and a thread's commits in order.
	// Calls for different threads may run at the same time (PostgreSQL's
	// committers each serve a share of the threads). A commit whose outcome
	// the store cannot know (a connection lost while committing) is not
	// handed over; its rows reach followers from the store. f runs in the
	// store's writer: it must be quick, must not call the store, and must
	// not keep or modify recs.
	OnGroupCommit(f func(recs []Record))
}

// GroupCommitHook holds the function of a GroupCommitter's OnGroupCommit;
// the zero value holds none. It is safe for concurrent use: the store's
// writers read it while OnGroupCommit may set it.
type GroupCommitHook struct {
	f atomic.Pointer[func(recs []Record)]
}

// Set replaces the function (nil: none).
func (h *GroupCommitHook) Set(f func(recs []Record)) {
	if f == nil {
		h.f.Store(nil)
		return
	}
	h.f.Store(&f)
}

// Func returns the function, or nil when none is set.
func (h *GroupCommitHook) Func() func(recs []Record) {
	if f := h.f.Load(); f != nil {
		return *f
	}
	return nil
}

// IdempotentResponse is the first response to a request made with an
// Idempotency-Key.
type IdempotentResponse struct {
	// RequestHash is the SHA-256 of the request (method, path, body).
	RequestHash []byte
	Status      int
	Body        []byte
	CreatedAt   time.Time
}

// IdempotencyStore remembers responses by (owner, key) so that a retried
// request gets the first response instead of being applied twice. It is
// safe for concurrent use, across processes for the SQL backends.
//
// Begin, the write and Complete are three transactions: a crash between
// them leaves the key reserved until it expires, with the write's outcome
// unknown. Appends use IdempotentAppender instead, which commits the key
// with the rows; a reservation Begin left is reported to it as
// ErrIdempotencyInProgress.
type IdempotencyStore interface {
	// Begin reserves (userID, key) for a request with the given hash. When
	// the key already has a completed response with the same hash it
	// returns that response; with another hash it fails with
	// CodeValidationFailed; while another request holds the reservation it
	// fails with CodeConflict.
	Begin(ctx context.Context, userID, key string, requestHash []byte) (*IdempotentResponse, error)
	// Complete stores the response of a reserved key.
	Complete(ctx context.Context, userID, key string, resp IdempotentResponse) error
	// Abort releases a reservation whose request failed, so it can be
	// retried.
	Abort(ctx context.Context, userID, key string) error
}
