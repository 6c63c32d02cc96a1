// Package eino drives a journal.Journal from CloudWeGo Eino: Handler is an
// Eino callbacks.Handler to pass to a graph, chain or agent run
// (compose.WithCallbacks, or react's agent.WithComposeOptions).
//
//   - The outermost Graph, Workflow or Chain is the root chain: its start
//     is run.start, its end run.end (content {"messages": [the output]}
//     when it is a message); every error of a graph or chain is run.error.
//   - A ChatModel start takes a call id, kept in the context Eino hands to
//     its end or error, so concurrent calls never mix up; a streamed output
//     is read to its end on a goroutine of its own and concatenated.
//   - The caller is the context's (WithCaller), "lead_agent" by default.
//   - A Tool end is llm.tool.result with the tool's name and the call id of
//     the tools node (compose.GetToolCallID).
//   - Usage comes from the model callback output's TokenUsage, else the
//     message's ResponseMeta.Usage; the model name from the callback
//     output's config, else Options.ModelName.
package eino

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"

	"github.com/cloudwego/eino/callbacks"
	"github.com/cloudwego/eino/components"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/runstream/runstream/journal"
)

// Options configure a Handler.
type Options struct {
	// ModelName names the model when a callback does not.
	ModelName string
	// Logger receives streamed outputs that could not be read. Defaults to
	// slog.Default().
	Logger *slog.Logger
}

// Handler is an Eino callbacks.Handler writing to one journal. It is safe
// for concurrent use.
type Handler struct {
	j    *journal.Journal
	opts Options
	next atomic.Int64
}

var _ callbacks.Handler = (*Handler)(nil)

// New returns a Handler writing to j.
func New(j *journal.Journal, opts Options) *Handler {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Handler{j: j, opts: opts}
}

type (
	callerKey struct{}
	graphKey  struct{}
	callKey   struct{}
)

// WithCaller returns a context whose model calls are attributed to caller
// ("subagent:research", "middleware:title").
func WithCaller(ctx context.Context, caller string) context.Context {
	return context.WithValue(ctx, callerKey{}, caller)
}

func tags(ctx context.Context) []string {
	if c, ok := ctx.Value(callerKey{}).(string); ok && c != "" {
		return []string{c}
	}
	return nil
}

func isGraph(info *callbacks.RunInfo) bool {
	if info == nil {
		return false
	}
	switch info.Component {
	case compose.ComponentOfGraph, compose.ComponentOfWorkflow, compose.ComponentOfChain:
		return true
	}
	return false
}

func kind(info *callbacks.RunInfo) components.Component {
	if info == nil {
		return ""
	}
	return info.Component
}

// graphFrame marks a context inside a graph; root is true for the
// outermost one.
type graphFrame struct{ root bool }

// OnStart implements callbacks.Handler.
func (h *Handler) OnStart(ctx context.Context, info *callbacks.RunInfo, input callbacks.CallbackInput) context.Context {
	switch {
	case isGraph(info):
		_, inside := ctx.Value(graphKey{}).(graphFrame)
		if !inside {
			h.j.ChainStart(ctx, journal.ChainStart{Name: info.Name, Tags: tags(ctx)})
		}
		return context.WithValue(ctx, graphKey{}, graphFrame{root: !inside})
	case kind(info) == components.ComponentOfChatModel:
		return h.modelStart(ctx, model.ConvCallbackInput(input))
	}
	return ctx
}

func (h *Handler) modelStart(ctx context.Context, in *model.CallbackInput) context.Context {
	id := fmt.Sprintf("eino-%d", h.next.Add(1))
	var prompt []journal.Message
	if in != nil {
		for _, m := range in.Messages {
			if m != nil {
				prompt = append(prompt, Message(m))
			}
		}
	}
	h.j.ChatModelStart(ctx, journal.ChatModelStart{CallID: id, Tags: tags(ctx), Prompts: [][]journal.Message{prompt}})
	return context.WithValue(ctx, callKey{}, id)
}

func callID(ctx context.Context) string {
	id, _ := ctx.Value(callKey{}).(string)
	return id
}

func rootGraph(ctx context.Context) bool {
	f, ok := ctx.Value(graphKey{}).(graphFrame)
	return ok && f.root
}

// OnEnd implements callbacks.Handler.
func (h *Handler) OnEnd(ctx context.Context, info *callbacks.RunInfo, output callbacks.CallbackOutput) context.Context {
	switch {
	case isGraph(info):
		if rootGraph(ctx) {
			h.j.ChainEnd(ctx, journal.ChainEnd{Outputs: outputs(output)})
		}
	case kind(info) == components.ComponentOfChatModel:
		h.modelEnd(ctx, model.ConvCallbackOutput(output))
	case kind(info) == components.ComponentOfTool:
		out := tool.ConvCallbackOutput(output)
		text := ""
		if out != nil {
			text = out.Response
		}
		name := ""
		if info != nil {
			name = info.Name
		}
		m := journal.Message{Type: "tool", Name: name, ToolCallID: compose.GetToolCallID(ctx), Content: journal.TextContent(text), Status: "success"}
		h.j.ToolEnd(ctx, journal.ToolEnd{Message: &m})
	}
	return ctx
}

func outputs(output callbacks.CallbackOutput) any {
	switch o := output.(type) {
	case *schema.Message:
		return map[string]any{"messages": []journal.Message{Message(o)}}
	case []*schema.Message:
		ms := make([]journal.Message, 0, len(o))
		for _, m := range o {
			if m != nil {
				ms = append(ms, Message(m))
			}
		}
		return map[string]any{"messages": ms}
	}
	if _, err := json.Marshal(output); err != nil {
		return fmt.Sprint(output)
	}
	return output
}

func (h *Handler) modelEnd(ctx context.Context, out *model.CallbackOutput) {
	var gens []*journal.Message
	if out != nil && out.Message != nil {
		m := Message(out.Message)
		usage := out.TokenUsage
		if usage == nil && out.Message.ResponseMeta != nil && out.Message.ResponseMeta.Usage != nil {
			u := out.Message.ResponseMeta.Usage
			usage = &model.TokenUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
				PromptTokenDetails: model.PromptTokenDetails{CachedTokens: u.PromptTokenDetails.CachedTokens}}
		}
		if usage != nil {
			m.UsageMetadata = &journal.Usage{InputTokens: int64(usage.PromptTokens), OutputTokens: int64(usage.CompletionTokens), TotalTokens: int64(usage.TotalTokens)}
			if usage.PromptTokenDetails.CachedTokens > 0 {
				m.UsageMetadata.InputTokenDetails = &journal.TokenDetails{CacheRead: int64(usage.PromptTokenDetails.CachedTokens)}
			}
		}
		name := h.opts.ModelName
		if out.Config != nil && out.Config.Model != "" {
			name = out.Config.Model
		}
		if name != "" {
			if m.ResponseMetadata == nil {
				m.ResponseMetadata = map[string]any{}
			}
			m.ResponseMetadata["model_name"] = name
		}
		gens = append(gens, &m)
	} else {
		gens = append(gens, nil)
	}
	h.j.LLMEnd(ctx, journal.LLMEnd{CallID: callID(ctx), Tags: tags(ctx), Generations: gens})
}

// OnError implements callbacks.Handler.
func (h *Handler) OnError(ctx context.Context, info *callbacks.RunInfo, err error) context.Context {
	switch {
	case isGraph(info):
		parent := ""
		if !rootGraph(ctx) {
			parent = "nested"
		}
		h.j.ChainError(ctx, journal.ChainError{ParentID: parent, Err: err})
	case kind(info) == components.ComponentOfChatModel:
		h.j.LLMError(ctx, callID(ctx), err)
	}
	return ctx
}

// OnStartWithStreamInput implements callbacks.Handler: a streamed input is
// closed unread, except a chat model's, which is read for the prompt.
func (h *Handler) OnStartWithStreamInput(ctx context.Context, info *callbacks.RunInfo, input *schema.StreamReader[callbacks.CallbackInput]) context.Context {
	defer input.Close()
	if isGraph(info) {
		return h.OnStart(ctx, info, nil)
	}
	return ctx
}

// OnEndWithStreamOutput implements callbacks.Handler: a chat model's
// streamed output is read to its end on a goroutine of its own, its chunks
// concatenated into one message; other streams are closed unread.
func (h *Handler) OnEndWithStreamOutput(ctx context.Context, info *callbacks.RunInfo, output *schema.StreamReader[callbacks.CallbackOutput]) context.Context {
	if kind(info) != components.ComponentOfChatModel {
		output.Close()
		if isGraph(info) && rootGraph(ctx) {
			h.j.ChainEnd(ctx, journal.ChainEnd{Outputs: "streamed"})
		}
		return ctx
	}
	go func() {
		defer output.Close()
		var msgs []*schema.Message
		var last *model.CallbackOutput
		for {
			chunk, err := output.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				h.j.LLMError(ctx, callID(ctx), err)
				return
			}
			out := model.ConvCallbackOutput(chunk)
			if out == nil {
				continue
			}
			if out.Message != nil {
				msgs = append(msgs, out.Message)
			}
			if out.TokenUsage != nil || out.Config != nil {
				last = out
			}
		}
		full := &model.CallbackOutput{}
		if len(msgs) > 0 {
			m, err := schema.ConcatMessages(msgs)
			if err != nil {
				h.opts.Logger.Warn("eino: streamed model output not concatenated", "err", err)
				return
			}
			full.Message = m
		}
		if last != nil {
			full.TokenUsage, full.Config = last.TokenUsage, last.Config
		}
		h.modelEnd(ctx, full)
	}()
	return ctx
}

// Message converts an Eino message to the journal's: user → human,
// assistant → ai; tool calls with their JSON arguments decoded.
func Message(m *schema.Message) journal.Message {
	out := journal.Message{Type: string(m.Role), Name: m.Name, ToolCallID: m.ToolCallID, Content: journal.TextContent(m.Content)}
	switch m.Role {
	case schema.User:
		out.Type = "human"
	case schema.Assistant:
		out.Type = "ai"
	case schema.Tool:
		if m.ToolName != "" {
			out.Name = m.ToolName
		}
	}
	for _, tc := range m.ToolCalls {
		var args any = tc.Function.Arguments
		var v any
		if json.Unmarshal([]byte(tc.Function.Arguments), &v) == nil {
			args = v
		}
		out.ToolCalls = append(out.ToolCalls, journal.ToolCall{ID: tc.ID, Name: tc.Function.Name, Args: args, Type: "tool_call"})
	}
	if m.ResponseMeta != nil && m.ResponseMeta.FinishReason != "" {
		out.ResponseMetadata = map[string]any{"finish_reason": m.ResponseMeta.FinishReason}
	}
	return out
}
