package journal

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/threadsvc"
)

// Sink is where the producers write: the thread's event log and its run
// rows, in process or over HTTP. Implementations are safe for concurrent
// use.
type Sink interface {
	// Append appends a batch of events of one thread, all or nothing, in
	// order. An error may mean the batch was not written; the journal writes
	// it again later, so a sink that can commit and still fail should make
	// the retry idempotent (the remote producer does, with an
	// Idempotency-Key).
	Append(ctx context.Context, events []runevents.NewEvent) error
	// AppendIfAbsent appends e unless the run already holds an event of
	// its type, and reports whether it did.
	AppendIfAbsent(ctx context.Context, e runevents.NewEvent) (created bool, err error)
	// PutRun creates or replaces the run row's mutable fields.
	PutRun(ctx context.Context, run runevents.ThreadRun) error
}

// ServiceSink is the in-process Sink over a thread service: its appends go
// through the service's event log (the append choke point), as User.
type ServiceSink struct {
	Service *threadsvc.Service
	// User owns the rows; empty for an internal writer.
	User string
}

var _ Sink = ServiceSink{}

// Append implements Sink.
func (s ServiceSink) Append(ctx context.Context, events []runevents.NewEvent) error {
	if len(events) == 0 {
		return nil
	}
	_, err := s.Service.Append(ctx, s.User, events[0].ThreadID, events)
	return err
}

// AppendIfAbsent implements Sink.
func (s ServiceSink) AppendIfAbsent(ctx context.Context, e runevents.NewEvent) (bool, error) {
	_, created, err := s.Service.AppendIfAbsent(ctx, s.User, e.ThreadID, e)
	return created, err
}

// PutRun implements Sink.
func (s ServiceSink) PutRun(ctx context.Context, run runevents.ThreadRun) error {
	_, err := s.Service.PutRun(ctx, RunParams(run, s.User))
	return err
}

// RunParams returns the PUT body of run for user: status, model name,
// operation kind, metadata, usage and DeerFlow's assistant_id, kwargs,
// multitask_strategy, message_count and stop_reason. Empty members are
// left out (nil), so the service keeps its defaults.
func RunParams(run runevents.ThreadRun, user string) threadsvc.RunParams {
	return threadsvc.RunParams{ThreadID: run.ThreadID, RunID: run.RunID, User: user, Status: run.Status,
		ModelName: nonEmpty(run.ModelName), OperationKind: nonEmpty(run.OperationKind), Metadata: run.Metadata, Usage: run.Usage,
		AssistantID: nonEmpty(run.AssistantID), Kwargs: run.Kwargs, MultitaskStrategy: nonEmpty(run.MultitaskStrategy),
		MessageCount: run.MessageCount, StopReason: nonEmpty(run.StopReason)}
}

// nonEmpty is &s, or nil when s is empty.
func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// RunRow returns base with the summary written into it: the usage, the
// message count (the row's message_count), and the metadata keys
// first_human_message and last_ai_message (the run row has no columns of
// its own for them), merged over base's metadata. The metadata keeps a
// copy of message_count too, for the readers of rows written before the
// row had the field.
func (s Summary) RunRow(base runevents.ThreadRun) runevents.ThreadRun {
	meta := map[string]any{}
	if len(base.Metadata) > 0 {
		_ = json.Unmarshal(base.Metadata, &meta)
		if meta == nil {
			meta = map[string]any{}
		}
	}
	meta["message_count"] = s.MessageCount
	for key, v := range map[string]string{"first_human_message": s.FirstHumanMessage, "last_ai_message": s.LastAIMessage} {
		if v == "" {
			meta[key] = nil
		} else {
			meta[key] = v
		}
	}
	base.Metadata, _ = json.Marshal(meta)
	base.Usage = s.Usage()
	base.MessageCount = s.MessageCount
	return base
}

// RunRowProgress returns an Options.Progress that writes each snapshot to
// the run row through sink with status running. A row that has finished
// meanwhile (a cancel ended it) refuses the write with CONFLICT, which
// is no failure: as the original's reporter, progress updates the row
// only while it is running.
func RunRowProgress(sink Sink, base runevents.ThreadRun) func(context.Context, Summary) error {
	return func(ctx context.Context, s Summary) error {
		row := s.RunRow(base)
		row.Status = runevents.RunRunning
		err := sink.PutRun(ctx, row)
		if runstream.ErrorCodeOf(err) == runstream.CodeConflict {
			return nil
		}
		return err
	}
}

// Complete writes the run row with status and the journal's summary
// through the sink. It does not flush events: call Flush first. It waits
// for a progress report in flight, cancels a delayed one, and schedules no
// more, so no progress report overwrites the final row. A run whose model
// answered with an error fallback should be completed with status error.
func (j *Journal) Complete(ctx context.Context, base runevents.ThreadRun, status runevents.RunStatus) error {
	j.mu.Lock()
	j.completed = true
	j.mu.Unlock()
	if err := j.settleProgress(ctx); err != nil {
		return fmt.Errorf("journal: complete run: %w", err)
	}
	row := j.Summary().RunRow(base)
	row.ThreadID, row.RunID, row.Status = j.opts.ThreadID, j.opts.RunID, status
	if err := j.sink.PutRun(ctx, row); err != nil {
		return fmt.Errorf("journal: complete run: %w", err)
	}
	return nil
}

// Delivery is the content of a run.delivery receipt: the artifact paths
// tools presented, in first-seen order, and by tool (paths whose tool is
// not known appear in Paths only).
type Delivery struct {
	Presented int                 `json:"presented"`
	Paths     []string            `json:"paths"`
	ByTool    map[string][]string `json:"by_tool"`
}

// Delivery returns the receipt content of the artifacts tracked so far.
func (j *Journal) Delivery() Delivery {
	j.mu.Lock()
	defer j.mu.Unlock()
	d := Delivery{Presented: len(j.artifacts), Paths: []string{}, ByTool: map[string][]string{}}
	for _, a := range j.artifacts {
		d.Paths = append(d.Paths, a.path)
		if a.tool != "" {
			d.ByTool[a.tool] = append(d.ByTool[a.tool], a.path)
		}
	}
	return d
}

// deliveryDelays are the waits before the second and third attempts.
var deliveryDelays = []time.Duration{100 * time.Millisecond, 500 * time.Millisecond}

// RecordDelivery writes the run's one run.delivery receipt with content
// (Delivery's, plus whatever keys the caller verified) through
// AppendIfAbsent, trying three times (after 100ms and 500ms). It reports
// whether this call created the receipt; an existing receipt is kept.
func (j *Journal) RecordDelivery(ctx context.Context, content any) (bool, error) {
	raw, err := json.Marshal(content)
	if err != nil {
		return false, fmt.Errorf("journal: delivery content: %w", err)
	}
	e := runevents.NewEvent{ThreadID: j.opts.ThreadID, RunID: j.opts.RunID, EventType: runevents.EventRunDelivery,
		Category: runevents.CategoryOutputs, Content: raw, Metadata: json.RawMessage(`{}`), CreatedAt: time.Now().UTC()}
	for attempt := 0; ; attempt++ {
		created, err := j.sink.AppendIfAbsent(ctx, e)
		if err == nil {
			return created, nil
		}
		if attempt == len(deliveryDelays) {
			return false, fmt.Errorf("journal: delivery receipt: %w", err)
		}
		j.log.Warn("journal: delivery receipt failed; retrying", "attempt", attempt+1, "err", err)
		t := time.NewTimer(deliveryDelays[attempt])
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false, fmt.Errorf("journal: delivery receipt: %w", ctx.Err())
		}
	}
}
