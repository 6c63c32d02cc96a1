package eventlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/redact"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/streams"
)

// Default limits of thread event batches (DESIGN §7).
const (
	DefaultMaxEventBytes  = 256 << 10
	DefaultMaxBatchEvents = 100
	DefaultMaxBatchBytes  = 4 << 20
)

// ThreadLimits bounds the batches a ThreadLog accepts. The size of an
// event is the bytes of its content and metadata as given, except that a
// trace event counts what the store keeps of it
// (runevents.StoredTraceSize): the store keeps only the first
// MaxTraceContent bytes of a trace's text, so a long trace (a large LLM
// request or error) is stored truncated, as DeerFlow stores it, rather
// than refused. The batch's size counts every byte as given.
type ThreadLimits struct {
	// MaxEventBytes bounds one event. Defaults to DefaultMaxEventBytes.
	MaxEventBytes int
	// MaxBatchEvents bounds the events of a batch. Defaults to
	// DefaultMaxBatchEvents.
	MaxBatchEvents int
	// MaxBatchBytes bounds the sum of the sizes of a batch's events.
	// Defaults to DefaultMaxBatchBytes.
	MaxBatchBytes int
	// MaxTraceContent is the store's limit of trace content (the
	// maxTraceContent its runevents.Prepare is given). Defaults to
	// runevents.DefaultMaxTraceContent.
	MaxTraceContent int
}

// ThreadLog appends thread run events: check against the catalogue and
// the contract, redact, append, publish. It is safe for concurrent use.
//
// For each event of a batch: the event type must be catalogued or match
// middleware:{tag} (tag 1–21 characters, no control characters), or the
// legacy alias ai_message, which old data holds and which is stored as
// written (reads treat it as llm.ai.response); an empty category is filled
// from the catalogue and any other must equal it; content (default "") and
// metadata (default {}) must match the contract's schemas (the alias: the
// canonical content schema and a metadata schema of its own). Every
// violation is CodeValidationFailed with details.problems, whose paths
// start with /events/<index>. Size limits are CodePayloadTooLarge. One bad
// event refuses the whole batch: nothing is stored or published.
type ThreadLog struct {
	store     runevents.Store
	validator *contracts.Validator
	hub       *live.Hub
	redactor  *redact.Redactor
	limits    ThreadLimits
	// storePublishes is true when the store hands its group commits to
	// publishGroup (runevents.GroupCommitter): the plain appends are
	// published from there, one publication per commit and thread.
	storePublishes bool
	// Observer is told of checks, redactions and appends (metrics); set
	// it before the log is used. Nil: none.
	Observer Observer
}

// NewThreadLog returns a log over store that publishes to hub (nil: no
// publishing). A stored record that cannot be framed for the hub is logged
// to the hub's logger. With a hub and a store that hands over its group
// commits (runevents.GroupCommitter), the log registers with the store:
// make one such log per store, as a second would take the publishing of
// every append over from the first.
func NewThreadLog(store runevents.Store, validator *contracts.Validator, hub *live.Hub, limits ThreadLimits) *ThreadLog {
	if limits.MaxEventBytes <= 0 {
		limits.MaxEventBytes = DefaultMaxEventBytes
	}
	if limits.MaxBatchEvents <= 0 {
		limits.MaxBatchEvents = DefaultMaxBatchEvents
	}
	if limits.MaxBatchBytes <= 0 {
		limits.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if limits.MaxTraceContent <= 0 {
		limits.MaxTraceContent = runevents.DefaultMaxTraceContent
	}
	l := &ThreadLog{store: store, validator: validator, hub: hub, redactor: redact.New(redact.Options{}), limits: limits}
	if gc, ok := store.(runevents.GroupCommitter); ok && hub != nil {
		gc.OnGroupCommit(l.publishGroup)
		l.storePublishes = true
	}
	return l
}

// Limits returns the log's limits, defaults filled in.
func (l *ThreadLog) Limits() ThreadLimits { return l.limits }

// Append checks, redacts and appends a batch of one thread, every event
// stamped with userID as its owner ("" for internal writers), then
// publishes the stored records: itself, or, with a store that hands over
// its group commits (runevents.GroupCommitter), from the store's writer,
// with the rest of the commit, just after the store answered.
func (l *ThreadLog) Append(ctx context.Context, userID string, events []runevents.NewEvent) ([]runevents.Record, error) {
	return l.AppendWritable(ctx, userID, events, nil)
}

// AppendWritable is Append into a thread that writable (nil: any) lets
// userID write to; an error of writable is returned as it is, and nothing
// is stored. When the store checks a thread's owner inside the append
// (runevents.OwnedAppender) and userID is not empty, the batch is first
// appended on the condition that the thread's first row is userID's, and
// writable is called only when it is not (a thread's first append,
// another user's thread): an append to one's own thread then costs no
// read of its own. Otherwise writable is called before anything else.
func (l *ThreadLog) AppendWritable(ctx context.Context, userID string, events []runevents.NewEvent, writable func(context.Context) error) ([]runevents.Record, error) {
	owned, _ := l.store.(runevents.OwnedAppender)
	if userID == "" || writable == nil {
		owned = nil
	}
	if owned == nil && writable != nil {
		if err := writable(ctx); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	events, err := l.prepare(userID, events)
	if err != nil {
		return nil, err
	}
	stored, err := started(ctx)
	if err != nil {
		return nil, err
	}
	prepared := time.Now()
	var recs []runevents.Record
	if owned != nil {
		recs, err = owned.PutBatchOwned(stored, userID, events)
		if errors.Is(err, runevents.ErrNotFirstOwner) {
			// The store's time covers both writes and the check between.
			if err := writable(ctx); err != nil {
				return nil, err
			}
			owned = nil
		}
	}
	if owned == nil {
		recs, err = l.store.PutBatch(stored, events)
	}
	l.appended("thread_append", len(recs), start, prepared, err)
	if err != nil {
		return nil, err
	}
	if !l.storePublishes {
		l.publish(recs)
	}
	return recs, nil
}

// started checks that ctx has not ended and returns a context that keeps
// its values but not its cancellation: once an append is handed to the
// store it runs to its outcome, so that a write that commits is always
// published and answered, even when the caller has left meanwhile. The
// stores bound their own transactions.
func started(ctx context.Context) (context.Context, error) {
	if err := ctx.Err(); err != nil {
		return nil, runstream.Wrap(err, runstream.CodeUnavailable, "the append was cancelled before it started")
	}
	return context.WithoutCancel(ctx), nil
}

// AppendIdempotent is Append or AppendIfAbsent under an idempotency key:
// it checks and redacts a.Events like Append, stamps them with a.UserID,
// and appends them through the store's runevents.IdempotentAppender, which
// commits the rows and the response under the key together. It publishes
// what the call appended; a replay publishes nothing. A store without the
// capability refuses with CodeUnavailable rather than append without the
// guarantee (every backend of runstream has it).
func (l *ThreadLog) AppendIdempotent(ctx context.Context, a runevents.IdempotentAppend) (runevents.IdempotentResult, error) {
	store, ok := l.store.(runevents.IdempotentAppender)
	if !ok {
		return runevents.IdempotentResult{}, runstream.Errorf(runstream.CodeUnavailable, "this store does not support idempotent appends")
	}
	start := time.Now()
	events, err := l.prepare(a.UserID, a.Events)
	if err != nil {
		return runevents.IdempotentResult{}, err
	}
	if a.IfAbsent && len(events) != 1 {
		return runevents.IdempotentResult{}, runstream.Errorf(runstream.CodeValidationFailed, "the singleton write takes exactly one event, got %d", len(events))
	}
	ctx, err = started(ctx)
	if err != nil {
		return runevents.IdempotentResult{}, err
	}
	a.Events = events
	prepared := time.Now()
	res, err := store.AppendIdempotent(ctx, a)
	l.appended("thread_append_idempotent", len(res.Appended), start, prepared, err)
	switch {
	case err != nil:
		if outcome := idempotencyOutcome(err); outcome != "" {
			l.observer().Idempotency(outcome)
		}
		return runevents.IdempotentResult{}, err
	case res.Replayed:
		l.observer().Idempotency("replayed")
	default:
		l.observer().Idempotency("new")
	}
	l.publish(res.Appended)
	return res, nil
}

// LookupIdempotent returns the response stored under an idempotency key,
// or nil (runevents.IdempotentAppender).
func (l *ThreadLog) LookupIdempotent(ctx context.Context, userID, key string, requestHash []byte) (*runevents.IdempotentResponse, error) {
	store, ok := l.store.(runevents.IdempotentAppender)
	if !ok {
		return nil, runstream.Errorf(runstream.CodeUnavailable, "this store does not support idempotent appends")
	}
	start := time.Now()
	resp, err := store.LookupIdempotent(ctx, userID, key, requestHash)
	l.observer().Looked(time.Since(start), err)
	switch {
	case err != nil:
		if outcome := idempotencyOutcome(err); outcome != "" {
			l.observer().Idempotency(outcome)
		}
	case resp != nil:
		l.observer().Idempotency("replayed")
	}
	return resp, err
}

// AppendIfAbsent is the singleton write: it checks and redacts e like
// Append, then appends it unless its run already has a row of its type, in
// which case it returns that row and created=false and publishes nothing.
func (l *ThreadLog) AppendIfAbsent(ctx context.Context, userID string, e runevents.NewEvent) (runevents.Record, bool, error) {
	start := time.Now()
	events, err := l.prepare(userID, []runevents.NewEvent{e})
	if err != nil {
		return runevents.Record{}, false, err
	}
	ctx, err = started(ctx)
	if err != nil {
		return runevents.Record{}, false, err
	}
	prepared := time.Now()
	rec, created, err := l.store.PutIfAbsent(ctx, events[0])
	n := 0
	if created {
		n = 1
	}
	l.appended("thread_append_if_absent", n, start, prepared, err)
	if err != nil {
		return runevents.Record{}, false, err
	}
	if created {
		l.publish([]runevents.Record{rec})
	}
	return rec, created, nil
}

func (l *ThreadLog) observer() Observer { return observerOr(l.Observer) }

// appended reports a store call that started at prepared, of an append
// that started at start.
func (l *ThreadLog) appended(op string, events int, start, prepared time.Time, err error) {
	l.observer().Appended(KindThread, op, events, prepared.Sub(start), time.Since(prepared), err)
}

// prepare checks the batch and returns redacted copies of its events; the
// caller's are not modified. It reports the outcome to the observer.
func (l *ThreadLog) prepare(userID string, events []runevents.NewEvent) ([]runevents.NewEvent, error) {
	out, err := l.check(userID, events)
	l.observer().Checked(KindThread, len(events), err)
	return out, err
}

// check is prepare without the report.
func (l *ThreadLog) check(userID string, events []runevents.NewEvent) ([]runevents.NewEvent, error) {
	if len(events) == 0 {
		return nil, runstream.Errorf(runstream.CodeValidationFailed, "a batch holds at least one event")
	}
	if len(events) > l.limits.MaxBatchEvents {
		return nil, runstream.Errorf(runstream.CodePayloadTooLarge, "a batch holds at most %d events, got %d", l.limits.MaxBatchEvents, len(events)).
			WithDetail("limit", l.limits.MaxBatchEvents)
	}
	if err := l.checkSizes(events, ""); err != nil {
		return nil, err
	}

	var problems []contracts.Problem
	out := make([]runevents.NewEvent, len(events))
	for i, e := range events {
		problems = l.checkAndRedact(problems, "/events/"+strconv.Itoa(i), &e, events[0].ThreadID)
		e.UserID = userID
		out[i] = e
	}
	if err := problemsError(problems); err != nil {
		return nil, err
	}
	// Redaction markers may be longer than what they replace: what is
	// stored keeps to the limits too.
	if err := l.checkSizes(out, " once redacted"); err != nil {
		return nil, err
	}
	return out, nil
}

// checkAndRedact appends the problems of event e, found at path at, and
// fills its defaults (check); when it has none, it redacts e's content and
// metadata.
func (l *ThreadLog) checkAndRedact(problems []contracts.Problem, at string, e *runevents.NewEvent, threadID string) []contracts.Problem {
	before := len(problems)
	problems = l.checkEvent(problems, at, e, threadID)
	if len(problems) > before {
		return problems
	}
	var err error
	if e.Content, err = l.redactJSON(e.Content); err != nil {
		problems = append(problems, contracts.Problem{Path: at + "/content", Message: "not valid JSON"})
	}
	if e.Metadata, err = l.redactJSON(e.Metadata); err != nil {
		problems = append(problems, contracts.Problem{Path: at + "/metadata", Message: "not valid JSON"})
	}
	return problems
}

// problemsError is the CodeValidationFailed error listing problems in
// details.problems, named by the first; nil when there are none.
func problemsError(problems []contracts.Problem) error {
	if len(problems) == 0 {
		return nil
	}
	p := problems[0]
	return contracts.WithProblems(&runstream.Error{Code: runstream.CodeValidationFailed,
		Message: fmt.Sprintf("%s: %s", p.Path, p.Message)}, problems)
}

// checkSizes enforces the event and batch limits on the content and
// metadata of events; stage, when not empty, says which form was measured.
func (l *ThreadLog) checkSizes(events []runevents.NewEvent, stage string) error {
	total := 0
	for i, e := range events {
		if err := l.checkEventSize(i, e, stage); err != nil {
			return err
		}
		total += len(e.Content) + len(e.Metadata)
	}
	if total > l.limits.MaxBatchBytes {
		return runstream.Errorf(runstream.CodePayloadTooLarge, "the batch has %d bytes of content and metadata%s, the limit is %d", total, stage, l.limits.MaxBatchBytes).
			WithDetail("limit", l.limits.MaxBatchBytes)
	}
	return nil
}

// checkEventSize refuses event i of a batch when its content and metadata
// are above MaxEventBytes (stage says when: as sent, once redacted); a
// trace event counts what the store keeps of it (ThreadLimits).
func (l *ThreadLog) checkEventSize(i int, e runevents.NewEvent, stage string) error {
	size := len(e.Content) + len(e.Metadata)
	if category, ok := runevents.Lookup(e.EventType); ok && category == runevents.CategoryTrace {
		size = runevents.StoredTraceSize(e.Content, e.Metadata, l.limits.MaxTraceContent)
	}
	if size > l.limits.MaxEventBytes {
		return runstream.Errorf(runstream.CodePayloadTooLarge, "events[%d] has %d bytes of content and metadata%s, the limit is %d", i, size, stage, l.limits.MaxEventBytes).
			WithDetail("index", i).WithDetail("limit", l.limits.MaxEventBytes)
	}
	return nil
}

// checkEvent appends the problems of event e, found at path at, and fills
// its category and defaults.
func (l *ThreadLog) checkEvent(problems []contracts.Problem, at string, e *runevents.NewEvent, threadID string) []contracts.Problem {
	problem := func(path, msg string) { problems = append(problems, contracts.Problem{Path: at + path, Message: msg}) }
	if runevents.ValidateID("thread_id", e.ThreadID) != nil {
		problem("/thread_id", "must be 1-64 ASCII letters, digits, hyphens or underscores")
	} else if e.ThreadID != threadID {
		problem("/thread_id", "a batch belongs to one thread")
	}
	if runevents.ValidateID("run_id", e.RunID) != nil {
		problem("/run_id", "must be 1-64 ASCII letters, digits, hyphens or underscores")
	}
	if strings.ContainsFunc(string(e.EventType), runevents.IsControl) {
		problem("/event_type", "must not contain control characters")
		return problems
	}
	category, ok := runevents.Lookup(e.EventType)
	if !ok {
		problem("/event_type", fmt.Sprintf("unknown event type %s: not catalogued and not middleware:{tag} with a tag of 1 to %d characters",
			redact.Quote(string(e.EventType)), runevents.MaxMiddlewareTagLength))
		return problems
	}
	if e.Category == "" {
		e.Category = category
	} else if e.Category != category {
		problem("/category", fmt.Sprintf("must be %q for event type %s", category, e.EventType))
	}
	if len(e.Content) == 0 {
		e.Content = json.RawMessage(`""`)
	}
	if len(e.Metadata) == 0 {
		e.Metadata = json.RawMessage(`{}`)
	}
	if err := l.validator.ValidateRunEvent(string(e.EventType), e.Content, e.Metadata); err != nil {
		for _, p := range problemsOf(err) {
			problem(p.Path, p.Message)
		}
	}
	return problems
}

func problemsOf(err error) []contracts.Problem {
	var ve *contracts.ValidationError
	if errors.As(err, &ve) {
		return ve.Problems
	}
	return []contracts.Problem{{Message: "invalid"}}
}

func (l *ThreadLog) redactJSON(raw json.RawMessage) (json.RawMessage, error) {
	return redactJSON(l.redactor, l.observer(), KindThread, raw)
}

// publish hands the stored records to the hub under their thread's key
// (streams.ThreadStreamKey), each framed once; the followers of a view of
// the thread keep the rows it shows.
func (l *ThreadLog) publish(recs []runevents.Record) {
	if l.hub == nil || len(recs) == 0 {
		return
	}
	// A batch belongs to one thread (prepare); PutIfAbsent stores one row.
	key := streams.ThreadStreamKey(recs[0].ThreadID)
	if l.hub.Followed(key) == 0 {
		return // the followers that come later read the store, which has recs
	}
	events := make([]live.Event, 0, len(recs))
	for _, rec := range recs {
		ev, err := streams.ThreadFrame(rec)
		if err != nil {
			// A stored record always encodes; if one ever does not, it is
			// not published (the hub's poll meets the same error) and it is
			// logged.
			l.hub.Logger().Error("eventlog: cannot frame a stored thread event for live followers",
				"thread_id", rec.ThreadID, "run_id", rec.RunID, "seq", rec.Seq, "error", err)
			continue
		}
		events = append(events, ev)
	}
	l.hub.Publish(key, events)
}

// publishGroup publishes the records of one group commit of the store
// (runevents.GroupCommitter): each thread's records in one publication,
// so that its followers are woken once for the commit.
func (l *ThreadLog) publishGroup(recs []runevents.Record) {
	if len(recs) == 0 {
		return
	}
	first := recs[0].ThreadID
	mixed := slices.ContainsFunc(recs, func(r runevents.Record) bool { return r.ThreadID != first })
	if !mixed {
		l.publish(recs)
		return
	}
	// Each thread's records ascend by seq; keep that order.
	var threads []string
	byThread := map[string][]runevents.Record{}
	for _, r := range recs {
		if byThread[r.ThreadID] == nil {
			threads = append(threads, r.ThreadID)
		}
		byThread[r.ThreadID] = append(byThread[r.ThreadID], r)
	}
	for _, t := range threads {
		l.publish(byThread[t])
	}
}
