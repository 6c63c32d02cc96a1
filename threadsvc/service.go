package threadsvc

import (
	"context"
	"hash/fnv"
	"sync"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/runevents"
	"golang.org/x/sync/singleflight"
)

// EventStore is what the service reads thread run events with, and
// deletes them by: runevents.Store without its appends, which go through
// the event log.
type EventStore interface {
	ListMessages(ctx context.Context, p runevents.ListMessagesParams) ([]runevents.Record, error)
	ListEvents(ctx context.Context, p runevents.ListEventsParams) ([]runevents.Record, error)
	ListMessagesByRun(ctx context.Context, p runevents.ListMessagesByRunParams) ([]runevents.Record, error)
	LastVisibleAISeqByRun(ctx context.Context, p runevents.LastVisibleAIParams) (map[string]int64, error)
	DeleteByThread(ctx context.Context, threadID string, owner runevents.Owner) (int, error)
	DeleteByRun(ctx context.Context, threadID, runID string, owner runevents.Owner) (int, error)
}

var _ EventStore = runevents.Store(nil)

// Config holds the optional parts of a Service. Idempotency keys need
// none: they commit with their events, in the event log's store.
type Config struct {
	// ContextWindows maps model names to their maximum context in tokens,
	// for the context_usage of token usage (see contextWindow for how a
	// name matches). Nil: DefaultContextWindows.
	ContextWindows map[string]int64
}

// Service is the thread service. It is safe for concurrent use.
type Service struct {
	events  EventStore
	threads runevents.ThreadReader
	runs    runevents.RunStore
	log     *eventlog.ThreadLog
	hub     *live.Hub
	windows map[string]int64
	// heads shares the head reads of simultaneous stream openings.
	heads singleflight.Group
	// writes serialises each thread's ownership check with the write
	// that follows it (see claim).
	writes threadLocks
}

// threadLocks are mutexes striped by thread id.
type threadLocks [64]sync.Mutex

// lock locks the mutex of threadID and returns its unlock.
func (l *threadLocks) lock(threadID string) (unlock func()) {
	h := fnv.New32a()
	h.Write([]byte(threadID))
	m := &l[h.Sum32()%uint32(len(l))]
	m.Lock()
	return m.Unlock
}

// claim checks that user may write to the thread (requireWritable) and,
// when it may, returns with the thread's write lock held until release
// is called, after the write: so two users' first writes to a new thread
// cannot both pass the check before either wrote (the first write makes
// the thread its writer's). The lock is this process's: instances
// sharing a PostgreSQL store can still race on a thread's very first
// write.
//
// The common case, a thread whose first row is the user's, holds the lock
// only for its read: rows only appear, so no other write can make that
// thread another user's, and the write need not wait for, nor hold up,
// the writes of threads that share its lock.
func (s *Service) claim(ctx context.Context, user, threadID string) (release func(), err error) {
	unlock := s.writes.lock(threadID)
	owner, found, err := s.firstOwner(ctx, threadID)
	if err == nil && user != "" && found && owner == user {
		unlock()
		return func() {}, nil
	}
	if err == nil {
		err = s.writable(ctx, user, threadID, found)
	}
	if err != nil {
		unlock()
		return nil, err
	}
	return unlock, nil
}

// New returns the service over events (read and deleted), threads (a
// thread's rows of every category, read for existence checks and
// streams), runs (run rows and feedback), log (the append choke point of
// events) and hub (live followers). A nil log makes Append and
// AppendIfAbsent answer UNAVAILABLE, a nil hub OpenStream.
func New(events EventStore, threads runevents.ThreadReader, runs runevents.RunStore, log *eventlog.ThreadLog, hub *live.Hub, cfg Config) *Service {
	windows := cfg.ContextWindows
	if windows == nil {
		windows = DefaultContextWindows
	}
	return &Service{events: events, threads: threads, runs: runs, log: log, hub: hub, windows: windows}
}

func unavailable(what string) error {
	return runstream.Errorf(runstream.CodeUnavailable, "%s not available", what)
}

func threadNotFound(threadID string) error {
	return runstream.Errorf(runstream.CodeNotFound, "thread %s not found", threadID)
}

// exists reports whether the thread holds rows or run rows visible to
// owner.
func (s *Service) exists(ctx context.Context, threadID string, owner runevents.Owner) (bool, error) {
	rows, err := s.threads.ListThreadEvents(ctx, runevents.ListThreadEventsParams{ThreadID: threadID, Owner: owner, Limit: 1})
	if err != nil || len(rows) > 0 {
		return len(rows) > 0, err
	}
	rs, err := s.runs.ListRuns(ctx, threadID, owner)
	return len(rs) > 0, err
}

// RequireThread returns NOT_FOUND unless the thread exists for user.
func (s *Service) RequireThread(ctx context.Context, user, threadID string) error {
	ok, err := s.exists(ctx, threadID, runevents.OwnedBy(user))
	if err != nil {
		return err
	}
	if !ok {
		return threadNotFound(threadID)
	}
	return nil
}

// requireWritable returns NOT_FOUND when the thread exists only for other
// users, so that nobody writes into, or learns of, another user's thread.
// A thread that does not exist yet is writable: the write creates it. It
// asks "does anyone have rows" before "does the caller": rows only appear,
// so a concurrent first write of the caller's own cannot make the thread
// look foreign, as the other order would. The common case, a thread whose
// first row is the caller's, costs one read (it is on every append's path).
func (s *Service) requireWritable(ctx context.Context, user, threadID string) error {
	owner, found, err := s.firstOwner(ctx, threadID)
	if err != nil {
		return err
	}
	if user != "" && found && owner == user {
		return nil
	}
	return s.writable(ctx, user, threadID, found)
}

// writable is requireWritable once the thread's first row is known not to
// be user's: found tells whether the thread has rows at all.
func (s *Service) writable(ctx context.Context, user, threadID string, found bool) error {
	if !found { // anyone's rows, or else anyone's run rows
		runs, err := s.runs.ListRuns(ctx, threadID, runstream.AnyOwner)
		if err != nil || len(runs) == 0 {
			return err
		}
	}
	mine, err := s.exists(ctx, threadID, runevents.OwnedBy(user))
	if err != nil {
		return err
	}
	if !mine {
		return threadNotFound(threadID)
	}
	return nil
}

// firstOwner returns the owner of the thread's first row, of anyone's,
// and whether it has rows: with the store's runevents.ThreadOwner when it
// has one (a read of one column), else with a read of the row.
func (s *Service) firstOwner(ctx context.Context, threadID string) (string, bool, error) {
	if o, ok := s.threads.(runevents.ThreadOwner); ok {
		return o.FirstThreadOwner(ctx, threadID)
	}
	first, err := s.threads.ListThreadEvents(ctx, runevents.ListThreadEventsParams{ThreadID: threadID, Owner: runstream.AnyOwner, Limit: 1})
	if err != nil || len(first) == 0 {
		return "", false, err
	}
	return first[0].UserID, true, nil
}

// RequireWritable fails (CodeNotFound) when threadID is another user's;
// a thread that does not exist yet is writable. Writers beside the
// service's own appends (package langgraph's pushes) check with it.
func (s *Service) RequireWritable(ctx context.Context, user, threadID string) error {
	return s.requireWritable(ctx, user, threadID)
}

// ClaimWritable is RequireWritable for a caller that then writes to the
// thread itself (a LangGraph push creating its run): when the thread is
// writable, the thread's write lock is held until release is called,
// after that write (see claim).
func (s *Service) ClaimWritable(ctx context.Context, user, threadID string) (release func(), err error) {
	return s.claim(ctx, user, threadID)
}

// WriteError marks the error of a write, as opposed to one of the checks
// before it: a write that failed on the server's side may have committed.
type WriteError struct{ Err error }

func (e WriteError) Error() string { return e.Err.Error() }
func (e WriteError) Unwrap() error { return e.Err }

// MaxBatchEvents returns the most events a batch may hold.
func (s *Service) MaxBatchEvents() int {
	if s.log == nil {
		return eventlog.DefaultMaxBatchEvents
	}
	return s.log.Limits().MaxBatchEvents
}

// Append appends a batch of events of one thread for user (see
// eventlog.ThreadLog.Append) unless the thread is another user's. On a
// store that checks the owner inside the append, an append to the
// caller's own thread reads nothing first (eventlog.ThreadLog.
// AppendWritable). A failed append is a WriteError.
func (s *Service) Append(ctx context.Context, user, threadID string, events []runevents.NewEvent) ([]runevents.Record, error) {
	if s.log == nil {
		return nil, unavailable("thread event log")
	}
	var (
		checkErr error
		release  func()
	)
	recs, err := s.log.AppendWritable(ctx, user, events, func(ctx context.Context) error {
		release, checkErr = s.claim(ctx, user, threadID)
		return checkErr
	})
	if release != nil {
		release()
	}
	if checkErr != nil {
		return nil, checkErr
	}
	if err != nil {
		return nil, WriteError{err}
	}
	return recs, nil
}

// AppendIfAbsent is the singleton write (see
// eventlog.ThreadLog.AppendIfAbsent) for user, unless the thread is
// another user's. A failed append is a WriteError.
func (s *Service) AppendIfAbsent(ctx context.Context, user, threadID string, e runevents.NewEvent) (runevents.Record, bool, error) {
	if s.log == nil {
		return runevents.Record{}, false, unavailable("thread event log")
	}
	release, err := s.claim(ctx, user, threadID)
	if err != nil {
		return runevents.Record{}, false, err
	}
	defer release()
	rec, created, err := s.log.AppendIfAbsent(ctx, user, e)
	if err != nil {
		return runevents.Record{}, false, WriteError{err}
	}
	return rec, created, nil
}

// DeleteThreadEvents deletes the user's rows of the thread and returns
// how many.
func (s *Service) DeleteThreadEvents(ctx context.Context, user, threadID string) (int, error) {
	if err := s.RequireThread(ctx, user, threadID); err != nil {
		return 0, err
	}
	return s.events.DeleteByThread(ctx, threadID, runevents.OwnedBy(user))
}

// DeleteRunEvents deletes the user's rows of a run of the thread and
// returns how many.
func (s *Service) DeleteRunEvents(ctx context.Context, user, threadID, runID string) (int, error) {
	if err := s.RequireThread(ctx, user, threadID); err != nil {
		return 0, err
	}
	return s.events.DeleteByRun(ctx, threadID, runID, runevents.OwnedBy(user))
}

// PutRun checks p, then creates its run row or replaces the row's
// mutable fields (status, model, metadata, usage, updated_at), unless the
// thread is another user's; created_at and the owner stay from the first
// write. The row's text and metadata are stored redacted.
func (s *Service) PutRun(ctx context.Context, p RunParams) (runevents.ThreadRun, error) {
	run, err := p.row()
	if err != nil {
		return runevents.ThreadRun{}, err
	}
	release, err := s.claim(ctx, run.OwnerID, run.ThreadID)
	if err != nil {
		return runevents.ThreadRun{}, err
	}
	defer release()
	return s.runs.PutRun(ctx, run)
}

// GetRun returns the user's run row.
func (s *Service) GetRun(ctx context.Context, user, threadID, runID string) (runevents.ThreadRun, error) {
	return s.userRun(ctx, user, threadID, runID)
}

// MaxListedRuns is the most run rows ListRuns returns when the caller
// sets no limit, as DeerFlow's run list (its run store's list_by_thread)
// returns.
const MaxListedRuns = 100

// ListRuns returns the user's run rows of the thread, newest first (by
// created_at, then run id), as DeerFlow lists them: at most limit of them
// after skipping the offset newest (the LangGraph API's limit and offset);
// none for a thread that is unknown, or another user's (DeerFlow lists no
// runs of a thread it has no row of; another user's answers like it).
func (s *Service) ListRuns(ctx context.Context, user, threadID string, limit, offset int) ([]runevents.ThreadRun, error) {
	return s.runs.ListRunsNewest(ctx, threadID, runevents.OwnedBy(user), limit, offset)
}
