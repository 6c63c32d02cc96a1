// Package langgraph serves a durable LangGraph-compatible run stream:
// producers running elsewhere push a run's stream chunks (POST
// /api/runs/{run_id}/stream-chunks), browsers follow them with the
// LangGraph SDK's joinStream (GET /api/threads/{thread_id}/runs/{run_id}/stream),
// and cancel requests reach the producer through its push answers or a
// long-poll. Chunks live in a runchunks.Store (SQLite, PostgreSQL or
// memory), reach the joiners of this instance through the live hub and
// those of other instances through the store's wake-ups (PostgreSQL
// NOTIFY) and the hub's poll. A sweeper ends the runs whose producer
// stopped renewing its lease, and drops the chunks of runs that ended
// longer ago than the retention.
//
// The wire format follows the LangGraph SDK 1.6.0 and DeerFlow's gateway;
// see docs/LANGGRAPH.md.
package langgraph

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/redact"
	"github.com/runstream/runstream/runchunks"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/threadsvc"
)

// Defaults of Config.
const (
	DefaultLease = 60 * time.Second
	// SafeLease is the shortest lease that never sweeps a healthy idle
	// producer: twice the 10 s chunkpush stays silent before its empty
	// renewal push. serve warns below it.
	SafeLease            = 20 * time.Second
	DefaultChunkTTL      = 24 * time.Hour
	DefaultMaxChunks     = 10_000
	DefaultMaxChunkBytes = 4 << 20
	// MinMaxChunkBytes is the least chunk limit: a full "values" state of
	// a long chat must fit.
	MinMaxChunkBytes  = 4 << 20
	DefaultHeartbeat  = 15 * time.Second
	DefaultLifetime   = time.Hour
	DefaultMaxBatch   = 1000
	DefaultControlMax = 30 * time.Second
)

// Config holds what has a default.
type Config struct {
	// Lease is how long a run stays active without a push; then the
	// sweeper ends it with an error chunk and status error.
	Lease time.Duration
	// ChunkTTL is how long the chunks of an ended run are kept.
	ChunkTTL time.Duration
	// MaxChunks is how many chunks a run keeps; past it the oldest go.
	MaxChunks int64
	// MaxChunkBytes bounds one chunk's data (at least MinMaxChunkBytes).
	MaxChunkBytes int
	// MaxBatch bounds the chunks of one push.
	MaxBatch int
	// Heartbeat is the silence after which a join stream writes a
	// heartbeat comment.
	Heartbeat time.Duration
	// MaxLifetime is how long one join stream stays open; then its
	// connection is aborted (the SDK reconnects with Last-Event-ID).
	MaxLifetime time.Duration
	// SweepInterval is the period of the lease and retention sweeper.
	// Defaults to a quarter of Lease, between 1s and 15s.
	SweepInterval time.Duration
	// ControlMax bounds the wait of a control long-poll.
	ControlMax time.Duration
	// Writable, when set, refuses a push creating a run in a thread the
	// user may not write; when the user may, it holds the thread until
	// release is called, after the push that creates the run
	// (threadsvc.Service.ClaimWritable).
	Writable func(ctx context.Context, user, threadID string) (release func(), err error)
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
}

func (c *Config) setDefaults() {
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	if c.ChunkTTL <= 0 {
		c.ChunkTTL = DefaultChunkTTL
	}
	if c.MaxChunks <= 0 {
		c.MaxChunks = DefaultMaxChunks
	}
	if c.MaxChunkBytes <= 0 {
		c.MaxChunkBytes = DefaultMaxChunkBytes
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.MaxLifetime <= 0 {
		c.MaxLifetime = DefaultLifetime
	}
	if c.SweepInterval <= 0 {
		c.SweepInterval = min(max(c.Lease/4, time.Second), 15*time.Second)
	}
	if c.ControlMax <= 0 {
		c.ControlMax = DefaultControlMax
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Service is the run stream: push, join, cancel and the sweeper. Create it
// with New; it is safe for concurrent use.
type Service struct {
	store    runchunks.Store
	hub      *live.Hub
	cfg      Config
	redactor *redact.Redactor

	// stop is cancelled by Shutdown: the join streams abort.
	stop   context.Context
	cancel context.CancelFunc

	mu sync.Mutex
	// waiters are this instance's control long-polls, by run: woken when
	// a cancel request or the end is stored here.
	waiters map[string]map[chan struct{}]struct{}
}

// New returns the service over store, publishing to hub.
func New(store runchunks.Store, hub *live.Hub, cfg Config) *Service {
	cfg.setDefaults()
	s := &Service{store: store, hub: hub, cfg: cfg, redactor: redact.New(redact.Options{KeepReasoning: true}),
		waiters: map[string]map[chan struct{}]struct{}{}}
	s.stop, s.cancel = context.WithCancel(context.Background())
	return s
}

// Shutdown aborts every join stream (their clients reconnect, to another
// instance or after the restart) and refuses new ones; it ends the pending
// control long-polls at once, and refuses new ones, with UNAVAILABLE (503
// with Retry-After: the producer polls again, on another instance or
// after the restart), so that none holds a graceful shutdown for its wait.
func (s *Service) Shutdown() { s.cancel() }

// shuttingDown is the error of a request refused or ended by Shutdown.
func shuttingDown() error {
	return runstream.Errorf(runstream.CodeUnavailable, "the server is shutting down")
}

// StreamKey is the hub key of a run's chunk stream. Its seqs are chunk
// index + 1; the end is the seq after the last chunk's.
func StreamKey(runID string) string { return "langgraph:" + runID }

// PushChunk is one chunk of a push, as the producer sends it.
type PushChunk struct {
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data"`
}

// PushEnd ends the run.
type PushEnd struct {
	Status runevents.RunStatus `json:"status"`
	Error  json.RawMessage     `json:"error"`
}

// PushRequest is the body of POST /api/runs/{run_id}/stream-chunks.
type PushRequest struct {
	ThreadID   string      `json:"thread_id"`
	Epoch      *int64      `json:"epoch"`
	FirstIndex *int64      `json:"first_index"`
	Chunks     []PushChunk `json:"chunks"`
	End        *PushEnd    `json:"end"`
}

// CancelAnswer is a pending cancel request in an answer.
type CancelAnswer struct {
	Action      string `json:"action"`
	RequestedAt string `json:"requested_at"`
}

// Answer is the answer of a push and of the control long-poll.
type Answer struct {
	RunID     string              `json:"run_id"`
	ThreadID  string              `json:"thread_id"`
	Epoch     int64               `json:"epoch"`
	NextIndex int64               `json:"next_index"`
	Status    runevents.RunStatus `json:"status"`
	Cancel    *CancelAnswer       `json:"cancel"`
}

func answerOf(r runchunks.Run) Answer {
	a := Answer{RunID: r.RunID, ThreadID: r.ThreadID, Epoch: r.Epoch, NextIndex: r.NextIndex, Status: r.Status}
	if r.Cancel != nil {
		a.Cancel = &CancelAnswer{Action: r.Cancel.Action, RequestedAt: r.Cancel.RequestedAt.UTC().Format(time.RFC3339Nano)}
	}
	return a
}

// problem is a VALIDATION_FAILED error of the body member at path.
func problem(path, format string, args ...any) error {
	return threadsvc.Problem(path, fmt.Sprintf(format, args...))
}

// reservedEvents are written by the join stream itself.
var reservedEvents = map[string]bool{"metadata": true, "end": true, "gap": true}

// prepare checks req and returns the push it makes: ids, epoch, indexes,
// event names (1-256 bytes of UTF-8 without CR, LF or NUL, not a reserved
// name), data (JSON, compacted, then at most MaxChunkBytes, redacted with
// the chunk profile), the end's status and error object.
func (s *Service) prepare(user, runID string, req PushRequest) (runchunks.Push, error) {
	p := runchunks.Push{RunID: runID, ThreadID: req.ThreadID, OwnerID: user, Now: s.cfg.Now(), Lease: s.cfg.Lease, MaxChunks: s.cfg.MaxChunks}
	if err := runevents.ValidateID("run_id", runID); err != nil {
		return p, err
	}
	// "required" for a missing member (FastAPI's type missing), "must"
	// for one present with a wrong value.
	switch {
	case req.ThreadID == "":
		return p, problem("/thread_id", "required: 1-64 ASCII letters, digits, hyphens or underscores")
	case runevents.ValidateID("thread_id", req.ThreadID) != nil:
		return p, problem("/thread_id", "must be 1-64 ASCII letters, digits, hyphens or underscores")
	case req.Epoch == nil:
		return p, problem("/epoch", "required: an integer >= 0")
	case *req.Epoch < 0:
		return p, problem("/epoch", "must be an integer >= 0")
	}
	p.Epoch = *req.Epoch
	switch {
	case req.FirstIndex != nil && *req.FirstIndex >= 0:
		p.FirstIndex = *req.FirstIndex
	case req.FirstIndex != nil || len(req.Chunks) > 0:
		return p, problem("/first_index", "required with chunks: an integer >= 0")
	}
	if len(req.Chunks) > s.cfg.MaxBatch {
		return p, problem("/chunks", "at most %d chunks per push, got %d", s.cfg.MaxBatch, len(req.Chunks))
	}
	p.Chunks = make([]runchunks.Chunk, 0, len(req.Chunks))
	for i, c := range req.Chunks {
		if !validEvent(c.Event) {
			return p, problem(fmt.Sprintf("/chunks/%d/event", i), "must be 1-256 bytes of UTF-8 without CR, LF or NUL, and not metadata, end or gap")
		}
		data, err := s.cleanJSON(c.Data, fmt.Sprintf("/chunks/%d/data", i))
		if err != nil {
			return p, err
		}
		// The event name is stored and streamed too: its secrets go.
		p.Chunks = append(p.Chunks, runchunks.Chunk{Event: redact.Text(c.Event), Data: data})
	}
	if req.End != nil {
		if !runchunks.Terminal(req.End.Status) {
			return p, problem("/end/status", "must be success, error, timeout or interrupted")
		}
		end := &runchunks.End{Status: req.End.Status}
		if len(req.End.Error) > 0 && string(req.End.Error) != "null" {
			if !bytes.HasPrefix(bytes.TrimSpace(req.End.Error), []byte("{")) {
				return p, problem("/end/error", `must be an object {"message","name"}`)
			}
			data, err := s.cleanJSON(req.End.Error, "/end/error")
			if err != nil {
				return p, err
			}
			end.Error = data
		}
		p.End = end
	}
	return p, nil
}

func validEvent(e string) bool {
	return e != "" && len(e) <= 256 && utf8.ValidString(e) && !strings.ContainsAny(e, "\r\n\x00") && !reservedEvents[e]
}

// cleanJSON returns data compacted (one line: the SDK parses each data
// line as JSON) and redacted, at most MaxChunkBytes both before and after
// the redaction; missing data is null.
func (s *Service) cleanJSON(data json.RawMessage, path string) (json.RawMessage, error) {
	if len(data) == 0 {
		return json.RawMessage("null"), nil
	}
	var buf bytes.Buffer
	if !utf8.Valid(data) || json.Compact(&buf, data) != nil {
		return nil, problem(path, "must be JSON in UTF-8")
	}
	if buf.Len() > s.cfg.MaxChunkBytes {
		return nil, runstream.Errorf(runstream.CodePayloadTooLarge, "%s: a chunk's data must have at most %d bytes of compact JSON, got %d", path, s.cfg.MaxChunkBytes, buf.Len()).
			WithDetail("limit", s.cfg.MaxChunkBytes)
	}
	out, _, err := s.redactor.JSON(buf.Bytes())
	if err != nil { // not the caller's fault: the data is valid JSON
		return nil, runstream.Wrap(err, runstream.CodeInternal, "could not redact a chunk's data")
	}
	// A marker can be longer than the value it replaces: the limit holds
	// for what is stored and streamed, too.
	if len(out) > s.cfg.MaxChunkBytes {
		return nil, runstream.Errorf(runstream.CodePayloadTooLarge, "%s: a chunk's data must have at most %d bytes of compact JSON once its secrets are redacted, got %d", path, s.cfg.MaxChunkBytes, len(out)).
			WithDetail("limit", s.cfg.MaxChunkBytes)
	}
	return out, nil
}

// Push stores a producer's push for user and publishes what it wrote.
func (s *Service) Push(ctx context.Context, user, runID string, req PushRequest) (Answer, error) {
	p, err := s.prepare(user, runID, req)
	if err != nil {
		return Answer{}, err
	}
	if s.cfg.Writable != nil {
		if _, err := s.store.GetRun(ctx, runID); err != nil {
			if runstream.AsError(err).Code != runstream.CodeNotFound {
				return Answer{}, err
			}
			release, err := s.cfg.Writable(ctx, user, p.ThreadID)
			if err != nil {
				return Answer{}, err // the run would be created in another user's thread
			}
			defer release()
		}
	}
	res, err := s.store.Push(ctx, p)
	if err != nil {
		return Answer{}, err
	}
	s.publish(res)
	return answerOf(res.Run), nil
}

// publish hands what a push wrote to the hub, and wakes the control
// long-polls of an ended run.
func (s *Service) publish(res runchunks.Result) {
	if len(res.Appended) == 0 && !res.Ended {
		return
	}
	events := make([]live.Event, 0, len(res.Appended)+1)
	for _, c := range res.Appended {
		events = append(events, chunkEvent(c))
	}
	if res.Ended {
		events = append(events, endEvent(res.Run.NextIndex))
		s.wake(res.Run.RunID)
	}
	s.hub.Publish(StreamKey(res.Run.RunID), events)
}

// chunkEvent is the hub event of a chunk: its frame, its event name as
// the attribute the stream_mode filter reads.
func chunkEvent(c runchunks.Chunk) live.Event {
	return live.Event{Seq: c.Index + 1, Frame: chunkFrame(nil, c), Attrs: c.Event}
}

// endEvent is the hub event of the end of a run whose next index is next.
func endEvent(next int64) live.Event {
	return live.Event{Seq: next + 1, Frame: []byte(endFrame), Terminal: true}
}

// endFrame ends a join stream.
const endFrame = "event: end\ndata: null\n\n"

// chunkFrame appends the SSE frame of c: event, data (one line of JSON)
// and id, the chunk's index.
func chunkFrame(buf []byte, c runchunks.Chunk) []byte {
	buf = append(buf, "event: "...)
	buf = append(buf, c.Event...)
	buf = append(buf, "\ndata: "...)
	buf = append(buf, c.Data...)
	buf = append(buf, "\nid: "...)
	buf = strconv.AppendInt(buf, c.Index, 10)
	return append(buf, "\n\n"...)
}

// Poller returns the hub's poll function: the chunk streams' keys
// (StreamKey) are read from store, the others by next.
func Poller(store runchunks.Store, next live.PollFunc) live.PollFunc {
	return func(ctx context.Context, key string, after int64) ([]live.Event, error) {
		runID, ok := strings.CutPrefix(key, "langgraph:")
		if !ok {
			if next == nil {
				return nil, fmt.Errorf("poll: unknown stream key %q", key)
			}
			return next(ctx, key, after)
		}
		// The hub polls again only when woken: a page must hold what
		// the pushes of a wake wrote (chunkpush sends up to 200).
		const page = 500
		chunks, err := store.ReadChunks(ctx, runID, after-1, page, 0)
		if err != nil {
			return nil, fmt.Errorf("poll %s: %w", key, err)
		}
		events := make([]live.Event, 0, len(chunks)+1)
		for _, c := range chunks {
			events = append(events, chunkEvent(c))
		}
		if len(chunks) < page {
			run, err := store.GetRun(ctx, runID)
			if err == nil && run.Ended() && after <= run.NextIndex {
				events = append(events, endEvent(run.NextIndex))
			}
		}
		return events, nil
	}
}

// Wake tells the hub that another instance wrote the chunk stream of
// runID up to seq (its PostgreSQL notification).
func (s *Service) Wake(runID string, seq int64) {
	s.hub.WakeSeq(StreamKey(runID), seq)
	s.wake(runID)
}

// wake wakes the control long-polls of runID on this instance.
func (s *Service) wake(runID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.waiters[runID] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// watch registers a control long-poll of runID; stop unregisters it.
func (s *Service) watch(runID string) (ch chan struct{}, stop func()) {
	ch = make(chan struct{}, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiters[runID] == nil {
		s.waiters[runID] = map[chan struct{}]struct{}{}
	}
	s.waiters[runID][ch] = struct{}{}
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.waiters[runID], ch)
		if len(s.waiters[runID]) == 0 {
			delete(s.waiters, runID)
		}
	}
}

// controlPoll is how often a long-poll reads the store, for what other
// instances stored.
const controlPoll = time.Second

// Control answers the producer's long-poll: the run's state once a cancel
// request other than the one the producer has (cancelSeen, its
// requested_at; zero: none) is pending or the run ended, or after wait (at
// most ControlMax).
// Another user's run is CodeNotFound. Once Shutdown is called, a pending
// long-poll ends at once and a new one is refused, both CodeUnavailable.
func (s *Service) Control(ctx context.Context, user, runID string, wait time.Duration, cancelSeen time.Time) (Answer, error) {
	if s.stop.Err() != nil {
		return Answer{}, shuttingDown()
	}
	wait = min(max(wait, 0), s.cfg.ControlMax)
	ch, stop := s.watch(runID)
	defer stop()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(controlPoll)
	defer tick.Stop()
	for {
		run, err := s.userRun(ctx, user, runID)
		if err != nil {
			return Answer{}, err
		}
		// A cancel the producer already has (cancel_seen) is no news: the
		// poll waits for the run's end like any other, rather than
		// answering at once, again and again, until the producer ends it.
		newCancel := run.Cancel != nil && !run.Cancel.RequestedAt.Equal(cancelSeen)
		if newCancel || run.Ended() {
			return answerOf(run), nil
		}
		select {
		case <-deadline.C:
			return answerOf(run), nil
		case <-ctx.Done():
			return Answer{}, runstream.Wrap(ctx.Err(), runstream.CodeUnavailable, "the long-poll was cancelled")
		case <-s.stop.Done():
			return Answer{}, shuttingDown()
		case <-ch:
		case <-tick.C:
		}
	}
}

// userRun returns the run visible to user: another user's is CodeNotFound.
func (s *Service) userRun(ctx context.Context, user, runID string) (runchunks.Run, error) {
	run, err := s.store.GetRun(ctx, runID)
	if err != nil {
		return runchunks.Run{}, err
	}
	if run.OwnerID != user {
		return runchunks.Run{}, runchunks.NotFound(runID)
	}
	return run, nil
}

// CancelOutcome is what Cancel did.
type CancelOutcome int

// Outcomes of Cancel.
const (
	// CancelAccepted: the request is stored; the producer sees it.
	CancelAccepted CancelOutcome = iota
	// CancelDone: wait was set and the run has ended.
	CancelDone
)

// Cancel stores a cancel request (action "interrupt" or "rollback") on
// the run of threadID; with wait it returns once the run ended, or when
// ctx ends or Shutdown is called (CodeUnavailable: the request is stored,
// the wait is not). A run that has ended is CodeConflict "Run <id> is not
// cancellable (status: <s>)"; an unknown or other user's run CodeNotFound.
func (s *Service) Cancel(ctx context.Context, user, threadID, runID, action string, wait bool) (CancelOutcome, error) {
	if action != "interrupt" && action != "rollback" {
		return 0, runstream.Errorf(runstream.CodeValidationFailed, "action must be interrupt or rollback").WithDetail("parameter", "action")
	}
	run, err := s.userRun(ctx, user, runID)
	if err != nil {
		return 0, err
	}
	if run.ThreadID != threadID {
		return 0, runchunks.NotFound(runID)
	}
	if run.Ended() {
		return 0, notCancellable(run)
	}
	if run, err = s.store.RequestCancel(ctx, runID, action, s.cfg.Now()); err != nil {
		return 0, err
	}
	if run.Ended() {
		return 0, notCancellable(run)
	}
	s.wake(runID)
	if !wait {
		return CancelAccepted, nil
	}
	sub := s.hub.Subscribe(StreamKey(runID), run.NextIndex)
	defer sub.Close()
	tick := time.NewTicker(controlPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0, runstream.Wrap(ctx.Err(), runstream.CodeUnavailable, "the wait for the run's end was cancelled")
		case <-s.stop.Done():
			return 0, shuttingDown() // the request is stored; the wait ends with the server
		case <-sub.Ready():
			sub.Take()
		case <-tick.C:
		}
		if run, err = s.store.GetRun(ctx, runID); err != nil {
			return 0, err
		}
		if run.Ended() {
			return CancelDone, nil
		}
	}
}

func notCancellable(run runchunks.Run) error {
	return runstream.Errorf(runstream.CodeConflict, "Run %s is not cancellable (status: %s)", run.RunID, run.Status).
		WithDetail("status", string(run.Status))
}

// leaseError is the chunk the sweeper writes for a run whose producer
// stopped renewing its lease.
var leaseError = json.RawMessage(`{"message":"the run's producer stopped sending (its lease expired)","name":"LeaseExpiredError"}`)

// Run sweeps until ctx is done, every SweepInterval: it ends the runs
// whose lease expired (an "error" chunk, the end, status error) and
// deletes the chunks of runs that ended more than ChunkTTL ago.
func (s *Service) Run(ctx context.Context) {
	tick := time.NewTicker(s.cfg.SweepInterval)
	defer tick.Stop()
	for {
		if err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("langgraph: sweep failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Sweep is one pass of Run.
func (s *Service) Sweep(ctx context.Context) error {
	now := s.cfg.Now()
	for {
		runs, err := s.store.ExpiredRuns(ctx, now, 100)
		if err != nil {
			return err
		}
		ended := 0
		for _, r := range runs {
			res, err := s.store.Push(ctx, runchunks.Push{RunID: r.RunID, ThreadID: r.ThreadID, OwnerID: r.OwnerID, Expire: true, Now: now,
				MaxChunks: s.cfg.MaxChunks, Chunks: []runchunks.Chunk{{Event: runchunks.ErrorEvent, Data: leaseError}},
				End: &runchunks.End{Status: runevents.RunError}})
			if err != nil {
				return err
			}
			if !res.Skipped {
				ended++
				s.cfg.Logger.Info("langgraph: run ended, its lease expired", "run_id", r.RunID)
			}
			s.publish(res)
		}
		if len(runs) < 100 || ended == 0 {
			break
		}
	}
	_, err := s.store.DeleteEndedChunks(ctx, now.Add(-s.cfg.ChunkTTL))
	return err
}
