package engine

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

// NodeRun is one attempt of a node as its NodeFunc sees it. Its methods
// append the node's events to the run; they are safe for concurrent use
// and return an error once the run may no longer be written (the lease was
// lost, the engine stopped), after which the node should return.
type NodeRun struct {
	RunID      string
	WorkflowID string
	NodeID     string
	NodeRunID  string
	// Attempt counts the node's attempts from 1.
	Attempt int
	// Input is the run's input.
	Input json.RawMessage
	// Outputs holds the outputs of the node's upstream nodes (its needs,
	// transitively), by node id.
	Outputs map[string]json.RawMessage

	em    *emitter
	clock func() time.Time
	ttl   time.Duration
	// cancelRun stops the run's nodes and ends the run cancelled; AwaitInput
	// calls it when the run is no longer running.
	cancelRun func()
	// progressEvery is the shortest time between two stored progress
	// reports; lastProgress is the time of the last one, doneReported
	// whether a report of 100 percent was stored.
	progressEvery time.Duration
	progressMu    sync.Mutex
	lastProgress  time.Time
	doneReported  bool
}

// errParked is returned (wrapped) by AwaitInput: the node waits for input.
var errParked = errors.New("the node awaits input")

// Env returns the node's expression environment: the run input and the
// upstream outputs.
func (n *NodeRun) Env() (Env, error) { return NewEnv(n.Input, n.Outputs) }

// Now returns the engine's clock.
func (n *NodeRun) Now() time.Time { return n.clock() }

// Delta streams text on a channel ("text" for model tokens) as
// node.output.delta events, coalesced before they are stored. text should
// be whole runes of UTF-8: each run of invalid bytes is stored as one
// U+FFFD, even when the next call would complete a rune.
func (n *NodeRun) Delta(ctx context.Context, channel, text string) error {
	return n.em.delta(ctx, n.NodeID, n.NodeRunID, channel, text)
}

// Progress appends node.progress; percent < 0 is written as null. A
// report within the engine's ProgressInterval of the last stored one is
// dropped (nil is returned), except the first report of 100 percent, so a
// node reporting in a tight loop stores at most one report per interval
// and its final one.
func (n *NodeRun) Progress(ctx context.Context, phase, message string, percent float64) error {
	if !n.progressDue(percent >= 100) {
		return ctx.Err()
	}
	data := struct {
		Phase   string   `json:"phase"`
		Message string   `json:"message"`
		Percent *float64 `json:"percent"`
	}{Phase: phase, Message: message}
	if percent >= 0 {
		p := min(percent, 100)
		data.Percent = &p
	}
	return n.emit(ctx, workflow.AppendParams{}, workflow.EventNodeProgress, data)
}

// progressDue reports whether a progress report may be stored now, and
// if so takes the slot.
func (n *NodeRun) progressDue(done bool) bool {
	n.progressMu.Lock()
	defer n.progressMu.Unlock()
	now := time.Now() // an interval, not a time written in an event
	switch {
	case done && !n.doneReported:
		n.doneReported = true
	case !n.lastProgress.IsZero() && now.Sub(n.lastProgress) < n.progressEvery:
		return false
	}
	n.lastProgress = now
	return true
}

// ToolStarted appends node.tool.started for a tool call with its input.
func (n *NodeRun) ToolStarted(ctx context.Context, toolCallID, name string, input json.RawMessage) error {
	return n.emit(ctx, workflow.AppendParams{}, workflow.EventNodeToolStarted, struct {
		ToolCallID   string          `json:"toolCallId"`
		Name         string          `json:"name"`
		InputSummary json.RawMessage `json:"inputSummary"`
	}{toolCallID, name, Summary(input)})
}

// ToolFinished appends node.tool.finished: status "ok" with the output, or
// "error" with toolErr when it is not nil.
func (n *NodeRun) ToolFinished(ctx context.Context, toolCallID, name string, output json.RawMessage, toolErr *runstream.Error, took time.Duration) error {
	data := struct {
		ToolCallID    string          `json:"toolCallId"`
		Name          string          `json:"name"`
		Status        string          `json:"status"`
		OutputSummary json.RawMessage `json:"outputSummary,omitempty"`
		Error         *errorObject    `json:"error,omitempty"`
		DurationMs    int64           `json:"durationMs"`
	}{ToolCallID: toolCallID, Name: name, Status: "ok", DurationMs: max(took.Milliseconds(), 0)}
	if toolErr != nil {
		obj := newErrorObject(toolErr)
		data.Status, data.Error = "error", &obj
	} else {
		data.OutputSummary = Summary(output)
	}
	return n.emit(ctx, workflow.AppendParams{}, workflow.EventNodeToolFinished, data)
}

// AwaitInput pauses the run at this node: it appends run.awaiting_input
// with a new one-time resume token (256 random bits, base64url; only its
// SHA-256 is stored) that expires after ttl (the engine's default when
// ttl <= 0). The node must return the error AwaitInput returns; when the
// run is resumed, the node's output is {"action", "values"} of the resume
// request. At most one node of a run may await input at a time.
//
// run.awaiting_input is appended only while the run's status is running.
// When it is not (the run's cancellation was requested since it was last
// read), nothing is appended: the run's nodes are stopped and the run ends
// cancelled, as when the engine sees the request itself.
func (n *NodeRun) AwaitInput(ctx context.Context, formSchema json.RawMessage, actions []string, ttl time.Duration) error {
	if ttl <= 0 {
		ttl = n.ttl
	}
	var secret [32]byte
	rand.Read(secret[:])
	token := base64.RawURLEncoding.EncodeToString(secret[:])
	hash := sha256.Sum256([]byte(token))
	expires := n.clock().Add(ttl).UTC().Truncate(time.Microsecond)
	stored := &workflow.ResumeToken{
		NodeID: n.NodeID, NodeRunID: n.NodeRunID, Hash: hash[:],
		Actions: actions, FormSchema: formSchema, ExpiresAt: expires,
	}
	// Unconditional, run.awaiting_input would replace the status
	// cancelling of a run whose cancellation was just requested, and the
	// parked run would never be cancelled.
	err := n.emit(ctx, workflow.AppendParams{ResumeToken: stored, IfStatus: workflow.StatusRunning}, workflow.EventRunAwaitingInput, struct {
		FormSchema  json.RawMessage `json:"formSchema"`
		Actions     []string        `json:"actions"`
		ResumeToken string          `json:"resumeToken"`
		ExpiresAt   string          `json:"expiresAt"`
	}{formSchema, actions, token, timestamp(expires)})
	if errors.Is(err, errConditionFailed) {
		n.cancelRun()
		return fmt.Errorf("await input: %w", err)
	}
	if err != nil {
		return err
	}
	return errParked
}

func (n *NodeRun) emit(ctx context.Context, p workflow.AppendParams, t workflow.EventType, data any) error {
	return n.em.emit(ctx, p, nodeEvent(t, n.NodeID, n.NodeRunID, data))
}
