package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/schema"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// scripted is an offline model: it answers with its script, in order.
type scripted struct {
	name   string
	mu     sync.Mutex
	script []*schema.Message
}

func (m *scripted) Generate(ctx context.Context, in []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.script) == 0 {
		return nil, errors.New("the scripted model has no answer left")
	}
	out := m.script[0]
	m.script = m.script[1:]
	return out, nil
}

func (m *scripted) Stream(ctx context.Context, in []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	out, err := m.Generate(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{out}), nil
}

func (m *scripted) WithTools([]*schema.ToolInfo) (model.ToolCallingChatModel, error) { return m, nil }

func call(id, name, args string) schema.ToolCall {
	return schema.ToolCall{ID: id, Type: "function", Function: schema.FunctionCall{Name: name, Arguments: args}}
}

func meta(in, out int) *schema.ResponseMeta {
	return &schema.ResponseMeta{FinishReason: "stop", Usage: &schema.TokenUsage{PromptTokens: in, CompletionTokens: out, TotalTokens: in + out}}
}

// leadScript and researchScript are what the offline models answer.
func leadScript() *scripted {
	return &scripted{name: "scripted-lead", script: []*schema.Message{
		{Role: schema.Assistant, Content: "I will ask a researcher first.", ResponseMeta: meta(120, 30),
			ToolCalls: []schema.ToolCall{call("call-task-1", "task", `{"description":"Summarise the notes","prompt":"Read workspace/notes.txt and summarise it."}`)}},
		{Role: schema.Assistant, ResponseMeta: meta(200, 40),
			ToolCalls: []schema.ToolCall{call("call-write-1", "write_file", `{"path":"outputs/report.md","content":"# Report\n\nThe notes list three steps: plan, build, ship.\n"}`),
				call("call-write-2", "write_file", `{"path":"workspace/notes.txt","content":"plan\nbuild\nship\nreviewed\n"}`)}},
		{Role: schema.Assistant, Content: "The report is in outputs/report.md.", ResponseMeta: meta(260, 12)},
	}}
}

func researchScript() *scripted {
	return &scripted{name: "scripted-research", script: []*schema.Message{
		{Role: schema.Assistant, ResponseMeta: meta(50, 10), ToolCalls: []schema.ToolCall{call("call-read-1", "read_file", `{"path":"workspace/notes.txt"}`)}},
		{Role: schema.Assistant, Content: "The notes list three steps: plan, build, ship.", ResponseMeta: meta(80, 15)},
	}}
}

// openAIModel is an OpenAI-compatible chat model (OPENAI_BASE_URL,
// OPENAI_API_KEY, OPENAI_MODEL).
type openAIModel struct {
	client openai.ChatCompletionService
	name   string
	tools  []openai.ChatCompletionToolUnionParam
}

func newOpenAI(baseURL, key, name string) *openAIModel {
	opts := []option.RequestOption{option.WithAPIKey(key)}
	if baseURL != "" {
		opts = append(opts, option.WithBaseURL(baseURL))
	}
	return &openAIModel{client: openai.NewChatCompletionService(opts...), name: name}
}

func (m *openAIModel) WithTools(infos []*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	c := *m
	c.tools = nil
	for _, info := range infos {
		s, err := info.ParamsOneOf.ToJSONSchema()
		if err != nil {
			return nil, err
		}
		raw, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		var params shared.FunctionParameters
		if err := json.Unmarshal(raw, &params); err != nil {
			return nil, err
		}
		c.tools = append(c.tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: info.Name, Description: openai.String(info.Desc), Parameters: params}))
	}
	return &c, nil
}

func (m *openAIModel) Generate(ctx context.Context, in []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	params := openai.ChatCompletionNewParams{Model: m.name, Tools: m.tools}
	for _, msg := range in {
		switch msg.Role {
		case schema.System:
			params.Messages = append(params.Messages, openai.SystemMessage(msg.Content))
		case schema.User:
			params.Messages = append(params.Messages, openai.UserMessage(msg.Content))
		case schema.Tool:
			params.Messages = append(params.Messages, openai.ToolMessage(msg.Content, msg.ToolCallID))
		case schema.Assistant:
			a := openai.ChatCompletionAssistantMessageParam{}
			if msg.Content != "" {
				a.Content.OfString = openai.String(msg.Content)
			}
			for _, tc := range msg.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Function.Name, Arguments: tc.Function.Arguments}}})
			}
			params.Messages = append(params.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		}
	}
	resp, err := m.client.New(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	if len(resp.Choices) == 0 {
		return nil, errors.New("openai: no choice in the answer")
	}
	c := resp.Choices[0]
	out := &schema.Message{Role: schema.Assistant, Content: c.Message.Content,
		ResponseMeta: &schema.ResponseMeta{FinishReason: c.FinishReason, Usage: &schema.TokenUsage{
			PromptTokens: int(resp.Usage.PromptTokens), CompletionTokens: int(resp.Usage.CompletionTokens), TotalTokens: int(resp.Usage.TotalTokens)}}}
	for _, tc := range c.Message.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, call(tc.ID, tc.Function.Name, tc.Function.Arguments))
	}
	return out, nil
}

func (m *openAIModel) Stream(ctx context.Context, in []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	out, err := m.Generate(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{out}), nil
}
