package eino_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"

	"github.com/runstream/runstream/journal"
	"github.com/runstream/runstream/journal/eino"
	"github.com/runstream/runstream/runevents"
)

// scriptedModel answers with its script in order.
type scriptedModel struct {
	mu     sync.Mutex
	script []*schema.Message
}

func (m *scriptedModel) Generate(ctx context.Context, in []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.script) == 0 {
		return nil, errors.New("script exhausted")
	}
	out := m.script[0]
	m.script = m.script[1:]
	return out, nil
}

func (m *scriptedModel) Stream(ctx context.Context, in []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	out, err := m.Generate(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{out}), nil
}

func (m *scriptedModel) WithTools([]*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	return m, nil
}

type adder struct{}

func (adder) Info(context.Context) (*schema.ToolInfo, error) {
	return &schema.ToolInfo{Name: "adder", Desc: "adds a and b"}, nil
}

func (adder) InvokableRun(ctx context.Context, args string, _ ...tool.Option) (string, error) {
	var in struct{ A, B int }
	if err := json.Unmarshal([]byte(args), &in); err != nil {
		return "", err
	}
	out, _ := json.Marshal(in.A + in.B)
	return string(out), nil
}

type sink struct {
	mu     sync.Mutex
	events []runevents.NewEvent
}

func (s *sink) Append(ctx context.Context, events []runevents.NewEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, events...)
	return nil
}
func (s *sink) AppendIfAbsent(ctx context.Context, e runevents.NewEvent) (bool, error) {
	return true, s.Append(ctx, []runevents.NewEvent{e})
}
func (s *sink) PutRun(ctx context.Context, run runevents.ThreadRun) error { return nil }

func usage(total int) *schema.ResponseMeta {
	return &schema.ResponseMeta{FinishReason: "stop", Usage: &schema.TokenUsage{PromptTokens: total - 5, CompletionTokens: 5, TotalTokens: total}}
}

func TestReactAgent(t *testing.T) {
	t.Parallel()
	out := &sink{}
	j, err := journal.New(out, journal.Options{ThreadID: "t1", RunID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	h := eino.New(j, eino.Options{ModelName: "scripted"})
	llm := &scriptedModel{script: []*schema.Message{
		{Role: schema.Assistant, ToolCalls: []schema.ToolCall{{ID: "call-1", Type: "function",
			Function: schema.FunctionCall{Name: "adder", Arguments: `{"a":2,"b":2}`}}}, ResponseMeta: usage(15)},
		{Role: schema.Assistant, Content: "2+2 is 4", ResponseMeta: usage(30)},
	}}
	ctx := t.Context()
	a, err := react.NewAgent(ctx, &react.AgentConfig{ToolCallingModel: llm, ToolsConfig: compose.ToolsNodeConfig{Tools: []tool.BaseTool{adder{}}}})
	if err != nil {
		t.Fatal(err)
	}
	answer, err := a.Generate(ctx, []*schema.Message{schema.UserMessage("What is 2+2?")}, agent.WithComposeOptions(compose.WithCallbacks(h)))
	if err != nil {
		t.Fatal(err)
	}
	if answer.Content != "2+2 is 4" {
		t.Fatalf("answer = %q", answer.Content)
	}
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var types []runevents.EventType
	for _, e := range out.events {
		types = append(types, e.EventType)
	}
	want := []runevents.EventType{runevents.EventRunStart, runevents.EventLLMHumanInput, runevents.EventLLMAIResponse,
		runevents.EventLLMToolResult, runevents.EventLLMAIResponse, runevents.EventRunEnd}
	if !slices.Equal(types, want) {
		t.Fatalf("events %v\nwant   %v", types, want)
	}
	var human, call, result, final map[string]any
	_ = json.Unmarshal(out.events[1].Content, &human)
	_ = json.Unmarshal(out.events[2].Content, &call)
	_ = json.Unmarshal(out.events[3].Content, &result)
	_ = json.Unmarshal(out.events[4].Content, &final)
	if human["content"] != "What is 2+2?" || human["type"] != "human" {
		t.Errorf("human input = %v", human)
	}
	calls, _ := call["tool_calls"].([]any)
	if len(calls) != 1 || calls[0].(map[string]any)["id"] != "call-1" || calls[0].(map[string]any)["args"].(map[string]any)["a"] != 2.0 {
		t.Errorf("tool call = %v", call)
	}
	if result["tool_call_id"] != "call-1" || result["name"] != "adder" || result["content"] != "4" {
		t.Errorf("tool result = %v", result)
	}
	if final["content"] != "2+2 is 4" {
		t.Errorf("final = %v", final)
	}
	var meta map[string]any
	_ = json.Unmarshal(out.events[4].Metadata, &meta)
	if meta["llm_call_index"] != 2.0 || meta["caller"] != "lead_agent" {
		t.Errorf("final metadata = %v", meta)
	}
	s := j.Summary()
	if s.TotalTokens != 45 || s.LLMCallCount != 2 || s.ByModel["scripted"].TotalTokens != 45 || s.LastAIMessage != "2+2 is 4" || s.MessageCount != 4 {
		t.Errorf("summary = %+v", s)
	}
}

func TestStreamedModelAndError(t *testing.T) {
	t.Parallel()
	out := &sink{}
	j, err := journal.New(out, journal.Options{ThreadID: "t1", RunID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	h := eino.New(j, eino.Options{})
	llm := &scriptedModel{script: []*schema.Message{{Role: schema.Assistant, Content: "streamed", ResponseMeta: usage(15)}}}
	chain := compose.NewChain[[]*schema.Message, *schema.Message]()
	chain.AppendChatModel(llm)
	run, err := chain.Compile(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx := eino.WithCaller(t.Context(), "subagent:research")
	stream, err := run.Stream(ctx, []*schema.Message{schema.UserMessage("hi")}, compose.WithCallbacks(h))
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := stream.Recv(); err != nil {
			break
		}
	}
	stream.Close()
	if _, err := run.Invoke(ctx, []*schema.Message{schema.UserMessage("again")}, compose.WithCallbacks(h)); err == nil {
		t.Fatal("exhausted script answered")
	}
	deadline := 0
	for j.Summary().SubagentTokens != 15 && deadline < 1000 {
		j.Wait()
		deadline++
		waitALittle()
	}
	if err := j.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	var types []runevents.EventType
	for _, e := range out.events {
		types = append(types, e.EventType)
	}
	if !slices.Contains(types, runevents.EventLLMAIResponse) || !slices.Contains(types, runevents.EventLLMError) || !slices.Contains(types, runevents.EventRunError) {
		t.Fatalf("events = %v", types)
	}
	if slices.Contains(types, runevents.EventLLMHumanInput) {
		t.Errorf("a subagent prompt was recorded as human input: %v", types)
	}
	if s := j.Summary(); s.SubagentTokens != 15 {
		t.Errorf("summary = %+v", s)
	}
}

func waitALittle() { <-time.After(time.Millisecond) }
