package runevents

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runstream/runstream"
)

// RunStatus is the lifecycle state of a thread run, as the run row records
// it. The row, not any event, is authoritative for it.
type RunStatus string

// Run states of the original system.
const (
	RunPending     RunStatus = "pending"
	RunRunning     RunStatus = "running"
	RunSuccess     RunStatus = "success"
	RunError       RunStatus = "error"
	RunInterrupted RunStatus = "interrupted"
	RunTimeout     RunStatus = "timeout"
)

// Valid reports whether s is one of the run states.
func (s RunStatus) Valid() bool {
	switch s {
	case RunPending, RunRunning, RunSuccess, RunError, RunInterrupted, RunTimeout:
		return true
	}
	return false
}

// ModelUsage is the token usage of one model within a run.
type ModelUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
}

// Usage is the token accounting of a run, accumulated by its producer while
// it ran. Token summaries come from here, never from event rows.
type Usage struct {
	TotalInputTokens  int64                 `json:"total_input_tokens"`
	TotalOutputTokens int64                 `json:"total_output_tokens"`
	TotalTokens       int64                 `json:"total_tokens"`
	LLMCallCount      int64                 `json:"llm_call_count"`
	LeadAgentTokens   int64                 `json:"lead_agent_tokens"`
	SubagentTokens    int64                 `json:"subagent_tokens"`
	MiddlewareTokens  int64                 `json:"middleware_tokens"`
	ByModel           map[string]ModelUsage `json:"token_usage_by_model"`
}

// ThreadRun is the row of one run of a thread.
type ThreadRun struct {
	ThreadID string
	RunID    string
	OwnerID  string
	Status   RunStatus
	// OperationKind is "run" for agent runs; token usage and supersession
	// consider only those.
	OperationKind string
	ModelName     string
	// Metadata is a JSON object; regenerate_from_run_id and replay_kind
	// ("edit") in it mark runs that supersede others.
	Metadata  json.RawMessage
	Usage     Usage
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Feedback is a user's rating of a run. A user has at most one feedback per
// run; writing again replaces it and keeps its id.
type Feedback struct {
	ID        string
	ThreadID  string
	RunID     string
	UserID    string
	Rating    json.RawMessage // a number or a string such as "up"
	Comment   string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// RunStore persists thread run rows and feedback. It is safe for
// concurrent use. Reads take an Owner like Store's; another owner's row
// answers CodeNotFound exactly like a missing one.
type RunStore interface {
	// PutRun creates the run row or replaces its mutable fields (status,
	// model, metadata, usage, updated_at); CreatedAt and OwnerID are kept
	// from the first write. A row owned by another user is CodeNotFound.
	PutRun(ctx context.Context, r ThreadRun) (ThreadRun, error)
	// GetRun returns the row of (threadID, runID).
	GetRun(ctx context.Context, threadID, runID string, owner Owner) (ThreadRun, error)
	// FindRun returns the row of runID in whatever thread holds it, for the
	// stateless /api/runs/{run_id} endpoints.
	FindRun(ctx context.Context, runID string, owner Owner) (ThreadRun, error)
	// ListRuns returns the thread's runs, oldest first.
	ListRuns(ctx context.Context, threadID string, owner Owner) ([]ThreadRun, error)

	// PutFeedback creates or replaces the owner's feedback on a run.
	PutFeedback(ctx context.Context, f Feedback) (Feedback, error)
	// ListFeedback returns the feedback of the given runs of a thread
	// visible to owner, keyed by run id (one per run and user; with
	// AnyOwner, the newest).
	ListFeedback(ctx context.Context, threadID string, runIDs []string, owner Owner) (map[string]Feedback, error)
	// DeleteFeedback deletes the feedback on a run of the thread visible
	// to owner (the owner's own; with AnyOwner, everyone's) and returns
	// how many it deleted.
	DeleteFeedback(ctx context.Context, threadID, runID string, owner Owner) (int, error)
}

// Limits of a Feedback.
const (
	// MaxFeedbackComment bounds Feedback.Comment, in bytes.
	MaxFeedbackComment = 8 << 10
	// MaxFeedbackRating bounds Feedback.Rating, in bytes of JSON.
	MaxFeedbackRating = 256
)

// Prepare checks f's ids, rating and comment, and returns f with its
// rating compacted, as every RunStore stores it: the rating is a JSON
// number or string of at most MaxFeedbackRating bytes, the comment at most
// MaxFeedbackComment bytes; both are valid UTF-8 without NUL characters. Its error is
// CodeInvalidArgument, with details.field "rating" or "comment" when one
// of them is refused.
func (f Feedback) Prepare() (Feedback, error) {
	if err := ValidateID("thread_id", f.ThreadID); err != nil {
		return f, err
	}
	if err := ValidateID("run_id", f.RunID); err != nil {
		return f, err
	}
	badRating := runstream.Errorf(runstream.CodeInvalidArgument, "feedback rating must be a JSON number or string of at most %d bytes, without NUL characters", MaxFeedbackRating).
		WithDetail("field", "rating")
	var rating any
	if len(f.Rating) > MaxFeedbackRating || !utf8.Valid(f.Rating) || json.Unmarshal(f.Rating, &rating) != nil {
		return f, badRating
	}
	switch v := rating.(type) {
	case float64:
	case string:
		if strings.ContainsRune(v, 0) {
			return f, badRating
		}
	default:
		return f, badRating
	}
	if len(f.Comment) > MaxFeedbackComment || !utf8.ValidString(f.Comment) || strings.ContainsRune(f.Comment, 0) {
		return f, runstream.Errorf(runstream.CodeInvalidArgument, "feedback comment must be valid UTF-8 of at most %d bytes without NUL characters", MaxFeedbackComment).
			WithDetail("field", "comment")
	}
	var buf bytes.Buffer
	json.Compact(&buf, f.Rating) // valid: it was just decoded
	f.Rating = buf.Bytes()
	return f, nil
}

// NewFeedbackID returns a new random feedback id.
func NewFeedbackID() string {
	var b [16]byte
	rand.Read(b[:])
	return "fb_" + hex.EncodeToString(b[:])
}
