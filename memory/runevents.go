package memory

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// Option configures a store of this package.
type Option func(*config)

type config struct {
	maxTraceContent int
	now             func() time.Time
}

// WithMaxTraceContent sets the byte limit of the trace content of run
// events. Defaults to runevents.DefaultMaxTraceContent.
func WithMaxTraceContent(n int) Option { return func(c *config) { c.maxTraceContent = n } }

// WithClock sets the clock that stamps rows (run events written without
// CreatedAt). Defaults to time.Now.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// RunEventStore is the in-memory runevents.Store. The zero value is not
// usable; call NewRunEventStore.
type RunEventStore struct {
	cfg config

	mu      sync.RWMutex
	threads map[string]*thread
	closed  bool
	// keys holds the responses of idempotent appends (AppendIdempotent).
	keys         map[idemKey]*storedKey
	lastKeySweep time.Time
}

var (
	_ runevents.Store      = (*RunEventStore)(nil)
	_ runevents.Durability = (*RunEventStore)(nil)
)

// thread holds the rows of one thread. Every slice is ascending by seq and
// holds its own Record headers; Content and Metadata bytes are shared
// between the slices and never modified.
type thread struct {
	// lastSeq is the highest seq ever assigned; deletes keep it, so seqs
	// are never reused.
	lastSeq  int64
	messages []runevents.Record // rows of category message, all runs
	runs     map[string]*run
}

type run struct {
	events   []runevents.Record // every row of the run
	messages []runevents.Record // its rows of category message
}

// NewRunEventStore returns an empty store.
func NewRunEventStore(opts ...Option) *RunEventStore {
	cfg := config{maxTraceContent: runevents.DefaultMaxTraceContent, now: time.Now}
	for _, o := range opts {
		o(&cfg)
	}
	return &RunEventStore{cfg: cfg, threads: map[string]*thread{}}
}

// Durability reports that acknowledged writes survive nothing.
func (s *RunEventStore) Durability() string { return "none (process memory)" }

// Close empties the store; later calls fail with CodeUnavailable.
func (s *RunEventStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed, s.threads, s.keys = true, nil, nil
	return nil
}

func errClosed() error {
	return runstream.Errorf(runstream.CodeUnavailable, "run event store is closed")
}

// Put appends one event.
func (s *RunEventStore) Put(_ context.Context, e runevents.NewEvent) (runevents.Record, error) {
	rec, err := runevents.Prepare(e, s.cfg.now(), s.cfg.maxTraceContent)
	if err != nil {
		return runevents.Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return runevents.Record{}, errClosed()
	}
	return s.appendLocked(rec).Clone(), nil
}

// PutBatch appends the events of one thread atomically.
func (s *RunEventStore) PutBatch(_ context.Context, events []runevents.NewEvent) ([]runevents.Record, error) {
	recs, err := runevents.PrepareBatch(events, s.cfg.now(), s.cfg.maxTraceContent)
	if err != nil || len(recs) == 0 {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed()
	}
	for i := range recs {
		recs[i] = s.appendLocked(recs[i]).Clone()
	}
	return recs, nil
}

// PutIfAbsent appends e unless its run already has a row of its type.
func (s *RunEventStore) PutIfAbsent(_ context.Context, e runevents.NewEvent) (runevents.Record, bool, error) {
	rec, err := runevents.Prepare(e, s.cfg.now(), s.cfg.maxTraceContent)
	if err != nil {
		return runevents.Record{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return runevents.Record{}, false, errClosed()
	}
	old, found, err := s.firstOfTypeLocked(rec)
	switch {
	case err != nil:
		return runevents.Record{}, false, err
	case found:
		return old, false, nil
	}
	return s.appendLocked(rec).Clone(), true, nil
}

// firstOfTypeLocked returns a copy of the earliest row of rec's run and
// type, or CodeConflict when that row belongs to another owner. The caller
// holds s.mu.
func (s *RunEventStore) firstOfTypeLocked(rec runevents.Record) (runevents.Record, bool, error) {
	if t := s.threads[rec.ThreadID]; t != nil && t.runs[rec.RunID] != nil {
		for _, old := range t.runs[rec.RunID].events {
			if old.EventType != rec.EventType {
				continue
			}
			if old.UserID != rec.UserID {
				return runevents.Record{}, false, runstream.Errorf(runstream.CodeConflict,
					"event %s of run %s already exists for another owner", rec.EventType, rec.RunID)
			}
			return old.Clone(), true, nil
		}
	}
	return runevents.Record{}, false, nil
}

// appendLocked assigns rec the thread's next seq and files it. The caller
// holds s.mu for writing.
func (s *RunEventStore) appendLocked(rec runevents.Record) runevents.Record {
	t := s.threads[rec.ThreadID]
	if t == nil {
		t = &thread{runs: map[string]*run{}}
		s.threads[rec.ThreadID] = t
	}
	r := t.runs[rec.RunID]
	if r == nil {
		r = &run{}
		t.runs[rec.RunID] = r
	}
	t.lastSeq++
	rec.Seq = t.lastSeq
	r.events = append(r.events, rec)
	if rec.Category == runevents.CategoryMessage {
		r.messages = append(r.messages, rec)
		t.messages = append(t.messages, rec)
	}
	return rec
}

// ListMessages returns message rows of the thread.
func (s *RunEventStore) ListMessages(_ context.Context, p runevents.ListMessagesParams) ([]runevents.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, errClosed()
	}
	t := s.threads[p.ThreadID]
	if t == nil {
		return nil, nil
	}
	return page(t.messages, p.AfterSeq, p.BeforeSeq, p.Limit, visibleTo(p.Owner)), nil
}

// ListMessagesByRun returns message rows of one run.
func (s *RunEventStore) ListMessagesByRun(_ context.Context, p runevents.ListMessagesByRunParams) ([]runevents.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, errClosed()
	}
	r := s.runLocked(p.ThreadID, p.RunID)
	if r == nil {
		return nil, nil
	}
	return page(r.messages, p.AfterSeq, p.BeforeSeq, p.Limit, visibleTo(p.Owner)), nil
}

// ListEvents returns rows of every category of one run.
func (s *RunEventStore) ListEvents(_ context.Context, p runevents.ListEventsParams) ([]runevents.Record, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, errClosed()
	}
	r := s.runLocked(p.ThreadID, p.RunID)
	if r == nil {
		return nil, nil
	}
	keep := func(rec *runevents.Record) bool {
		if !p.Owner.Sees(rec.UserID) {
			return false
		}
		if len(p.EventTypes) > 0 && !slices.Contains(p.EventTypes, rec.EventType) {
			return false
		}
		if p.FiltersTask() {
			f := runevents.FiltersOf(rec.Metadata)
			return f.HasTaskID && f.TaskID == p.TaskID
		}
		return true
	}
	// Without BeforeSeq, page takes the first rows only when a lower
	// cursor is given; ListEvents always takes the first ones.
	after := p.AfterSeq
	if after == nil {
		after = runevents.Seq(0)
	}
	return page(r.events, after, nil, p.Limit, keep), nil
}

// LastVisibleAISeqByRun returns the newest visible AI message seq per run.
func (s *RunEventStore) LastVisibleAISeqByRun(_ context.Context, p runevents.LastVisibleAIParams) (map[string]int64, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, errClosed()
	}
	out := map[string]int64{}
	for _, id := range p.RunIDs {
		r := s.runLocked(p.ThreadID, id)
		if r == nil {
			continue
		}
		for i := len(r.messages) - 1; i >= 0; i-- {
			if rec := &r.messages[i]; visibleAI(rec) && p.Owner.Sees(rec.UserID) {
				out[id] = rec.Seq
				break
			}
		}
	}
	return out, nil
}

func visibleAI(rec *runevents.Record) bool {
	if rec.Category != runevents.CategoryMessage || !rec.EventType.IsAIResponse() {
		return false
	}
	return !runevents.FiltersOf(rec.Metadata).Middleware
}

// CountMessages returns the number of message rows of the thread.
func (s *RunEventStore) CountMessages(_ context.Context, threadID string, owner runevents.Owner) (int, error) {
	if err := firstError(runevents.ValidateID("thread_id", threadID), runevents.CheckOwner(owner)); err != nil {
		return 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, errClosed()
	}
	t := s.threads[threadID]
	if t == nil {
		return 0, nil
	}
	if owner.All() {
		return len(t.messages), nil
	}
	n := 0
	for i := range t.messages {
		if owner.Sees(t.messages[i].UserID) {
			n++
		}
	}
	return n, nil
}

// DeleteByThread deletes the thread's rows visible to owner.
func (s *RunEventStore) DeleteByThread(_ context.Context, threadID string, owner runevents.Owner) (int, error) {
	if err := firstError(runevents.ValidateID("thread_id", threadID), runevents.CheckOwner(owner)); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, errClosed()
	}
	t := s.threads[threadID]
	if t == nil {
		return 0, nil
	}
	n := 0
	for id := range t.runs {
		n += t.deleteRun(id, owner)
	}
	return n, nil
}

// DeleteByRun deletes the run's rows visible to owner.
func (s *RunEventStore) DeleteByRun(_ context.Context, threadID, runID string, owner runevents.Owner) (int, error) {
	if err := firstError(runevents.ValidateID("thread_id", threadID), runevents.ValidateID("run_id", runID), runevents.CheckOwner(owner)); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, errClosed()
	}
	t := s.threads[threadID]
	if t == nil {
		return 0, nil
	}
	return t.deleteRun(runID, owner), nil
}

// deleteRun removes the run's rows visible to owner from every slice and
// returns how many. The thread itself, and its lastSeq, stay.
func (t *thread) deleteRun(runID string, owner runevents.Owner) int {
	r := t.runs[runID]
	if r == nil {
		return 0
	}
	gone := func(rec runevents.Record) bool { return rec.RunID == runID && owner.Sees(rec.UserID) }
	before := len(r.events)
	r.events = slices.DeleteFunc(r.events, gone)
	r.messages = slices.DeleteFunc(r.messages, gone)
	t.messages = slices.DeleteFunc(t.messages, gone)
	if len(r.events) == 0 {
		delete(t.runs, runID)
	}
	return before - len(r.events)
}

func (s *RunEventStore) runLocked(threadID, runID string) *run {
	if t := s.threads[threadID]; t != nil {
		return t.runs[runID]
	}
	return nil
}

// page applies the cursor rules of runevents.Window to the rows of rows
// that keep accepts, scanning from the cursor so that a page costs
// O(log n + rows scanned), and returns copies.
func page(rows []runevents.Record, after, before *int64, limit int, keep func(*runevents.Record) bool) []runevents.Record {
	// With a limit above the row count, Window only bounds the window.
	rows = runevents.Window(rows, after, before, len(rows)+1)
	var out []runevents.Record
	if after != nil {
		for i := 0; i < len(rows) && len(out) < limit; i++ {
			if keep(&rows[i]) {
				out = append(out, rows[i].Clone())
			}
		}
		return out
	}
	for i := len(rows) - 1; i >= 0 && len(out) < limit; i-- {
		if keep(&rows[i]) {
			out = append(out, rows[i].Clone())
		}
	}
	slices.Reverse(out)
	return out
}

func visibleTo(o runevents.Owner) func(*runevents.Record) bool {
	return func(rec *runevents.Record) bool { return o.Sees(rec.UserID) }
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
