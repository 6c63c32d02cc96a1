package langchaingo_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/callbacks"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/tools"

	"github.com/runstream/runstream/journal"
	"github.com/runstream/runstream/journal/langchaingo"
	"github.com/runstream/runstream/runevents"
)

// scriptedModel answers with its script in order and reports each call to
// its callbacks handler as LangChainGo's providers do.
type scriptedModel struct {
	callbacks.Handler
	mu     sync.Mutex
	script []string
	prompt [][]llms.MessageContent
}

func (m *scriptedModel) GenerateContent(ctx context.Context, ms []llms.MessageContent, _ ...llms.CallOption) (*llms.ContentResponse, error) {
	m.Handler.HandleLLMGenerateContentStart(ctx, ms)
	m.mu.Lock()
	m.prompt = append(m.prompt, ms)
	if len(m.script) == 0 {
		m.mu.Unlock()
		err := errors.New("script exhausted")
		m.Handler.HandleLLMError(ctx, err)
		return nil, err
	}
	text := m.script[0]
	m.script = m.script[1:]
	m.mu.Unlock()
	res := &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: text, StopReason: "stop",
		GenerationInfo: map[string]any{"PromptTokens": 10, "CompletionTokens": 5, "TotalTokens": 15}}}}
	m.Handler.HandleLLMGenerateContentEnd(ctx, res)
	return res, nil
}

func (m *scriptedModel) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, m, prompt, options...)
}

// adder is a tool that reports its calls to its handler, as LangChainGo's
// tools do.
type adder struct{ callbacks.Handler }

func (adder) Name() string        { return "adder" }
func (adder) Description() string { return "adds two numbers written as a+b" }
func (a adder) Call(ctx context.Context, input string) (string, error) {
	a.Handler.HandleToolStart(ctx, input)
	out := "4"
	a.Handler.HandleToolEnd(ctx, out)
	return out, nil
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

func TestOneShotAgent(t *testing.T) {
	t.Parallel()
	out := &sink{}
	j, err := journal.New(out, journal.Options{ThreadID: "t1", RunID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	h := langchaingo.New(j, langchaingo.Options{ModelName: "scripted"})
	model := &scriptedModel{Handler: h, script: []string{
		"Thought: I should add.\nAction: adder\nAction Input: 2+2",
		"Thought: I know the answer.\nFinal Answer: 2+2 is 4",
	}}
	agent := agents.NewOneShotAgent(model, []tools.Tool{adder{h}}, agents.WithCallbacksHandler(h))
	executor := agents.NewExecutor(agent, agents.WithCallbacksHandler(h))
	answer, err := chains.Run(t.Context(), executor, "What is 2+2?")
	if err != nil {
		t.Fatal(err)
	}
	if answer != "2+2 is 4" {
		t.Fatalf("answer = %q", answer)
	}
	if err := j.Flush(t.Context()); err != nil {
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
	meta := func(i int) map[string]any {
		var m map[string]any
		_ = json.Unmarshal(out.events[i].Metadata, &m)
		return m
	}
	if m := meta(2); m["llm_call_index"] != 1.0 || m["caller"] != "lead_agent" || m["latency_ms"] == nil {
		t.Errorf("first response metadata = %v", m)
	}
	if m := meta(4); m["llm_call_index"] != 2.0 {
		t.Errorf("second response metadata = %v", m)
	}
	var tool struct {
		Name    string `json:"name"`
		Content string `json:"content"`
	}
	_ = json.Unmarshal(out.events[3].Content, &tool)
	if tool.Name != "adder" || tool.Content != "4" {
		t.Errorf("tool result = %s", out.events[3].Content)
	}
	var human struct {
		Content string `json:"content"`
	}
	_ = json.Unmarshal(out.events[1].Content, &human)
	if human.Content == "" {
		t.Errorf("human input = %s", out.events[1].Content)
	}
	s := j.Summary()
	if s.TotalTokens != 30 || s.LLMCallCount != 2 || s.ByModel["scripted"].TotalTokens != 30 || s.LastAIMessage == "" {
		t.Errorf("summary = %+v", s)
	}
}

func TestCallerAndErrors(t *testing.T) {
	t.Parallel()
	out := &sink{}
	j, err := journal.New(out, journal.Options{ThreadID: "t1", RunID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	h := langchaingo.New(j, langchaingo.Options{})
	model := &scriptedModel{Handler: h, script: []string{"Title: Adding"}}
	ctx := langchaingo.WithCaller(t.Context(), "middleware:title")
	if _, err := model.Call(ctx, "Name this conversation"); err != nil {
		t.Fatal(err)
	}
	if _, err := model.Call(t.Context(), "again"); err == nil {
		t.Fatal("exhausted script answered")
	}
	if err := j.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(out.events) != 3 || out.events[0].EventType != runevents.EventLLMAIResponse ||
		out.events[1].EventType != runevents.EventLLMHumanInput || out.events[2].EventType != runevents.EventLLMError {
		t.Fatalf("events = %v", out.events)
	}
	var m map[string]any
	_ = json.Unmarshal(out.events[0].Metadata, &m)
	if m["caller"] != "middleware:title" {
		t.Errorf("caller = %v", m["caller"])
	}
	if s := j.Summary(); s.MiddlewareTokens != 15 || s.FirstHumanMessage != "again" {
		t.Errorf("summary = %+v (a middleware prompt is no human input, a lead prompt is)", s)
	}
}
