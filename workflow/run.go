package workflow

import (
	"encoding/json"
	"time"

	"github.com/runstream/runstream"
)

// RunStatus is the lifecycle state of a workflow run.
type RunStatus string

// Run states. A run moves queued → running, may pause in awaiting_input,
// may be cancelling, and ends in exactly one terminal state.
const (
	StatusQueued        RunStatus = "queued"
	StatusRunning       RunStatus = "running"
	StatusAwaitingInput RunStatus = "awaiting_input"
	StatusCancelling    RunStatus = "cancelling"
	StatusCompleted     RunStatus = "completed"
	StatusFailed        RunStatus = "failed"
	StatusCancelled     RunStatus = "cancelled"
)

// Terminal reports whether s is completed, failed or cancelled.
func (s RunStatus) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// NotAwaitingInput is a store's refusal to resume run, whose status is
// not awaiting_input: CodeWorkflowRunAlreadyTerminal for a run that has
// ended, CodeWorkflowRunNotAwaitingInput otherwise.
func NotAwaitingInput(runID string, status RunStatus) error {
	if status.Terminal() {
		return runstream.Errorf(runstream.CodeWorkflowRunAlreadyTerminal, "resume: run %q is %s", runID, status)
	}
	return runstream.Errorf(runstream.CodeWorkflowRunNotAwaitingInput, "resume: run %q is %s, not awaiting input", runID, status)
}

// Valid reports whether s is one of the run states.
func (s RunStatus) Valid() bool {
	switch s {
	case StatusQueued, StatusRunning, StatusAwaitingInput, StatusCancelling, StatusCompleted, StatusFailed, StatusCancelled:
		return true
	}
	return false
}

// StatusAfter returns the run status that an event of type t implies, and
// false when t does not change the status. Stores apply it in the
// transaction that appends the event.
func StatusAfter(t EventType) (RunStatus, bool) {
	switch t {
	case EventRunQueued:
		return StatusQueued, true
	case EventRunStarted, EventRunResumed:
		return StatusRunning, true
	case EventRunAwaitingInput:
		return StatusAwaitingInput, true
	case EventRunCancelRequested:
		return StatusCancelling, true
	case EventRunCompleted:
		return StatusCompleted, true
	case EventRunFailed:
		return StatusFailed, true
	case EventRunCancelled:
		return StatusCancelled, true
	}
	return "", false
}

// TerminalEventFor returns the terminal event that corresponds to a
// terminal status, for synthesising a terminal frame.
func TerminalEventFor(s RunStatus) (EventType, bool) {
	switch s {
	case StatusCompleted:
		return EventRunCompleted, true
	case StatusFailed:
		return EventRunFailed, true
	case StatusCancelled:
		return EventRunCancelled, true
	}
	return "", false
}

// Workflow is a named workflow owned by a user. Its definitions are
// immutable versions; the newest is the default for new runs.
type Workflow struct {
	ID              string
	OwnerID         string
	Name            string
	Description     string
	LatestVersionID string
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// Version is one immutable definition of a workflow.
type Version struct {
	ID         string
	WorkflowID string
	// Number counts the workflow's versions from 1.
	Number     int
	Definition json.RawMessage
	CreatedAt  time.Time
}

// Run is one execution of a workflow version.
type Run struct {
	ID         string
	WorkflowID string
	VersionID  string
	OwnerID    string
	Status     RunStatus
	Input      json.RawMessage
	// Output is the run's output once completed; nil before.
	Output json.RawMessage
	// Error is the unified error object once failed; nil otherwise.
	Error json.RawMessage
	// LastSeq is the seq of the run's newest event (0 before the first).
	LastSeq    int64
	CreatedAt  time.Time
	UpdatedAt  time.Time
	StartedAt  time.Time // zero until run.started
	FinishedAt time.Time // zero until terminal
	// LeaseOwner and LeaseExpiresAt are the engine's claim on the run.
	LeaseOwner     string
	LeaseExpiresAt time.Time
}

// NewEvent is an event to append to a run; the store assigns Seq and copies
// the run's workflow and version ids into the envelope.
type NewEvent struct {
	Event     EventType
	NodeID    string
	NodeRunID string
	// Timestamp defaults to the store's clock, in UTC.
	Timestamp time.Time
	// Data is the event's JSON object.
	Data json.RawMessage
}

// ResumeToken is the stored form of a resume token: its hash, never the
// token itself.
type ResumeToken struct {
	RunID     string
	NodeID    string
	NodeRunID string
	// Hash is the SHA-256 of the token.
	Hash       []byte
	Actions    []string
	FormSchema json.RawMessage
	ExpiresAt  time.Time
	// ConsumedAt is zero until the token is used.
	ConsumedAt time.Time
}

// Artifact is the metadata of an artifact a node stored.
type Artifact struct {
	ID        string
	RunID     string
	NodeID    string
	Name      string
	MimeType  string
	SizeBytes int64
	SHA256    string
	CreatedAt time.Time
}
