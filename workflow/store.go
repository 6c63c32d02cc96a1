package workflow

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/redact"
)

// NotFound is a store's answer for a workflow that does not exist or that
// the caller may not see. The id is the caller's: the message quotes it
// whole when it is shaped as an id, else an excerpt of it (quoteID).
func NotFound(id string) error {
	return runstream.Errorf(runstream.CodeWorkflowNotFound, "workflow %s not found", quoteID(id))
}

// RunNotFound is NotFound for a workflow run.
func RunNotFound(id string) error {
	return runstream.Errorf(runstream.CodeWorkflowRunNotFound, "workflow run %s not found", quoteID(id))
}

// quoteID quotes id whole when it has the shape of an id (1 to 64 ASCII
// letters, digits and _ . : -, as the ids runstream makes) and holds
// nothing the redaction rules find, so that an answer names the id it was
// asked; anything else is a value of the caller's, of which it quotes a
// redacted excerpt (redact.Quote).
func quoteID(id string) string {
	if len(id) == 0 || len(id) > 64 || redact.Text(id) != id {
		return redact.Quote(id)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_.:-", c) >= 0) {
			return redact.Quote(id)
		}
	}
	return `"` + id + `"`
}

// Page limits of event reads.
const (
	DefaultEventPageLimit = 100
	MaxEventPageLimit     = 1000
)

// ListWorkflowsParams selects workflows, newest first.
type ListWorkflowsParams struct {
	Owner runstream.Owner
	// BeforeID, when set, continues a listing after the workflow with this
	// id (ids are time-ordered).
	BeforeID string
	Limit    int
}

// ListRunsParams selects runs, newest first.
type ListRunsParams struct {
	Owner      runstream.Owner
	WorkflowID string    // "" = every workflow
	Status     RunStatus // "" = every status
	BeforeID   string
	Limit      int
}

// AppendParams appends events to one run in one transaction.
type AppendParams struct {
	RunID  string
	Events []NewEvent
	// LeaseOwner, when set, fences the append: it fails with CodeConflict
	// unless the run's lease is held by this owner.
	LeaseOwner string
	// IfStatus, when set, makes the append conditional: it fails with
	// CodeConflict unless the run's status, read in the append's
	// transaction, is IfStatus. A caller that chose the events from an
	// earlier read of the run uses it, so that two such callers racing do
	// not both append (two cancels, one run.cancel_requested).
	IfStatus RunStatus
	// ResumeToken, when set, is stored with the batch (which then holds the
	// run.awaiting_input event that carries the token).
	ResumeToken *ResumeToken
	// Artifacts are stored with the batch (which holds their
	// artifact.created events).
	Artifacts []Artifact
	// NodeOutputs, by node id, are stored with the batch (which holds the
	// nodes' node.completed events) by stores that implement
	// NodeOutputStore; an output given again for a node replaces the
	// older one. Each must be one valid JSON value.
	NodeOutputs map[string]json.RawMessage
}

// Accepts reports whether run, as read in the append's transaction, takes
// the append: CodeConflict when the lease fences it off, when the run has
// ended (no event follows a terminal one), or when its status is not
// p.IfStatus. Every backend checks an append with it.
func (p AppendParams) Accepts(run Run) error {
	switch {
	case p.LeaseOwner != "" && run.LeaseOwner != p.LeaseOwner:
		return runstream.Errorf(runstream.CodeConflict, "append: run %q is not leased to %q", run.ID, p.LeaseOwner)
	case run.Status.Terminal():
		return runstream.Errorf(runstream.CodeConflict, "append: run %q is %s and accepts no event", run.ID, run.Status)
	case p.IfStatus != "" && run.Status != p.IfStatus:
		return runstream.Errorf(runstream.CodeConflict, "append: run %q is %s, not %s", run.ID, run.Status, p.IfStatus)
	}
	return nil
}

// ResumeParams consume a resume token and append run.resumed atomically.
type ResumeParams struct {
	RunID string
	Owner runstream.Owner
	// Hash is the SHA-256 of the presented token.
	Hash []byte
	Now  time.Time
	// Events are appended in the same transaction when the token is valid
	// (run.resumed first).
	Events []NewEvent
	// NodeOutputs are stored in the same transaction, as
	// AppendParams.NodeOutputs: the output of the node that awaited input.
	NodeOutputs map[string]json.RawMessage
}

// Store persists workflows, versions, runs and their events. It is safe for
// concurrent use. Errors are *runstream.Error: CodeWorkflowNotFound,
// CodeWorkflowVersionNotFound, CodeWorkflowRunNotFound for missing (or
// another owner's) rows, CodeInvalidArgument for bad arguments.
type Store interface {
	// CreateWorkflow stores a workflow with its first version (Number 1).
	CreateWorkflow(ctx context.Context, w Workflow, v Version) (Workflow, Version, error)
	GetWorkflow(ctx context.Context, id string, owner runstream.Owner) (Workflow, error)
	ListWorkflows(ctx context.Context, p ListWorkflowsParams) ([]Workflow, error)
	// AddVersion stores a new immutable version of an existing workflow,
	// numbered after the latest, and makes it the latest.
	AddVersion(ctx context.Context, v Version, owner runstream.Owner) (Version, error)
	GetVersion(ctx context.Context, workflowID, versionID string, owner runstream.Owner) (Version, error)

	// CreateRun stores a run and its first events in one transaction.
	CreateRun(ctx context.Context, r Run, events []NewEvent) (Run, []Envelope, error)
	GetRun(ctx context.Context, id string, owner runstream.Owner) (Run, error)
	ListRuns(ctx context.Context, p ListRunsParams) ([]Run, error)
	// CountRuns returns how many runs of every owner are in each of
	// statuses (a status without runs is absent or 0), for the metrics:
	// counted on the status index, not read row by row.
	CountRuns(ctx context.Context, statuses []RunStatus) (map[RunStatus]int, error)

	// Append appends events to a run in one transaction: seqs are the next
	// ones of the run, from its counter row locked in the transaction, and
	// the run row changes the events imply (ApplyEvent) commit with them.
	// After a terminal event the run accepts no event: CodeConflict.
	Append(ctx context.Context, p AppendParams) ([]Envelope, error)

	// ListEvents returns up to limit events of a run with seq > afterSeq,
	// ascending. The caller has checked the run's owner.
	ListEvents(ctx context.Context, runID string, afterSeq int64, limit int) ([]Envelope, error)

	// Resume consumes the run's pending resume token with one
	// compare-and-set and appends p.Events in the same transaction. Of
	// several concurrent calls with the same token exactly one succeeds.
	// Errors: CodeWorkflowRunAlreadyTerminal for a run that has ended,
	// CodeWorkflowRunNotAwaitingInput, CodeWorkflowResumeTokenInvalid
	// (no such token), CodeWorkflowResumeTokenUsed,
	// CodeWorkflowResumeTokenExpired.
	Resume(ctx context.Context, p ResumeParams) ([]Envelope, error)

	// PendingResumeToken returns the run's unconsumed resume token (its hash
	// and form), for validating a resume request before consuming it.
	PendingResumeToken(ctx context.Context, runID string) (ResumeToken, error)

	GetArtifact(ctx context.Context, runID, artifactID string) (Artifact, error)

	Close() error
}

// ApplyEvent updates r for an event appended to it: LastSeq, UpdatedAt, the
// status the event implies, StartedAt, FinishedAt, Output (from
// run.completed data.output) and Error (from run.failed data.error). Every
// backend calls it, so run rows change identically everywhere.
func ApplyEvent(r *Run, e Envelope) {
	r.LastSeq = e.Seq
	r.UpdatedAt = e.Timestamp
	if s, ok := StatusAfter(e.Event); ok {
		r.Status = s
	}
	switch e.Event {
	case EventRunStarted:
		if r.StartedAt.IsZero() {
			r.StartedAt = e.Timestamp
		}
	case EventRunCompleted:
		var d struct {
			Output json.RawMessage `json:"output"`
		}
		if json.Unmarshal(e.Data, &d) == nil {
			r.Output = d.Output
		}
	case EventRunFailed:
		var d struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(e.Data, &d) == nil {
			r.Error = d.Error
		}
	}
	if e.Event.Terminal() {
		r.FinishedAt = e.Timestamp
		r.LeaseOwner = ""
		r.LeaseExpiresAt = time.Time{}
	}
}

// NewEnvelope builds the stored envelope of an event appended to r at seq:
// the store's clock (UTC, microseconds) when the event has no timestamp, and
// {} for empty data.
func NewEnvelope(r Run, seq int64, e NewEvent, now time.Time) Envelope {
	ts := e.Timestamp
	if ts.IsZero() {
		ts = now.UTC()
	}
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	return Envelope{
		SchemaVersion: SchemaVersion,
		RunID:         r.ID,
		WorkflowID:    r.WorkflowID,
		VersionID:     r.VersionID,
		Seq:           seq,
		Event:         e.Event,
		NodeID:        e.NodeID,
		NodeRunID:     e.NodeRunID,
		Timestamp:     ts.Truncate(time.Microsecond),
		Data:          data,
	}
}

// CheckEvents rejects an empty batch, unknown event types, node-scoped
// events without a node id, and data that is not a JSON object. Contract
// (schema) validation happens before, in the event log.
func CheckEvents(events []NewEvent) error {
	if len(events) == 0 {
		return runstream.Errorf(runstream.CodeInvalidArgument, "no events to append")
	}
	for i, e := range events {
		if !e.Event.Known() {
			return runstream.Errorf(runstream.CodeInvalidArgument, "events[%d]: unknown event %q", i, e.Event)
		}
		if e.Event.NodeScoped() && e.NodeID == "" {
			return runstream.Errorf(runstream.CodeInvalidArgument, "events[%d]: %s needs a nodeId", i, e.Event)
		}
		if len(e.Data) > 0 && (!json.Valid(e.Data) || firstNonSpace(e.Data) != '{') {
			return runstream.Errorf(runstream.CodeInvalidArgument, "events[%d]: data must be a JSON object", i)
		}
		if e.Event.Terminal() && i != len(events)-1 {
			return runstream.Errorf(runstream.CodeInvalidArgument, "events[%d]: a terminal event must be the last of its batch", i)
		}
	}
	return nil
}

func firstNonSpace(b []byte) byte {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c
		}
	}
	return 0
}
