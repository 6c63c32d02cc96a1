package threadsvc_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/threadsvc"
)

func aiRow(run, caller, model string, in, out int) runevents.NewEvent {
	content := `{"type":"ai","content":"answer","tool_calls":[]}`
	if model != "" {
		content = `{"type":"ai","content":"answer","tool_calls":[],"response_metadata":{"model_name":"` + model + `"}}`
	}
	return runevents.NewEvent{ThreadID: "t1", RunID: run, EventType: runevents.EventLLMAIResponse, Content: json.RawMessage(content),
		Metadata: json.RawMessage(fmt.Sprintf(`{"caller":%q,"usage":{"input_tokens":%d,"output_tokens":%d},"latency_ms":5,"llm_call_index":1}`, caller, in, out))}
}

// context_usage is read from the last lead AI message's usage and its
// model's window: the message's model, else its run's; a window matches
// the models it prefixes; an unknown model has no window.
func TestContextUsage(t *testing.T) {
	t.Parallel()
	validator, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	events, runs := memory.NewRunEventStore(), memory.NewRunStore()
	log := eventlog.NewThreadLog(events, validator, live.New(live.Config{}), eventlog.ThreadLimits{})
	svc := threadsvc.New(events, events, runs, log, nil, threadsvc.Config{ContextWindows: map[string]int64{"gpt-4o": 128000, "house-model": 2000}})
	ctx := t.Context()
	usage := func() string {
		t.Helper()
		u, err := svc.TokenUsage(ctx, "alice", "t1", false)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(u.ContextUsage)
		return string(b)
	}
	if got := usage(); got != "null" {
		t.Errorf("no AI message: %s, want null", got)
	}
	if _, err := runs.PutRun(ctx, runevents.ThreadRun{ThreadID: "t1", RunID: "r1", OwnerID: "alice", Status: runevents.RunSuccess, ModelName: "house-model"}); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		event runevents.NewEvent
		want  string
	}{
		{aiRow("r1", "lead_agent", "gpt-4o-2024-08-06", 1000, 280), `{"token_count":1280,"max_context_tokens":128000,"percentage":1}`},
		{aiRow("r1", "lead_agent", "", 1200, 100), `{"token_count":1300,"max_context_tokens":2000,"percentage":65}`},
		{aiRow("r1", "middleware:title", "gpt-4o", 10, 5), `{"token_count":1300,"max_context_tokens":2000,"percentage":65}`},
		{aiRow("r1", "subagent:research", "gpt-4o", 10, 5), `{"token_count":1300,"max_context_tokens":2000,"percentage":65}`},
		{aiRow("r2", "lead_agent", "mystery-1", 333, 0), `{"token_count":333,"max_context_tokens":null,"percentage":null}`},
	} {
		if _, err := svc.Append(ctx, "alice", "t1", []runevents.NewEvent{step.event}); err != nil {
			t.Fatal(err)
		}
		if got := usage(); got != step.want {
			t.Errorf("after %s: %s, want %s", step.event.Metadata, got, step.want)
		}
	}
}

func TestParseContextWindow(t *testing.T) {
	t.Parallel()
	if model, n, err := threadsvc.ParseContextWindow(" qwen-max = 32768 "); err != nil || model != "qwen-max" || n != 32768 {
		t.Errorf("ParseContextWindow = %q, %d, %v", model, n, err)
	}
	for _, bad := range []string{"qwen-max", "=5", "m=0", "m=-3", "m=x"} {
		if _, _, err := threadsvc.ParseContextWindow(bad); err == nil {
			t.Errorf("ParseContextWindow(%q) accepted", bad)
		}
	}
}
