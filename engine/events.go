package engine

import (
	"encoding/json"
	"maps"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

// NewID returns prefix_ followed by a new UUIDv7, so ids of one prefix sort
// in creation order: wf_, wv_, run_, nr_.
func NewID(prefix string) string {
	return prefix + "_" + uuid.Must(uuid.NewV7()).String()
}

// maxSummaryBytes bounds a summary of a value in an event.
const maxSummaryBytes = 1024

// Summary returns a bounded summary of a JSON value, as the protocol's
// inputSummary and outputSummary: the value itself when its JSON has at
// most 1 KiB, else a string of its first bytes (whole runes) and "…".
func Summary(v json.RawMessage) json.RawMessage {
	if len(v) == 0 {
		return json.RawMessage("null")
	}
	if len(v) <= maxSummaryBytes {
		return v
	}
	cut := maxSummaryBytes
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	s, _ := json.Marshal(string(v[:cut]) + "…")
	return s
}

// errorObject is the unified error object of node.failed, run.failed and
// node.tool.finished.
type errorObject struct {
	Code      runstream.ErrorCode `json:"code"`
	Message   string              `json:"message"`
	Retryable bool                `json:"retryable"`
	NodeID    string              `json:"nodeId,omitempty"`
	Details   map[string]any      `json:"details,omitempty"`
}

func newErrorObject(e *runstream.Error) errorObject {
	return errorObject{Code: e.Code, Message: e.Message, Retryable: e.Code.Retryable(), NodeID: e.NodeID, Details: e.Details}
}

// nodeErrorObject is the error object of a node's failed attempt, whose
// retryability may differ from its code's (see WithRetryable).
func nodeErrorObject(e *runstream.Error, retryable bool) errorObject {
	obj := newErrorObject(e)
	obj.Retryable = retryable
	return obj
}

func timestamp(t time.Time) string { return t.Format(workflow.TimestampLayout) }

// mustJSON encodes event data built from plain values, which always
// encode.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("engine: event data does not encode: " + err.Error())
	}
	return b
}

func runEvent(t workflow.EventType, data any) workflow.NewEvent {
	return workflow.NewEvent{Event: t, Data: mustJSON(data)}
}

func nodeEvent(t workflow.EventType, nodeID, nodeRunID string, data any) workflow.NewEvent {
	return workflow.NewEvent{Event: t, NodeID: nodeID, NodeRunID: nodeRunID, Data: mustJSON(data)}
}

// The data of the events the engine writes, field names as the contract.

type runStartedData struct {
	StartedAt string `json:"startedAt"`
	WorkerID  string `json:"workerId,omitempty"`
}

type nodeQueuedData struct {
	NodeType string   `json:"nodeType"`
	Needs    []string `json:"needs"`
}

type nodeStartedData struct {
	Attempt      int             `json:"attempt"`
	InputSummary json.RawMessage `json:"inputSummary"`
}

// nodeInputSummary is node.started's inputSummary: what the node reads,
// the run's input and the outputs of the nodes it needs, bounded as
// Summary bounds it. It equals Summary of {"input":…,"nodes":{…}} encoded
// whole, but encodes only the pieces that reach into the summary: a node
// that needs many or large outputs does not pay for encoding them all at
// every attempt.
func nodeInputSummary(input json.RawMessage, outputs map[string]json.RawMessage) json.RawMessage {
	if len(input) == 0 {
		input = json.RawMessage("null")
	}
	b := append(make([]byte, 0, 2*maxSummaryBytes), `{"input":`...)
	b = append(b, mustJSON(input)...)
	b = append(b, `,"nodes":{`...)
	for i, id := range slices.Sorted(maps.Keys(outputs)) { // json.Marshal's order
		if len(b) > maxSummaryBytes {
			return Summary(b) // the first bytes of the whole, which is longer still
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, mustJSON(id)...)
		b = append(b, ':')
		b = append(b, mustJSON(outputs[id])...)
	}
	return Summary(append(b, "}}"...))
}

type nodeCompletedData struct {
	OutputSummary json.RawMessage `json:"outputSummary"`
	DurationMs    int64           `json:"durationMs"`
	Attempt       int             `json:"attempt"`
}

type nodeFailedData struct {
	Error     errorObject `json:"error"`
	Attempt   int         `json:"attempt"`
	WillRetry bool        `json:"willRetry"`
}

type runFailedData struct {
	Error        json.RawMessage `json:"error"`
	FailedNodeID *string         `json:"failedNodeId"`
	FinishedAt   string          `json:"finishedAt"`
}

type runCompletedData struct {
	Output     json.RawMessage        `json:"output"`
	Artifacts  []workflow.ArtifactRef `json:"artifacts"`
	FinishedAt string                 `json:"finishedAt"`
}

type runCancelledData struct {
	FinishedAt string `json:"finishedAt"`
}

// RunCreatedData returns the data of run.created for a run of version.
func RunCreatedData(v workflow.Version, input json.RawMessage) json.RawMessage {
	return mustJSON(struct {
		Version      int             `json:"version"`
		VersionID    string          `json:"versionId"`
		InputSummary json.RawMessage `json:"inputSummary"`
	}{v.Number, v.ID, Summary(input)})
}

// RunQueuedData returns the data of run.queued.
func RunQueuedData() json.RawMessage { return json.RawMessage(`{"queue":"default"}`) }

// CancelRequestedData returns the data of run.cancel_requested.
func CancelRequestedData(requestedBy string) json.RawMessage {
	return mustJSON(struct {
		RequestedBy string `json:"requestedBy"`
	}{requestedBy})
}

// CancelledData returns the data of run.cancelled.
func CancelledData(finishedAt time.Time) json.RawMessage {
	return mustJSON(runCancelledData{FinishedAt: timestamp(finishedAt)})
}

// ResumedData returns the data of run.resumed.
func ResumedData(action string) json.RawMessage {
	return mustJSON(struct {
		Action string `json:"action"`
	}{action})
}

// ResumeOutput returns the output of a human_input node resumed with
// action and values: {"action", "values"}.
func ResumeOutput(action string, values json.RawMessage) json.RawMessage {
	if len(values) == 0 {
		values = json.RawMessage("{}")
	}
	if redacted, err := RedactOutput(values); err == nil {
		values = redacted
	}
	return mustJSON(struct {
		Action string          `json:"action"`
		Values json.RawMessage `json:"values"`
	}{action, values})
}
