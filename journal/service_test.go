package journal_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/runstream/runstream/internal/threadtest"
	"github.com/runstream/runstream/journal"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/threadsvc"
)

func newService(t *testing.T) *threadsvc.Service { return threadtest.Service(t) }

// TestServiceSinkWholeRun runs every kind of callback through the thread
// service, whose event log validates each event against the contract, and
// reads the run back through the consumer projections.
func TestServiceSinkWholeRun(t *testing.T) {
	t.Parallel()
	svc := newService(t)
	ctx := t.Context()
	sink := journal.ServiceSink{Service: svc, User: "alice"}
	base := runevents.ThreadRun{ThreadID: "t1", RunID: "r1", ModelName: "m", AssistantID: "lead_agent",
		Kwargs: json.RawMessage(`{"input":{}}`), MultitaskStrategy: "interrupt", StopReason: "end_turn"}
	j, err := journal.New(sink, journal.Options{ThreadID: "t1", RunID: "r1", ProgressInterval: -1,
		Progress: journal.RunRowProgress(sink, base)})
	if err != nil {
		t.Fatal(err)
	}
	j.ChainStart(ctx, journal.ChainStart{Name: "agent"})
	j.ChatModelStart(ctx, journal.ChatModelStart{CallID: "c1", Prompts: [][]journal.Message{{human("What is 2+2?")}}})
	j.LLMEnd(ctx, journal.LLMEnd{CallID: "c1", Generations: []*journal.Message{{Type: "ai", Content: journal.TextContent(""),
		ToolCalls:     []journal.ToolCall{{ID: "call-1", Name: "calculator", Args: map[string]any{"expr": "2+2"}}},
		UsageMetadata: &journal.Usage{InputTokens: 10, OutputTokens: 5, TotalTokens: 15}, ResponseMetadata: map[string]any{"model_name": "m"}}}})
	tm := toolMessage("call-1", "calculator", "4")
	j.ToolEnd(ctx, journal.ToolEnd{Message: &tm})
	j.LLMError(ctx, "c-x", errors.New("transient"))
	j.ChatModelStart(ctx, journal.ChatModelStart{CallID: "c2", Prompts: [][]journal.Message{{human("What is 2+2?")}}})
	j.LLMEnd(ctx, journal.LLMEnd{CallID: "c2", Generations: []*journal.Message{ai("4", &journal.Usage{InputTokens: 20, OutputTokens: 1, TotalTokens: 21}, "m")}})
	if err := j.RecordMiddleware(ctx, "guardrail", "Guardrail", "after_model", "allow", nil); err != nil {
		t.Fatal(err)
	}
	if err := j.RecordMemoryContext(ctx, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"); err != nil {
		t.Fatal(err)
	}
	j.ChainEnd(ctx, journal.ChainEnd{Outputs: map[string]any{"messages": []any{}}})
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := j.RecordDelivery(ctx, j.Delivery()); err != nil {
		t.Fatal(err)
	}
	if err := j.Complete(ctx, base, runevents.RunSuccess); err != nil {
		t.Fatal(err)
	}

	recs, err := svc.RunEvents(ctx, "alice", runevents.ListEventsParams{ThreadID: "t1", RunID: "r1", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, r := range recs {
		types = append(types, string(r.EventType))
	}
	want := []string{"context:memory", "run.start", "llm.human.input", "llm.ai.response", "llm.tool.result", "llm.error",
		"llm.ai.response", "middleware:guardrail", "run.end", "run.delivery"}
	if len(types) != len(want) {
		t.Fatalf("events %v\nwant   %v", types, want)
	}
	for i := range want {
		if types[i] != want[i] {
			t.Fatalf("events %v\nwant   %v", types, want)
		}
	}
	row, err := svc.GetRun(ctx, "alice", "t1", "r1")
	if err != nil {
		t.Fatal(err)
	}
	if row.Status != runevents.RunSuccess || row.Usage.TotalTokens != 36 || row.Usage.LLMCallCount != 2 {
		t.Errorf("run row = %+v", row)
	}
	if row.MessageCount != 4 || row.AssistantID != "lead_agent" || string(row.Kwargs) != `{"input":{}}` ||
		row.MultitaskStrategy != "interrupt" || row.StopReason != "end_turn" {
		t.Errorf("run row DeerFlow fields = %+v; want message_count 4 and base's assistant_id, kwargs, multitask_strategy, stop_reason", row)
	}
	var meta map[string]any
	_ = json.Unmarshal(row.Metadata, &meta)
	if meta["message_count"] != 4.0 || meta["last_ai_message"] != "4" {
		t.Errorf("run row metadata = %s", row.Metadata)
	}
	usage, err := svc.TokenUsage(ctx, "alice", "t1", false)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(usage)
	var u map[string]any
	_ = json.Unmarshal(raw, &u)
	if u["total_tokens"] != 36.0 {
		t.Errorf("token usage = %s", raw)
	}
}
