package eventlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/internal/jsonenc"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/redact"
	"github.com/runstream/runstream/streams"
	"github.com/runstream/runstream/workflow"
)

// WorkflowLog appends workflow events: validate, redact, append, publish.
// It is safe for concurrent use.
type WorkflowLog struct {
	store     workflow.Store
	validator *contracts.Validator
	hub       *live.Hub
	now       func() time.Time
	// redactor cleans every event's data; awaitingInput cleans the data of
	// run.awaiting_input, keeping its resume token (the one secret that must
	// stay in its event) and its form schema (a JSON Schema whose property
	// names, such as "password", are not secrets).
	redactor, awaitingInput *redact.Redactor
	// MaxEventBytes bounds the data of one event (workflow.EventLimit);
	// set it before the log is used.
	MaxEventBytes int
	// Observer is told of checks, redactions, appends and the statuses
	// runs enter (metrics); set it before the log is used. Nil: none.
	Observer Observer
}

// NewWorkflowLog returns a log over store that publishes to hub. now
// defaults to time.Now. A stored event that cannot be framed for the hub
// is logged to the hub's logger.
func NewWorkflowLog(store workflow.Store, validator *contracts.Validator, hub *live.Hub, now func() time.Time) *WorkflowLog {
	if now == nil {
		now = time.Now
	}
	return &WorkflowLog{
		store: store, validator: validator, hub: hub, now: now,
		redactor:      redact.New(redact.Options{}),
		awaitingInput: redact.New(redact.Options{KeepKeys: []string{"resumeToken", "formSchema"}}),
	}
}

// CreateRun stores a run with its first events and publishes them.
func (l *WorkflowLog) CreateRun(ctx context.Context, r workflow.Run, events []workflow.NewEvent) (workflow.Run, []workflow.Envelope, error) {
	start := time.Now()
	events, err := l.prepare(events)
	if err != nil {
		return workflow.Run{}, nil, err
	}
	if ctx, err = started(ctx); err != nil {
		return workflow.Run{}, nil, err
	}
	prepared := time.Now()
	run, stored, err := l.store.CreateRun(ctx, r, events)
	l.appended("workflow_create_run", stored, start, prepared, err)
	if err != nil {
		return workflow.Run{}, nil, err
	}
	l.publish(run.ID, stored)
	return run, stored, nil
}

// Append validates, redacts and appends a batch, then publishes it.
func (l *WorkflowLog) Append(ctx context.Context, p workflow.AppendParams) ([]workflow.Envelope, error) {
	start := time.Now()
	events, err := l.prepare(p.Events)
	if err != nil {
		return nil, err
	}
	p.Events = events
	if ctx, err = started(ctx); err != nil {
		return nil, err
	}
	prepared := time.Now()
	stored, err := l.store.Append(ctx, p)
	l.appended("workflow_append", stored, start, prepared, err)
	if err != nil {
		return nil, err
	}
	l.publish(p.RunID, stored)
	return stored, nil
}

// Resume consumes a resume token and appends p.Events atomically, then
// publishes them.
func (l *WorkflowLog) Resume(ctx context.Context, p workflow.ResumeParams) ([]workflow.Envelope, error) {
	start := time.Now()
	events, err := l.prepare(p.Events)
	if err != nil {
		return nil, err
	}
	p.Events = events
	if ctx, err = started(ctx); err != nil {
		return nil, err
	}
	prepared := time.Now()
	stored, err := l.store.Resume(ctx, p)
	l.appended("workflow_resume", stored, start, prepared, err)
	if err != nil {
		return nil, err
	}
	l.publish(p.RunID, stored)
	return stored, nil
}

func (l *WorkflowLog) observer() Observer { return observerOr(l.Observer) }

// appended reports a store call that started at prepared, of an append
// that started at start, and the statuses its events moved the run to.
func (l *WorkflowLog) appended(op string, stored []workflow.Envelope, start, prepared time.Time, err error) {
	o := l.observer()
	o.Appended(KindWorkflow, op, len(stored), prepared.Sub(start), time.Since(prepared), err)
	for _, e := range stored {
		if status, ok := workflow.StatusAfter(e.Event); ok {
			o.RunEntered(string(status))
		}
	}
}

// prepare validates each event's data against the contract, redacts it and
// stamps the time. It returns new events; the caller's are not modified.
// It reports the outcome to the observer.
func (l *WorkflowLog) prepare(events []workflow.NewEvent) ([]workflow.NewEvent, error) {
	out, err := l.check(events)
	l.observer().Checked(KindWorkflow, len(events), err)
	return out, err
}

// check is prepare without the report.
func (l *WorkflowLog) check(events []workflow.NewEvent) ([]workflow.NewEvent, error) {
	if err := workflow.CheckEvents(events); err != nil {
		return nil, err
	}
	now := l.now().UTC()
	out := make([]workflow.NewEvent, len(events))
	for i, e := range events {
		data := e.Data
		if len(data) == 0 {
			data = json.RawMessage("{}")
		}
		if err := l.validator.ValidateWorkflowData(string(e.Event), data); err != nil {
			return nil, validationError(err, "events["+strconv.Itoa(i)+"] "+string(e.Event))
		}
		redacted, err := l.redactData(e.Event, data)
		if err != nil {
			return nil, runstream.Wrap(err, runstream.CodeInvalidArgument, "events[%d]: redact data", i)
		}
		if e.Data, err = compactJSON(redacted); err != nil {
			return nil, runstream.Wrap(err, runstream.CodeInvalidArgument, "events[%d]: data", i)
		}
		if err := workflow.CheckEventSize(i, e, l.MaxEventBytes); err != nil {
			return nil, err
		}
		if e.Timestamp.IsZero() {
			e.Timestamp = now
		}
		out[i] = e
	}
	return out, nil
}

// redactData redacts an event's data.
func (l *WorkflowLog) redactData(t workflow.EventType, data json.RawMessage) (json.RawMessage, error) {
	r := l.redactor
	switch t {
	case workflow.EventRunAwaitingInput:
		r = l.awaitingInput
	case workflow.EventNodeOutputDelta:
		if out, ok := l.redactDelta(data); ok {
			return out, nil
		}
	}
	return redactJSON(r, l.observer(), KindWorkflow, data)
}

// redactDelta redacts the data of a node.output.delta, {channel, delta}:
// its text continues the node's text before it, so it is redacted as a
// Continuation (the engine redacted it with that text first). ok is false
// for data of another shape, which the caller redacts as any data.
func (l *WorkflowLog) redactDelta(data json.RawMessage) (out json.RawMessage, ok bool) {
	var d workflow.OutputDelta
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if dec.Decode(&d) != nil || dec.More() {
		return nil, false
	}
	channel, c1 := l.redactor.String(d.Channel)
	delta, c2 := l.redactor.Continuation(d.Delta)
	// Encoded afresh even when nothing changed: what is stored is what was
	// redacted (a member given twice is stored once, as decoded).
	out, err := json.Marshal(workflow.OutputDelta{Channel: channel, Delta: delta})
	if err != nil {
		return nil, false
	}
	if c1 || c2 {
		observeRedaction(l.observer(), KindWorkflow, d.Channel+d.Delta, channel+delta)
	}
	return out, true
}

func (l *WorkflowLog) publish(runID string, stored []workflow.Envelope) {
	if l.hub == nil || len(stored) == 0 {
		return
	}
	events, err := streams.WorkflowFrames(make([]live.Event, 0, len(stored)), stored)
	if err != nil {
		// A stored envelope always encodes; if one ever does not, the batch
		// is not published (followers read the store) and it is logged.
		l.hub.Logger().Error("eventlog: cannot frame a stored workflow event for live followers",
			"run_id", runID, "seq", stored[len(events)].Seq, "error", err)
		return
	}
	l.hub.Publish(streams.WorkflowStreamKey(runID), events)
}

// validationError turns a contract violation into CodeInvalidArgument with
// the failing paths in details.
func validationError(err error, what string) error {
	var ve *contracts.ValidationError
	if errors.As(err, &ve) {
		return contracts.WithProblems(&runstream.Error{Code: runstream.CodeInvalidArgument, Message: what + ": " + ve.Error(), Err: err}, ve.Problems)
	}
	return runstream.Wrap(err, runstream.CodeInvalidArgument, "%s: invalid", what)
}

// compactJSON returns raw compact: as it is when it already is, else
// re-encoded. Stored event data is compact, so replays copy it unchecked.
func compactJSON(raw []byte) ([]byte, error) {
	if jsonenc.IsCompact(raw) {
		return raw, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
