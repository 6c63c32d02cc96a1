package eventlog_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/runevents"
)

// recorder is an eventlog.Observer that records what it is told.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf(format, args...))
}

func (r *recorder) Checked(kind string, events int, err error) {
	r.add("checked %s %d %v", kind, events, err == nil)
}
func (r *recorder) Redacted(kind, rule string, n int) { r.add("redacted %s %s %d", kind, rule, n) }
func (r *recorder) Appended(kind, op string, events int, _, _ time.Duration, err error) {
	r.add("appended %s %s %d %v", kind, op, events, err == nil)
}
func (r *recorder) Looked(_ time.Duration, err error) { r.add("looked %v", err == nil) }
func (r *recorder) Idempotency(outcome string)        { r.add("idempotency %s", outcome) }
func (r *recorder) RunEntered(status string)          { r.add("entered %s", status) }

// TestObserver: the log reports its checks, the secrets redacted by rule
// (not a marker the producer sent itself), its
// appends, and the outcomes of idempotent appends.
func TestObserver(t *testing.T) {
	env := newThreadEnv(t, eventlog.ThreadLimits{})
	rec := &recorder{}
	env.log.Observer = rec
	ctx := context.Background()
	secret := newEvent("r1", runevents.EventLLMAIResponse,
		`{"type":"ai","content":"use sk-Zx81Qp0Lm2Wv7Rt5Ky3Nb9Hd and [REDACTED:jwt]","tool_calls":[],"additional_kwargs":{"api_key":"k-1234567890abcdef"}}`,
		`{"caller":"lead_agent","usage":{},"latency_ms":5,"llm_call_index":1}`)
	if _, err := env.log.Append(ctx, "u", []runevents.NewEvent{secret}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.log.Append(ctx, "u", []runevents.NewEvent{{ThreadID: "t1", RunID: "r1", EventType: "no.such.type"}}); err == nil {
		t.Fatal("an unknown event type was accepted")
	}
	a := runevents.IdempotentAppend{UserID: "u", Key: "k", RequestHash: []byte{1}, Events: []runevents.NewEvent{aiEvent("r1")},
		Response: func([]runevents.Record, bool) (runevents.IdempotentResponse, error) {
			return runevents.IdempotentResponse{Status: 201, Body: []byte(`{}`)}, nil
		}}
	for range 2 {
		if _, err := env.log.AppendIdempotent(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.log.LookupIdempotent(ctx, "u", "k", []byte{2}); err == nil {
		t.Fatal("a key reused for another request was accepted")
	}
	for _, want := range []string{
		"checked thread 1 true", "redacted thread openai_key 1", "redacted thread key 1",
		"appended thread thread_append 1 true", "checked thread 1 false",
		"appended thread thread_append_idempotent 1 true", "idempotency new", "idempotency replayed",
		"looked false", "idempotency conflict",
	} {
		if !slices.Contains(rec.calls, want) {
			t.Errorf("the observer was not told %q: %q", want, rec.calls)
		}
	}
	for _, c := range rec.calls {
		if c == "redacted thread jwt 1" {
			t.Errorf("a marker the producer sent was counted as a redaction")
		}
	}
}
