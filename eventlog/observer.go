package eventlog

import (
	"encoding/json"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/redact"
)

// Kinds of logs, as the Observer names them.
const (
	KindThread   = "thread"
	KindWorkflow = "workflow"
)

// Observer is told what the logs do, for metrics. kind is KindThread or
// KindWorkflow. Its methods are called on the appenders' goroutines and
// must be quick. A nil Observer field observes nothing.
type Observer interface {
	// Checked is called once a batch of events was checked against the
	// contract and the limits, and redacted: err is nil when it was
	// accepted, else the refusal (a *runstream.Error).
	Checked(kind string, events int, err error)
	// Redacted is called for each event field redaction changed: n
	// secrets of rule (one of redact.Rules, or "hidden_reasoning" for
	// dropped reasoning) were removed.
	Redacted(kind, rule string, n int)
	// Appended is called after each call to the store: op names it
	// ("thread_append", "workflow_append", …), events is the number of
	// events it stored, prepare the time spent checking and redacting,
	// store the time of the store call, err its error.
	Appended(kind, op string, events int, prepare, store time.Duration, err error)
	// Looked is called after a store lookup of an idempotency key
	// (LookupIdempotent) that took elapsed and failed with err (nil: it
	// succeeded).
	Looked(elapsed time.Duration, err error)
	// Idempotency is called with the outcome of an append or a lookup
	// under an idempotency key: "new", "replayed", "conflict" (the key
	// was used for another request) or "unavailable" (a request under the key
	// is in progress, or the store is unavailable).
	Idempotency(outcome string)
	// RunEntered is called for each committed workflow event that moves a
	// run to a status (workflow.StatusAfter).
	RunEntered(status string)
}

type nopObserver struct{}

func (nopObserver) Checked(string, int, error)                                        {}
func (nopObserver) Redacted(string, string, int)                                      {}
func (nopObserver) Appended(string, string, int, time.Duration, time.Duration, error) {}
func (nopObserver) Looked(time.Duration, error)                                       {}
func (nopObserver) Idempotency(string)                                                {}
func (nopObserver) RunEntered(string)                                                 {}

// observerOr returns o, or an Observer that observes nothing.
func observerOr(o Observer) Observer {
	if o == nil {
		return nopObserver{}
	}
	return o
}

// redactJSON redacts raw with r and reports to o, by rule, what was
// removed: the markers redaction added, or hidden reasoning when it
// changed raw without adding any.
func redactJSON(r *redact.Redactor, o Observer, kind string, raw json.RawMessage) (json.RawMessage, error) {
	out, changed, err := r.JSON(raw)
	if err != nil || !changed {
		return out, err
	}
	observeRedaction(o, kind, string(raw), string(out))
	return out, nil
}

// observeRedaction tells o what redacting raw into out removed: the
// markers it added, by rule, or hidden reasoning when it added none.
func observeRedaction(o Observer, kind, raw, out string) {
	before := redact.CountMarkers(raw)
	added := 0
	for rule, n := range redact.CountMarkers(out) {
		if n -= before[rule]; n > 0 {
			o.Redacted(kind, rule, n)
			added += n
		}
	}
	if added == 0 {
		o.Redacted(kind, "hidden_reasoning", 1)
	}
}

// idempotencyOutcome names a failed idempotent call's outcome, or ""
// when the error is not about the key.
func idempotencyOutcome(err error) string {
	switch runstream.ErrorCodeOf(err) {
	case runstream.CodeValidationFailed:
		return "conflict"
	case runstream.CodeUnavailable:
		return "unavailable"
	}
	return ""
}
