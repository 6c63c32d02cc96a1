package eventlog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/internal/jsonenc"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/redact"
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

// WorkflowStreamKey is the hub key of a workflow run's stream.
func WorkflowStreamKey(runID string) string { return "workflow:" + runID }

// CreateRun stores a run with its first events and publishes them.
func (l *WorkflowLog) CreateRun(ctx context.Context, r workflow.Run, events []workflow.NewEvent) (workflow.Run, []workflow.Envelope, error) {
	events, err := l.prepare(events)
	if err != nil {
		return workflow.Run{}, nil, err
	}
	if ctx, err = started(ctx); err != nil {
		return workflow.Run{}, nil, err
	}
	run, stored, err := l.store.CreateRun(ctx, r, events)
	if err != nil {
		return workflow.Run{}, nil, err
	}
	l.publish(run.ID, stored)
	return run, stored, nil
}

// Append validates, redacts and appends a batch, then publishes it.
func (l *WorkflowLog) Append(ctx context.Context, p workflow.AppendParams) ([]workflow.Envelope, error) {
	events, err := l.prepare(p.Events)
	if err != nil {
		return nil, err
	}
	p.Events = events
	if ctx, err = started(ctx); err != nil {
		return nil, err
	}
	stored, err := l.store.Append(ctx, p)
	if err != nil {
		return nil, err
	}
	l.publish(p.RunID, stored)
	return stored, nil
}

// Resume consumes a resume token and appends p.Events atomically, then
// publishes them.
func (l *WorkflowLog) Resume(ctx context.Context, p workflow.ResumeParams) ([]workflow.Envelope, error) {
	events, err := l.prepare(p.Events)
	if err != nil {
		return nil, err
	}
	p.Events = events
	if ctx, err = started(ctx); err != nil {
		return nil, err
	}
	stored, err := l.store.Resume(ctx, p)
	if err != nil {
		return nil, err
	}
	l.publish(p.RunID, stored)
	return stored, nil
}

// prepare validates each event's data against the contract, redacts it and
// stamps the time. It returns new events; the caller's are not modified.
func (l *WorkflowLog) prepare(events []workflow.NewEvent) ([]workflow.NewEvent, error) {
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
	if t == workflow.EventRunAwaitingInput {
		r = l.awaitingInput
	}
	out, _, err := r.JSON(data)
	return out, err
}

func (l *WorkflowLog) publish(runID string, stored []workflow.Envelope) {
	if l.hub == nil || len(stored) == 0 {
		return
	}
	events, err := WorkflowFrames(make([]live.Event, 0, len(stored)), stored)
	if err != nil {
		// A stored envelope always encodes; if one ever does not, the batch
		// is not published (followers read the store) and it is logged.
		l.hub.Logger().Error("eventlog: cannot frame a stored workflow event for live followers",
			"run_id", runID, "seq", stored[len(events)].Seq, "error", err)
		return
	}
	l.hub.Publish(WorkflowStreamKey(runID), events)
}

// WorkflowFrames appends the live events of envs to dst.
func WorkflowFrames(dst []live.Event, envs []workflow.Envelope) ([]live.Event, error) {
	for _, env := range envs {
		ev, err := WorkflowFrame(env)
		if err != nil {
			return dst, err
		}
		dst = append(dst, ev)
	}
	return dst, nil
}

// WorkflowFrame renders a stored envelope as a live event with its SSE
// frame: id = seq, event = type, data = the envelope on one line.
func WorkflowFrame(env workflow.Envelope) (live.Event, error) {
	frame, err := AppendWorkflowFrame(make([]byte, 0, 320+len(env.Data)), env)
	if err != nil {
		return live.Event{}, err
	}
	return live.Event{Seq: env.Seq, Frame: frame, Terminal: env.Event.Terminal()}, nil
}

// AppendWorkflowFrame appends the SSE frame of a stored envelope to dst. It
// writes the frame directly (the hot path of every replay): the id is a
// number, the event one of the protocol's names, and the data compact JSON,
// which it checks holds no line break.
func AppendWorkflowFrame(dst []byte, env workflow.Envelope) ([]byte, error) {
	if !env.Event.Known() {
		return dst, fmt.Errorf("frame seq %d: unknown event %q", env.Seq, env.Event)
	}
	start := len(dst)
	dst = append(dst, "id: "...)
	dst = strconv.AppendInt(dst, env.Seq, 10)
	dst = append(dst, "\nevent: "...)
	dst = append(dst, env.Event...)
	dst = append(dst, "\ndata: "...)
	data := len(dst)
	// Stored data is compact (prepare compacts it); a line break, the one
	// thing that would break the frame, is checked below.
	dst = env.AppendStoredJSON(dst)
	if bytes.IndexByte(dst[data:], '\n') >= 0 || bytes.IndexByte(dst[data:], '\r') >= 0 {
		return dst[:start], fmt.Errorf("frame seq %d: data holds a line break", env.Seq)
	}
	return append(dst, "\n\n"...), nil
}

// validationError turns a contract violation into CodeInvalidArgument with
// the failing paths in details.
func validationError(err error, what string) error {
	var ve *contracts.ValidationError
	if errors.As(err, &ve) {
		return (&runstream.Error{Code: runstream.CodeInvalidArgument, Message: what + ": " + ve.Error(), Err: err}).
			WithDetail("problems", ve.Problems)
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
