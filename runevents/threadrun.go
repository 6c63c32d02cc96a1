package runevents

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"slices"
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

// MayBecome reports whether a run row in status s may be written with
// status next, as the original's run store guards its writes: a row
// moves on only from pending or running, keeps its status, or goes from
// interrupted to error. A finished run never goes back to running.
// (putRunGuardSQL in the SQL stores is the same rule.)
func (s RunStatus) MayBecome(next RunStatus) bool {
	return s == RunPending || s == RunRunning || s == next || (s == RunInterrupted && next == RunError)
}

// ErrRunFinished is PutRun's refusal of a write that MayBecome refuses.
func ErrRunFinished(runID string, stored, next RunStatus) error {
	return runstream.Errorf(runstream.CodeConflict, "run %s is %s: a finished run keeps its status (%s refused)", runID, stored, next).
		WithDetail("status", string(stored))
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
	Metadata json.RawMessage
	Usage    Usage
	// AssistantID names the agent that ran ("" when unknown: null).
	AssistantID string
	// Kwargs is a JSON object: the run's creation arguments; nil means {}.
	Kwargs json.RawMessage
	// MultitaskStrategy is the run's concurrency strategy ("" means
	// DefaultMultitaskStrategy).
	MultitaskStrategy string
	// MessageCount is how many messages the run persisted, as its producer
	// counted them.
	MessageCount int64
	// StopReason says why the run stopped ("" when not given: null).
	StopReason string
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// DefaultMultitaskStrategy is the multitask_strategy of a run row that
// gives none, as in the original run rows.
const DefaultMultitaskStrategy = "reject"

// PrepareRunRow is PrepareRun plus the checks and defaults of the run
// row's DeerFlow fields: assistant id, multitask strategy and stop reason
// valid UTF-8 without NUL, kwargs a JSON object ({} when empty, stored
// compacted), multitask strategy DefaultMultitaskStrategy when empty,
// message count >= 0. Every RunStore stores what it returns.
func PrepareRunRow(r ThreadRun, now time.Time) (ThreadRun, error) {
	r, err := PrepareRun(r, now)
	if err != nil {
		return r, err
	}
	for _, f := range []struct{ name, value string }{{"assistant id", r.AssistantID}, {"multitask strategy", r.MultitaskStrategy}, {"stop reason", r.StopReason}} {
		if !utf8.ValidString(f.value) || strings.ContainsRune(f.value, 0) {
			return r, runstream.Errorf(runstream.CodeInvalidArgument, "run %s must be valid UTF-8 without NUL characters", f.name)
		}
	}
	if r.MessageCount < 0 {
		return r, runstream.Errorf(runstream.CodeInvalidArgument, "run message count must not be negative")
	}
	if r.MultitaskStrategy == "" {
		r.MultitaskStrategy = DefaultMultitaskStrategy
	}
	if len(r.Kwargs) == 0 {
		r.Kwargs = json.RawMessage(`{}`)
		return r, nil
	}
	var buf bytes.Buffer
	if json.Compact(&buf, r.Kwargs) != nil || buf.Len() == 0 || buf.Bytes()[0] != '{' || !utf8.Valid(buf.Bytes()) {
		return r, runstream.Errorf(runstream.CodeInvalidArgument, "run kwargs must be a JSON object in valid UTF-8")
	}
	r.Kwargs = buf.Bytes()
	return r, nil
}

// Feedback is a user's rating of a run, or of one message of it
// (MessageID). A user has at most one feedback per run and message id
// ("" for the run as a whole); writing again replaces it and keeps its id.
type Feedback struct {
	ID       string
	ThreadID string
	RunID    string
	UserID   string
	// MessageID scopes the feedback to one message of the run; "" rates
	// the run.
	MessageID string
	Rating    json.RawMessage // a number or a string such as "up"
	Comment   string
	// Tags are reason slugs (FeedbackTags); nil when none.
	Tags      []string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ShownBefore reports whether f rather than g is the feedback a run shows
// (RunStore.ListFeedback's choice, on the run's row of the history): a
// rating of the whole run (MessageID "") before a rating of one message,
// then the most recently updated, then the greater id.
func (f Feedback) ShownBefore(g Feedback) bool {
	if (f.MessageID == "") != (g.MessageID == "") {
		return f.MessageID == ""
	}
	return cmp.Or(f.UpdatedAt.Compare(g.UpdatedAt), cmp.Compare(f.ID, g.ID)) > 0
}

// FeedbackTags are the reason slugs a feedback may carry, as the original
// frontend offers them for a thumbs-down.
var FeedbackTags = []string{"incorrect", "not_as_expected", "slow", "style_tone", "safety_legal", "other"}

// RunStore persists thread run rows and feedback. It is safe for
// concurrent use. Reads take an Owner like Store's; another owner's row
// answers CodeNotFound exactly like a missing one.
type RunStore interface {
	// PutRun creates the run row or replaces its mutable fields (status,
	// model, metadata, usage, updated_at); CreatedAt and OwnerID are kept
	// from the first write. A row owned by another user is CodeNotFound;
	// a status the stored one may not become (RunStatus.MayBecome) is
	// ErrRunFinished's CodeConflict, and writes nothing.
	PutRun(ctx context.Context, r ThreadRun) (ThreadRun, error)
	// GetRun returns the row of (threadID, runID).
	GetRun(ctx context.Context, threadID, runID string, owner Owner) (ThreadRun, error)
	// FindRun returns the row of runID in whatever thread holds it, for the
	// stateless /api/runs/{run_id} endpoints. Run ids are meant to be
	// unique; of several threads holding one, the oldest row visible to
	// owner is found (by created_at, then thread id).
	FindRun(ctx context.Context, runID string, owner Owner) (ThreadRun, error)
	// ListRuns returns the thread's runs, oldest first.
	ListRuns(ctx context.Context, threadID string, owner Owner) ([]ThreadRun, error)
	// ListRunsNewest returns a page of the thread's runs, newest first
	// (ListRuns' order reversed): at most limit of them, after the offset
	// newest, read by the store without the others. A limit of 0 or less
	// returns none; a negative offset counts as 0.
	ListRunsNewest(ctx context.Context, threadID string, owner Owner, limit, offset int) ([]ThreadRun, error)

	// PutFeedback creates or replaces the owner's feedback on a run and
	// message id (f.UserID, f.MessageID); a replaced feedback keeps its id
	// and CreatedAt.
	PutFeedback(ctx context.Context, f Feedback) (Feedback, error)
	// ListRunFeedback returns every feedback on the run of the thread
	// visible to owner (with AnyOwner, every user's), oldest first (ties
	// by id).
	ListRunFeedback(ctx context.Context, threadID, runID string, owner Owner) ([]Feedback, error)
	// DeleteFeedbackByID deletes the feedback id on the run of the thread
	// if owner sees it, and returns how many it deleted (0 or 1).
	DeleteFeedbackByID(ctx context.Context, threadID, runID, id string, owner Owner) (int, error)
	// ListFeedback returns the feedback of the given runs of a thread
	// visible to owner, keyed by run id: of each run the one that
	// Feedback.ShownBefore every other (the rating of the whole run, else
	// the most recently updated rating of a message).
	ListFeedback(ctx context.Context, threadID string, runIDs []string, owner Owner) (map[string]Feedback, error)
	// DeleteFeedback deletes every feedback on a run of the thread visible
	// to owner (the owner's own, of every message id; with AnyOwner,
	// everyone's) and returns how many it deleted.
	DeleteFeedback(ctx context.Context, threadID, runID string, owner Owner) (int, error)
}

// Limits of a Feedback.
const (
	// MaxFeedbackComment bounds Feedback.Comment, in bytes.
	MaxFeedbackComment = 8 << 10
	// MaxFeedbackRating bounds Feedback.Rating, in bytes of JSON.
	MaxFeedbackRating = 256
	// MaxFeedbackMessageID bounds Feedback.MessageID, in bytes.
	MaxFeedbackMessageID = 256
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
	if len(f.MessageID) > MaxFeedbackMessageID || !utf8.ValidString(f.MessageID) || strings.ContainsFunc(f.MessageID, IsControl) {
		return f, runstream.Errorf(runstream.CodeInvalidArgument, "feedback message_id must be at most %d bytes of UTF-8 without control characters", MaxFeedbackMessageID).
			WithDetail("field", "message_id")
	}
	seen := map[string]bool{}
	for _, tag := range f.Tags {
		if !slices.Contains(FeedbackTags, tag) || seen[tag] {
			return f, runstream.Errorf(runstream.CodeInvalidArgument, "feedback tags must be distinct values of %s", strings.Join(FeedbackTags, ", ")).
				WithDetail("field", "tags")
		}
		seen[tag] = true
	}
	if len(f.Tags) == 0 {
		f.Tags = nil
	} else {
		f.Tags = slices.Clone(f.Tags)
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

// IsControl reports whether r is an ASCII control character (C0 or DEL),
// which labels, ids and names of the run-event contract must not hold.
func IsControl(r rune) bool { return r < 0x20 || r == 0x7f }

// EncodeTags returns the JSON array text a store keeps tags as ("[]" for
// none); DecodeTags reads it back (nil for none).
func EncodeTags(tags []string) string {
	if len(tags) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(tags)
	return string(b)
}

// DecodeTags reads the text EncodeTags wrote.
func DecodeTags(text string) ([]string, error) {
	var tags []string
	if err := json.Unmarshal([]byte(text), &tags); err != nil {
		return nil, runstream.Wrap(err, runstream.CodeInternal, "stored feedback tags are not a JSON array")
	}
	if len(tags) == 0 {
		return nil, nil
	}
	return tags, nil
}
