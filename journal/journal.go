package journal

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/runstream/runstream/runevents"
)

// Defaults of Options.
const (
	DefaultFlushThreshold   = 20
	DefaultProgressInterval = 5 * time.Second
	DefaultFlushTimeout     = 30 * time.Second
)

// Callers of model calls (reference §3.2).
const (
	CallerLeadAgent        = "lead_agent"
	callerSubagentPrefix   = runevents.SubagentCallerPrefix
	callerMiddlewarePrefix = runevents.MiddlewareCallerPrefix
)

// maxSummaryText bounds FirstHumanMessage, LastAIMessage and
// ErrorFallback, in characters.
const maxSummaryText = 2000

// Options configure a Journal. ThreadID and RunID are required.
type Options struct {
	ThreadID string
	RunID    string
	// FlushThreshold is the number of buffered events that starts a
	// background flush; it is also the chunk size of Flush. Defaults to 20.
	FlushThreshold int
	// DisableTokenUsage turns token accounting off: every counter of the
	// Summary but the message summary stays zero.
	DisableTokenUsage bool
	// Progress, when set, receives a Summary after token usage was counted,
	// no more often than ProgressInterval (see the package doc). It runs on
	// a goroutine of its own; its error is logged.
	Progress func(ctx context.Context, s Summary) error
	// ProgressInterval defaults to 5s; a negative value means 0.
	ProgressInterval time.Duration
	// FlushTimeout bounds each background write (flushes and progress
	// reports). Defaults to 30s.
	FlushTimeout time.Duration
	// Logger receives warnings (failed background flushes, skipped
	// callback data). Defaults to slog.Default().
	Logger *slog.Logger
}

// Journal turns the callbacks of one agent run into run events and token
// accounting. Create it with New; it is safe for concurrent use. Its
// callback methods never block on the sink: events are buffered and written
// by background flushes, one at a time, in order.
type Journal struct {
	sink Sink
	opts Options
	log  *slog.Logger

	mu sync.Mutex
	// buffer holds the events not yet written, oldest first.
	buffer []runevents.NewEvent
	// writing is true while a background or final flush writes; idle is
	// closed when it ends.
	writing bool
	idle    chan struct{}
	wg      sync.WaitGroup

	starts          map[string]time.Time // model call id → start
	seenCalls       map[string]bool      // call ids that have an index
	callIndex       int64
	ended           map[string]bool // call ids whose messages were recorded
	counted         map[string]bool // call ids whose usage was counted
	external        map[string]bool // external usage source run ids
	toolNames       map[string]string
	persisted       map[string]bool // tool message identities recorded
	memoryDone      bool
	progressStopped bool
	completed       bool // Complete was called: no more progress reports
	human           bool // the run's human input was recorded
	artifacts       []artifact
	sum             Summary
	progress        progressState
}

type artifact struct{ path, tool string }

// New returns the journal of one run, writing through sink.
func New(sink Sink, opts Options) (*Journal, error) {
	if err := runevents.ValidateID("thread_id", opts.ThreadID); err != nil {
		return nil, err
	}
	if err := runevents.ValidateID("run_id", opts.RunID); err != nil {
		return nil, err
	}
	if opts.FlushThreshold <= 0 {
		opts.FlushThreshold = DefaultFlushThreshold
	}
	if opts.ProgressInterval == 0 {
		opts.ProgressInterval = DefaultProgressInterval
	} else if opts.ProgressInterval < 0 {
		opts.ProgressInterval = 0
	}
	if opts.FlushTimeout <= 0 {
		opts.FlushTimeout = DefaultFlushTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Journal{
		sink: sink, opts: opts, log: log.With("thread_id", opts.ThreadID, "run_id", opts.RunID),
		starts: map[string]time.Time{}, seenCalls: map[string]bool{}, ended: map[string]bool{},
		counted: map[string]bool{}, external: map[string]bool{}, toolNames: map[string]string{},
		persisted: map[string]bool{},
		sum:       Summary{ByModel: map[string]ModelTokens{}},
	}, nil
}

// CallerOf returns the caller a model call's tags attribute it to: the
// first tag that is "lead_agent" or starts with "subagent:" or
// "middleware:"; "lead_agent" when none does.
func CallerOf(tags []string) string {
	for _, t := range tags {
		if t == CallerLeadAgent || strings.HasPrefix(t, callerSubagentPrefix) || strings.HasPrefix(t, callerMiddlewarePrefix) {
			return t
		}
	}
	return CallerLeadAgent
}

// add buffers one event (j.mu held) and reports whether the threshold is
// reached.
func (j *Journal) add(t runevents.EventType, content, metadata any) bool {
	c, err := json.Marshal(content)
	if err != nil {
		j.log.Warn("journal: event content not encodable; dropped", "event_type", t, "err", err)
		return false
	}
	if metadata == nil {
		metadata = map[string]any{}
	}
	m, err := json.Marshal(metadata)
	if err != nil {
		j.log.Warn("journal: event metadata not encodable; dropped", "event_type", t, "err", err)
		return false
	}
	cat, _ := runevents.Lookup(t)
	if strings.HasPrefix(string(t), runevents.MiddlewarePrefix) {
		cat = runevents.MiddlewareCategory
	}
	j.buffer = append(j.buffer, runevents.NewEvent{ThreadID: j.opts.ThreadID, RunID: j.opts.RunID,
		EventType: t, Category: cat, Content: c, Metadata: m, CreatedAt: time.Now().UTC()})
	return len(j.buffer) >= j.opts.FlushThreshold
}

// kick starts a background flush of the whole buffer unless one is
// writing or the buffer is empty (j.mu held).
func (j *Journal) kick() {
	if j.writing || len(j.buffer) == 0 {
		return
	}
	batch := j.buffer
	j.buffer = nil
	j.writing = true
	j.idle = make(chan struct{})
	j.wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), j.opts.FlushTimeout)
		err := j.sink.Append(ctx, batch)
		cancel()
		j.mu.Lock()
		if err != nil {
			j.log.Warn("journal: background flush failed; events kept for the next flush", "events", len(batch), "err", err)
			j.buffer = append(batch, j.buffer...)
		}
		j.writing = false
		close(j.idle)
		j.mu.Unlock()
	})
}

// emit buffers events under j.mu and starts a background flush when the
// threshold is reached or flush is true.
func (j *Journal) emitLocked(t runevents.EventType, content, metadata any) {
	if j.add(t, content, metadata) {
		j.kick()
	}
}

// Flush writes every buffered event, in order, in chunks of
// FlushThreshold, after waiting for a background flush in flight and for a
// progress report in flight; a pending delayed progress report is
// cancelled. On the first failing chunk it puts the chunk back at the front
// of the buffer and returns the error: nothing is lost, and a later Flush
// retries. It returns ctx's error if ctx ends first.
func (j *Journal) Flush(ctx context.Context) error {
	if err := j.settleProgress(ctx); err != nil {
		return err
	}
	for {
		j.mu.Lock()
		if j.writing {
			idle := j.idle
			j.mu.Unlock()
			select {
			case <-idle:
				continue
			case <-ctx.Done():
				return fmt.Errorf("journal flush: %w", ctx.Err())
			}
		}
		if len(j.buffer) == 0 {
			j.mu.Unlock()
			return nil
		}
		n := min(len(j.buffer), j.opts.FlushThreshold)
		chunk := j.buffer[:n:n]
		j.buffer = j.buffer[n:]
		j.writing = true
		j.idle = make(chan struct{})
		j.mu.Unlock()

		err := j.sink.Append(ctx, chunk)

		j.mu.Lock()
		if err != nil {
			j.buffer = append(chunk, j.buffer...)
		}
		j.writing = false
		close(j.idle)
		j.mu.Unlock()
		if err != nil {
			return fmt.Errorf("journal flush: %w", err)
		}
	}
}

// Pending returns the number of buffered events not yet written.
func (j *Journal) Pending() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.buffer)
}

// Wait waits for the background flushes and progress reports started so
// far. Tests use it; an agent calls Flush.
func (j *Journal) Wait() { j.wg.Wait() }

// ChainStart records the start of a chain. Only a root chain (ParentID
// empty) writes run.start, with content {chain: Name, or "unknown"} and
// metadata {caller, ...Metadata}: Metadata is merged after caller and may
// override it.
type ChainStart struct {
	ParentID string
	Name     string
	Tags     []string
	Metadata map[string]any
}

// ChainStart handles a chain start callback.
func (j *Journal) ChainStart(ctx context.Context, c ChainStart) {
	if c.ParentID != "" {
		return
	}
	name := c.Name
	if name == "" {
		name = "unknown"
	}
	meta := map[string]any{"caller": CallerOf(c.Tags)}
	maps.Copy(meta, c.Metadata)
	j.mu.Lock()
	defer j.mu.Unlock()
	j.emitLocked(runevents.EventRunStart, map[string]any{"chain": name}, meta)
}

// ChainEnd is the end of a chain. Outputs is the chain's output (any JSON
// value); when it is an object with a "messages" list, a root chain end
// reconciles the final tool messages first.
type ChainEnd struct {
	ParentID string
	Outputs  any
}

// ChainEnd handles a chain end callback: for a root chain it reconciles the
// clarification tool messages of Outputs that no tool end recorded
// (reference §3.6), writes run.end (content Outputs, metadata
// {status:"success"}) and starts a background flush.
func (j *Journal) ChainEnd(ctx context.Context, c ChainEnd) {
	if c.ParentID != "" {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, m := range outputMessages(c.Outputs) {
		j.reconcileLocked(m)
	}
	j.add(runevents.EventRunEnd, c.Outputs, map[string]any{"status": "success"})
	j.kick()
}

// outputMessages returns the messages of an output object's "messages"
// list, decoding them from their JSON form when needed.
func outputMessages(outputs any) []Message {
	switch o := outputs.(type) {
	case map[string]any:
		raw, err := json.Marshal(o["messages"])
		if err != nil {
			return nil
		}
		var ms []Message
		if json.Unmarshal(raw, &ms) != nil {
			return nil
		}
		return ms
	case interface{ OutputMessages() []Message }:
		return o.OutputMessages()
	}
	raw, err := json.Marshal(outputs)
	if err != nil {
		return nil
	}
	var o struct {
		Messages []Message `json:"messages"`
	}
	if json.Unmarshal(raw, &o) != nil {
		return nil
	}
	return o.Messages
}

func (j *Journal) reconcileLocked(m Message) {
	if m.Type != "tool" || m.hidden() || m.ToolCallID == "" {
		return
	}
	requested, ok := j.toolNames[m.ToolCallID]
	if !ok {
		return
	}
	if m.Name != "ask_clarification" && requested != "ask_clarification" {
		return
	}
	if j.persisted[toolIdentity(m)] {
		return
	}
	j.recordToolLocked(m)
}

func toolIdentity(m Message) string {
	if m.ToolCallID != "" {
		return "tool:" + m.ToolCallID
	}
	if m.ID != "" {
		return "message:" + m.ID
	}
	return ""
}

func (j *Journal) recordToolLocked(m Message) {
	if id := toolIdentity(m); id != "" {
		j.persisted[id] = true
	}
	j.sum.MessageCount++
	j.emitLocked(runevents.EventLLMToolResult, m, nil)
}

// ChainError handles a chain error callback: every chain error, root or
// not, writes run.error (content the error text, metadata {error_type})
// and starts a background flush. ErrorType defaults to the Go type of Err.
type ChainError struct {
	ParentID  string
	Err       error
	ErrorType string
}

// ChainError handles a chain error callback.
func (j *Journal) ChainError(ctx context.Context, c ChainError) {
	typ := c.ErrorType
	if typ == "" {
		typ = fmt.Sprintf("%T", c.Err)
	}
	text := ""
	if c.Err != nil {
		text = c.Err.Error()
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.add(runevents.EventRunError, text, map[string]any{"error_type": typ})
	j.kick()
}

// ChatModelStart is the start of a chat model call: its call id, its tags
// and its prompt, a list of message batches.
type ChatModelStart struct {
	CallID  string
	Tags    []string
	Prompts [][]Message
}

// ChatModelStart remembers the call's start and gives it the next
// llm_call_index; for a lead-agent call it records the run's human input
// once (reference §3.4): llm.human.input with the UI copy of the latest
// qualifying human message of the prompt.
func (j *Journal) ChatModelStart(ctx context.Context, c ChatModelStart) {
	caller := CallerOf(c.Tags)
	j.mu.Lock()
	defer j.mu.Unlock()
	j.starts[c.CallID] = time.Now()
	j.callIndex++
	j.seenCalls[c.CallID] = true
	if caller != CallerLeadAgent || j.human {
		return
	}
	m, ok := pickHumanInput(c.Prompts)
	if !ok {
		return
	}
	ui := uiCopy(m)
	j.human = true
	if text := truncateRunes(ui.Text(), maxSummaryText); text != "" {
		j.sum.FirstHumanMessage = text
	}
	j.sum.MessageCount++
	j.emitLocked(runevents.EventLLMHumanInput, ui, map[string]any{"caller": CallerLeadAgent})
}

// LLMStart remembers the start of a plain (non-chat) model call; it takes
// no llm_call_index.
func (j *Journal) LLMStart(ctx context.Context, callID string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.starts[callID] = time.Now()
}

// LLMEnd is the end of a model call: its call id, tags and generated
// messages (a nil entry, a generation without a message, is skipped).
type LLMEnd struct {
	CallID      string
	Tags        []string
	Generations []*Message
}

// LLMEnd records each generated message as llm.ai.response with metadata
// {caller, usage, latency_ms, llm_call_index} (reference §3.5) and counts
// its usage once per call id.
//
// Unlike the original, a repeated end for a call id that already recorded
// its messages writes no further rows (the original duplicates them); its
// usage still counts when the earlier end reported none.
func (j *Journal) LLMEnd(ctx context.Context, e LLMEnd) {
	caller := CallerOf(e.Tags)
	j.mu.Lock()
	defer j.mu.Unlock()
	repeated := j.ended[e.CallID]
	for _, g := range e.Generations {
		if g == nil {
			j.log.Warn("journal: generation without a message skipped", "call_id", e.CallID)
			continue
		}
		m := *g
		if m.Type == "" {
			m.Type = "ai"
		}
		if m.Type != "ai" {
			j.log.Warn("journal: generated message is not an AI message; skipped", "call_id", e.CallID, "type", m.Type)
			continue
		}
		if caller == CallerLeadAgent {
			for _, tc := range m.ToolCalls {
				if tc.ID != "" {
					j.toolNames[tc.ID] = tc.Name
				}
			}
		}
		var latency any
		if start, ok := j.starts[e.CallID]; ok {
			latency = time.Since(start).Milliseconds()
			delete(j.starts, e.CallID)
		}
		usage := any(map[string]any{})
		if m.UsageMetadata != nil {
			usage = m.UsageMetadata
		}
		j.noteFallbackLocked(m)
		if !j.seenCalls[e.CallID] {
			j.callIndex++
			j.seenCalls[e.CallID] = true
		}
		if !repeated {
			j.emitLocked(runevents.EventLLMAIResponse, m, map[string]any{
				"caller": caller, "usage": usage, "latency_ms": latency, "llm_call_index": j.callIndex})
			if !j.ended[e.CallID] {
				j.ended[e.CallID] = true
				j.sum.MessageCount++
			}
			if caller == CallerLeadAgent {
				if text := strings.TrimSpace(m.Text()); text != "" {
					j.sum.LastAIMessage = truncateRunes(text, maxSummaryText)
				}
			}
		}
		j.countUsageLocked(e.CallID, caller, m)
	}
}

// noteFallbackLocked flags a run whose model answered with an error
// fallback message (additional_kwargs.deerflow_error_fallback truthy, the
// key DeerFlow's model wrapper sets).
func (j *Journal) noteFallbackLocked(m Message) {
	v := m.kwarg("deerflow_error_fallback")
	if v == nil || v == false || v == "" || v == 0.0 {
		return
	}
	msg := ""
	for _, key := range []string{"error_detail", "error_reason"} {
		if s, ok := m.kwarg(key).(string); ok && strings.TrimSpace(s) != "" {
			msg = strings.TrimSpace(s)
			break
		}
	}
	if msg == "" {
		msg = m.Text()
	}
	j.sum.ErrorFallback = truncateRunes(msg, maxSummaryText)
	if j.sum.ErrorFallback == "" {
		j.sum.ErrorFallback = "model error fallback"
	}
}

// LLMError forgets the call's start and records llm.error with the error
// text.
func (j *Journal) LLMError(ctx context.Context, callID string, err error) {
	text := ""
	if err != nil {
		text = err.Error()
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.starts, callID)
	j.emitLocked(runevents.EventLLMError, text, nil)
}

// ToolEnd is the output of a tool: either a tool message, or a state
// update carrying messages and artifact paths.
type ToolEnd struct {
	Message *Message
	Update  *StateUpdate
}

// StateUpdate is a tool's command updating the agent state.
type StateUpdate struct {
	Messages  []Message
	Artifacts []string
}

// ToolEnd records a tool message, or each message of a state update, as
// llm.tool.result, and tracks the update's artifacts for the delivery
// receipt (reference §3.7). A ToolEnd with neither is logged.
func (j *Journal) ToolEnd(ctx context.Context, t ToolEnd) {
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case t.Message != nil:
		j.recordToolLocked(*t.Message)
	case t.Update != nil:
		for _, m := range t.Update.Messages {
			j.recordToolLocked(m)
		}
		j.trackArtifactsLocked(t.Update)
	default:
		j.log.Warn("journal: tool end without a message or state update")
	}
}

func (j *Journal) trackArtifactsLocked(u *StateUpdate) {
	if len(u.Artifacts) == 0 {
		return
	}
	tool := ""
	names := map[string]bool{}
	for _, m := range u.Messages {
		if name, ok := j.toolNames[m.ToolCallID]; ok && m.ToolCallID != "" {
			if m.Name != "" {
				name = m.Name
			}
			names[name] = true
			tool = name
		}
	}
	if len(names) != 1 {
		tool = ""
	}
	for _, p := range u.Artifacts {
		if p == "" {
			continue
		}
		a := artifact{path: p, tool: tool}
		dup := false
		for _, b := range j.artifacts {
			if b == a {
				dup = true
				break
			}
		}
		if !dup {
			j.artifacts = append(j.artifacts, a)
		}
	}
}

// RecordMiddleware buffers middleware:{tag} with content {name, hook,
// action, changes}. A tag must have 1 to 21 characters.
func (j *Journal) RecordMiddleware(ctx context.Context, tag, name, hook, action string, changes map[string]any) error {
	t, err := runevents.MiddlewareEventType(tag)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if changes == nil {
		changes = map[string]any{}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.emitLocked(t, map[string]any{"name": name, "hook": hook, "action": action, "changes": changes}, nil)
	return nil
}

// RecordMemoryContext writes context:memory with {content_sha256} once per
// journal, directly (not buffered): the journal remembers it only after the
// write succeeded, so a failed call can be retried; later calls are no-ops.
// Calls are serialized.
func (j *Journal) RecordMemoryContext(ctx context.Context, contentSHA256 string) error {
	j.mu.Lock()
	if j.memoryDone {
		j.mu.Unlock()
		return nil
	}
	j.mu.Unlock()
	content, _ := json.Marshal(map[string]string{"content_sha256": contentSHA256})
	e := runevents.NewEvent{ThreadID: j.opts.ThreadID, RunID: j.opts.RunID, EventType: runevents.EventContextMemory,
		Category: runevents.CategoryContext, Content: content, Metadata: json.RawMessage(`{}`), CreatedAt: time.Now().UTC()}
	created, err := j.sink.AppendIfAbsent(ctx, e)
	if err != nil {
		return fmt.Errorf("journal: record memory context: %w", err)
	}
	_ = created
	j.mu.Lock()
	j.memoryDone = true
	j.mu.Unlock()
	return nil
}
