package threadsvc

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/redact"
	"github.com/runstream/runstream/runevents"
)

// maxOperationKind bounds operation_kind and model_name.
const maxOperationKind = 128

// MaxRunMetadataBytes bounds a run row's metadata (its JSON text).
const MaxRunMetadataBytes = 256 << 10

// RunParams is a run row to store as a caller sends it (the body of PUT
// /api/threads/{thread_id}/runs/{run_id}): status (required), created_at,
// updated_at, model_name, operation_kind (default "run"), metadata (an
// object; its regenerate_from_run_id and replay_kind, when present, are
// strings), the usage totals, all >= 0, and the DeerFlow fields below. Optional members are nil
// when absent.
type RunParams struct {
	ThreadID string `json:"-"`
	RunID    string `json:"-"`
	User     string `json:"-"`

	Status        runevents.RunStatus `json:"status"`
	CreatedAt     *string             `json:"created_at"`
	UpdatedAt     *string             `json:"updated_at"`
	ModelName     *string             `json:"model_name"`
	OperationKind *string             `json:"operation_kind"`
	Metadata      json.RawMessage     `json:"metadata"`
	runevents.Usage
	// The DeerFlow run row fields: assistant_id and stop_reason (strings
	// or null), kwargs (an object, redacted as metadata is),
	// multitask_strategy (reject, rollback, interrupt or enqueue; default
	// reject) and message_count (>= 0).
	AssistantID       *string         `json:"assistant_id"`
	Kwargs            json.RawMessage `json:"kwargs"`
	MultitaskStrategy *string         `json:"multitask_strategy"`
	MessageCount      int64           `json:"message_count"`
	StopReason        *string         `json:"stop_reason"`
}

// MultitaskStrategies are the values of a run row's multitask_strategy.
var MultitaskStrategies = []string{"reject", "rollback", "interrupt", "enqueue"}

// row checks p and returns its run row; a broken rule is VALIDATION_FAILED
// naming the member.
func (b RunParams) row() (runevents.ThreadRun, error) {
	run := runevents.ThreadRun{ThreadID: b.ThreadID, RunID: b.RunID, OwnerID: b.User, Status: b.Status, OperationKind: "run", Usage: b.Usage}
	switch {
	case b.Status == "":
		return run, Problem("/status", "required: one of pending, running, success, error, interrupted, timeout")
	case !b.Status.Valid():
		return run, Problem("/status", "must be one of pending, running, success, error, interrupted, timeout")
	}
	if b.OperationKind != nil {
		if !validLabel(*b.OperationKind) {
			return run, Problem("/operation_kind", "must have 1 to 128 characters without control characters")
		}
		run.OperationKind = *b.OperationKind
	}
	if b.ModelName != nil && *b.ModelName != "" {
		if !validLabel(*b.ModelName) {
			return run, Problem("/model_name", "must have at most 128 characters without control characters")
		}
		run.ModelName = *b.ModelName
	}
	for _, ts := range []struct {
		path  string
		value *string
		into  *time.Time
	}{{"/created_at", b.CreatedAt, &run.CreatedAt}, {"/updated_at", b.UpdatedAt, &run.UpdatedAt}} {
		if ts.value == nil {
			continue
		}
		t, err := ParseTimestamp(ts.path, *ts.value)
		if err != nil {
			return run, err
		}
		*ts.into = t
	}
	if len(b.Metadata) > MaxRunMetadataBytes {
		return run, Problem("/metadata", fmt.Sprintf("must have at most %d bytes of JSON", MaxRunMetadataBytes))
	}
	if len(b.Metadata) > 0 && string(b.Metadata) != "null" {
		var meta map[string]json.RawMessage
		if json.Unmarshal(b.Metadata, &meta) != nil {
			return run, Problem("/metadata", "must be an object")
		}
		for _, key := range []string{"regenerate_from_run_id", "replay_kind"} {
			var str string
			if v, ok := meta[key]; ok && string(v) != "null" && json.Unmarshal(v, &str) != nil {
				return run, Problem("/metadata/"+key, "must be a string")
			}
		}
		run.Metadata = b.Metadata
	}
	if err := b.deerflowFields(&run); err != nil {
		return run, err
	}
	u := b.Usage
	for name, n := range map[string]int64{
		"total_input_tokens": u.TotalInputTokens, "total_output_tokens": u.TotalOutputTokens, "total_tokens": u.TotalTokens,
		"llm_call_count": u.LLMCallCount, "lead_agent_tokens": u.LeadAgentTokens, "subagent_tokens": u.SubagentTokens,
		"middleware_tokens": u.MiddlewareTokens,
	} {
		if n < 0 {
			return run, Problem("/"+name, "must not be negative")
		}
	}
	for model, mu := range u.ByModel {
		if model == "" || mu.InputTokens < 0 || mu.OutputTokens < 0 || mu.TotalTokens < 0 {
			return run, Problem("/token_usage_by_model", "model names must not be empty and counts not negative")
		}
	}
	return RedactRun(run)
}

// deerflowFields checks the DeerFlow run row fields of b and sets them on
// run.
func (b RunParams) deerflowFields(run *runevents.ThreadRun) error {
	for _, f := range []struct {
		path  string
		value *string
		into  *string
	}{{"/assistant_id", b.AssistantID, &run.AssistantID}, {"/stop_reason", b.StopReason, &run.StopReason}} {
		if f.value == nil || *f.value == "" {
			continue
		}
		if !validLabel(*f.value) {
			return Problem(f.path, "must have at most 128 characters without control characters")
		}
		*f.into = *f.value
	}
	if b.MultitaskStrategy != nil {
		if !slices.Contains(MultitaskStrategies, *b.MultitaskStrategy) {
			return Problem("/multitask_strategy", "must be one of "+strings.Join(MultitaskStrategies, ", "))
		}
		run.MultitaskStrategy = *b.MultitaskStrategy
	}
	if b.MessageCount < 0 {
		return Problem("/message_count", "must not be negative")
	}
	run.MessageCount = b.MessageCount
	if len(b.Kwargs) > MaxRunMetadataBytes {
		return Problem("/kwargs", fmt.Sprintf("must have at most %d bytes of JSON", MaxRunMetadataBytes))
	}
	if len(b.Kwargs) > 0 && string(b.Kwargs) != "null" {
		var obj map[string]json.RawMessage
		if json.Unmarshal(b.Kwargs, &obj) != nil {
			return Problem("/kwargs", "must be an object")
		}
		run.Kwargs = b.Kwargs
	}
	return nil
}

// rowRedactor cleans what a run row or feedback keeps, as the event log
// cleans events.
var rowRedactor = redact.New(redact.Options{})

// RedactRun returns run with the secrets of its text (model name,
// operation kind, assistant id, stop reason, the model names of
// token_usage_by_model), metadata and kwargs replaced by the redact
// package's markers: a run row keeps nothing that an event could not.
// Models whose names redact alike have their counts added. Metadata or
// kwargs that are not JSON are VALIDATION_FAILED at /metadata or
// /kwargs. Every run row a store is given passes through it: the thread
// API's and the DeerFlow import's.
func RedactRun(run runevents.ThreadRun) (runevents.ThreadRun, error) {
	run.ModelName = redact.Text(run.ModelName)
	run.OperationKind = redact.Text(run.OperationKind)
	if len(run.Usage.ByModel) > 0 {
		byModel := make(map[string]runevents.ModelUsage, len(run.Usage.ByModel))
		for model, u := range run.Usage.ByModel {
			model = redact.Text(model)
			sum := byModel[model]
			sum.InputTokens += u.InputTokens
			sum.OutputTokens += u.OutputTokens
			sum.TotalTokens += u.TotalTokens
			byModel[model] = sum
		}
		run.Usage.ByModel = byModel
	}
	if len(run.Metadata) > 0 {
		meta, _, err := rowRedactor.JSON(run.Metadata)
		if err != nil {
			return run, Problem("/metadata", "must be an object")
		}
		run.Metadata = meta
	}
	if len(run.Kwargs) > 0 {
		kwargs, _, err := rowRedactor.JSON(run.Kwargs)
		if err != nil {
			return run, Problem("/kwargs", "must be an object")
		}
		run.Kwargs = kwargs
	}
	run.AssistantID = redact.Text(run.AssistantID)
	run.StopReason = redact.Text(run.StopReason)
	return run, nil
}

// RedactFeedback returns f with the secrets of its comment, message id and of a
// rating string replaced by the redact package's markers; a rating that
// is not JSON is INVALID_ARGUMENT. Every feedback a store is given passes
// through it: the thread API's and the DeerFlow import's.
func RedactFeedback(f runevents.Feedback) (runevents.Feedback, error) {
	f.Comment = redact.Text(f.Comment)
	f.MessageID = redact.Text(f.MessageID) // a key too, but nothing secret is kept
	rating, _, err := rowRedactor.JSON(f.Rating)
	if err != nil {
		return f, runstream.Wrap(err, runstream.CodeInvalidArgument, "feedback rating must be a JSON number or string").WithDetail("field", "rating")
	}
	f.Rating = rating
	return f, nil
}

func validLabel(s string) bool {
	return s != "" && utf8.RuneCountInString(s) <= maxOperationKind && !strings.ContainsFunc(s, runevents.IsControl)
}

// Problem is VALIDATION_FAILED for a member of a request (at path, a JSON
// pointer; empty: the whole) that breaks a rule, with details.problems.
func Problem(path, msg string) error {
	problem := map[string]string{"path": path, "message": msg}
	where := path
	if where == "" {
		where = "body"
	}
	return runstream.Errorf(runstream.CodeValidationFailed, "%s: %s", where, msg).WithDetail("problems", []map[string]string{problem})
}

// ParseTimestamp reads a date-time member at path: RFC 3339 with a time
// zone, and not the zero time, which the stores read as "now".
func ParseTimestamp(path, value string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, value)
	if err != nil {
		return time.Time{}, Problem(path, "must be an RFC 3339 date-time with a time zone")
	}
	if t.IsZero() {
		return time.Time{}, Problem(path, "must not be 0001-01-01T00:00:00Z, the zero time")
	}
	return t, nil
}
