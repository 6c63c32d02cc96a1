// Package langchaingo drives a journal.Journal from LangChainGo: Handler
// is a callbacks.Handler to give to an agent executor, a chain, a model and
// tools (their WithCallbacksHandler options / CallbacksHandler fields).
//
// LangChainGo's callbacks carry no call ids, parent ids or tags, so the
// Handler derives them:
//
//   - The chain depth tells a root chain: the outermost HandleChainStart
//     is run.start and its HandleChainEnd run.end; every chain error is
//     run.error, as in the original.
//   - A model call is a HandleLLMGenerateContentStart matched, first in
//     first out, with the next HandleLLMGenerateContentEnd or
//     HandleLLMError; its call id is the Handler's own counter. Calls of
//     one Handler must therefore not overlap (an agent's are sequential).
//   - The caller is the context's (WithCaller), "lead_agent" by default.
//   - A tool result is matched with the latest HandleAgentAction, whose
//     tool name and id it carries; a tool error forgets that action.
//   - Usage comes from each choice's GenerationInfo: PromptTokens,
//     CompletionTokens, TotalTokens (OpenAI and compatible providers) or
//     InputTokens, OutputTokens; the model name from GenerationInfo "model"
//     else Options.ModelName.
package langchaingo

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/tmc/langchaingo/callbacks"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"

	"github.com/runstream/runstream/journal"
)

// Options configure a Handler.
type Options struct {
	// ChainName is run.start's chain name. Defaults to "agent".
	ChainName string
	// ModelName names the model when a response does not.
	ModelName string
}

// Handler is a LangChainGo callbacks.Handler writing to one journal. It is
// safe for concurrent use.
type Handler struct {
	j    *journal.Journal
	opts Options

	mu      sync.Mutex
	depth   int
	next    int
	calls   []string // model calls started and not ended, oldest first
	actions []schema.AgentAction
}

var _ callbacks.Handler = (*Handler)(nil)

// New returns a Handler writing to j.
func New(j *journal.Journal, opts Options) *Handler {
	if opts.ChainName == "" {
		opts.ChainName = "agent"
	}
	return &Handler{j: j, opts: opts}
}

type callerKey struct{}

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

// HandleChainStart implements callbacks.Handler.
func (h *Handler) HandleChainStart(ctx context.Context, inputs map[string]any) {
	h.mu.Lock()
	h.depth++
	root := h.depth == 1
	h.mu.Unlock()
	if root {
		h.j.ChainStart(ctx, journal.ChainStart{Name: h.opts.ChainName, Tags: tags(ctx)})
	}
}

// HandleChainEnd implements callbacks.Handler.
func (h *Handler) HandleChainEnd(ctx context.Context, outputs map[string]any) {
	if h.leave() {
		h.j.ChainEnd(ctx, journal.ChainEnd{Outputs: jsonable(outputs)})
	}
}

// HandleChainError implements callbacks.Handler.
func (h *Handler) HandleChainError(ctx context.Context, err error) {
	root := h.leave()
	parent := ""
	if !root {
		parent = "nested"
	}
	h.j.ChainError(ctx, journal.ChainError{ParentID: parent, Err: err})
}

// leave ends a chain and reports whether it was the root.
func (h *Handler) leave() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.depth > 0 {
		h.depth--
	}
	return h.depth == 0
}

// jsonable returns v when it encodes as JSON, else its text form, so that
// run.end always has content.
func jsonable(v map[string]any) any {
	if _, err := json.Marshal(v); err != nil {
		return fmt.Sprint(v)
	}
	return v
}

// HandleLLMGenerateContentStart implements callbacks.Handler.
func (h *Handler) HandleLLMGenerateContentStart(ctx context.Context, ms []llms.MessageContent) {
	h.mu.Lock()
	h.next++
	id := fmt.Sprintf("lc-%d", h.next)
	h.calls = append(h.calls, id)
	h.mu.Unlock()
	prompt := make([]journal.Message, 0, len(ms))
	for _, m := range ms {
		prompt = append(prompt, Message(m))
	}
	h.j.ChatModelStart(ctx, journal.ChatModelStart{CallID: id, Tags: tags(ctx), Prompts: [][]journal.Message{prompt}})
}

func (h *Handler) popCall() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.calls) == 0 {
		h.next++
		return fmt.Sprintf("lc-%d", h.next)
	}
	id := h.calls[0]
	h.calls = h.calls[1:]
	return id
}

// HandleLLMGenerateContentEnd implements callbacks.Handler.
func (h *Handler) HandleLLMGenerateContentEnd(ctx context.Context, res *llms.ContentResponse) {
	id := h.popCall()
	var gens []*journal.Message
	if res != nil {
		for _, c := range res.Choices {
			if c == nil {
				gens = append(gens, nil)
				continue
			}
			gens = append(gens, h.choice(c))
		}
	}
	h.j.LLMEnd(ctx, journal.LLMEnd{CallID: id, Tags: tags(ctx), Generations: gens})
}

// HandleLLMError implements callbacks.Handler.
func (h *Handler) HandleLLMError(ctx context.Context, err error) {
	h.j.LLMError(ctx, h.popCall(), err)
}

func (h *Handler) choice(c *llms.ContentChoice) *journal.Message {
	m := &journal.Message{Type: "ai", Content: journal.TextContent(c.Content)}
	for _, tc := range c.ToolCalls {
		call := journal.ToolCall{ID: tc.ID, Type: "tool_call"}
		if tc.FunctionCall != nil {
			call.Name = tc.FunctionCall.Name
			call.Args = arguments(tc.FunctionCall.Arguments)
		}
		m.ToolCalls = append(m.ToolCalls, call)
	}
	if c.FuncCall != nil && len(c.ToolCalls) == 0 {
		m.ToolCalls = append(m.ToolCalls, journal.ToolCall{Name: c.FuncCall.Name, Args: arguments(c.FuncCall.Arguments), Type: "tool_call"})
	}
	info := c.GenerationInfo
	in, okIn := intOf(info, "PromptTokens", "InputTokens")
	out, okOut := intOf(info, "CompletionTokens", "OutputTokens")
	total, okTotal := intOf(info, "TotalTokens")
	if okIn || okOut || okTotal {
		m.UsageMetadata = &journal.Usage{InputTokens: in, OutputTokens: out, TotalTokens: total}
		if cached, ok := intOf(info, "PromptCachedTokens", "CacheReadInputTokens"); ok && cached > 0 {
			m.UsageMetadata.InputTokenDetails = &journal.TokenDetails{CacheRead: cached}
		}
	}
	model := h.opts.ModelName
	if s, ok := info["model"].(string); ok && s != "" {
		model = s
	}
	if model != "" || c.StopReason != "" {
		m.ResponseMetadata = map[string]any{}
		if model != "" {
			m.ResponseMetadata["model_name"] = model
		}
		if c.StopReason != "" {
			m.ResponseMetadata["finish_reason"] = c.StopReason
		}
	}
	return m
}

// arguments decodes a call's JSON arguments, keeping text that is not
// JSON as is.
func arguments(s string) any {
	var v any
	if json.Unmarshal([]byte(s), &v) == nil {
		return v
	}
	return s
}

func intOf(info map[string]any, keys ...string) (int64, bool) {
	for _, k := range keys {
		switch n := info[k].(type) {
		case int:
			return int64(n), true
		case int32:
			return int64(n), true
		case int64:
			return n, true
		case float64:
			return int64(n), true
		}
	}
	return 0, false
}

// Message converts a LangChainGo message to the journal's: text parts
// become the string content (one part) or text blocks, images image_url
// blocks, tool calls the AI message's calls, a tool call response the
// tool message's content, id and name.
func Message(mc llms.MessageContent) journal.Message {
	m := journal.Message{Type: string(mc.Role)}
	switch mc.Role {
	case llms.ChatMessageTypeGeneric:
		m.Type = "human"
	case llms.ChatMessageTypeFunction:
		m.Type = "tool"
	}
	var blocks []any
	for _, p := range mc.Parts {
		switch part := p.(type) {
		case llms.TextContent:
			blocks = append(blocks, map[string]any{"type": "text", "text": part.Text})
		case llms.ImageURLContent:
			blocks = append(blocks, map[string]any{"type": "image_url", "image_url": map[string]any{"url": part.URL}})
		case llms.BinaryContent:
			blocks = append(blocks, map[string]any{"type": "binary", "mime_type": part.MIMEType})
		case llms.ToolCall:
			call := journal.ToolCall{ID: part.ID, Type: "tool_call"}
			if part.FunctionCall != nil {
				call.Name, call.Args = part.FunctionCall.Name, arguments(part.FunctionCall.Arguments)
			}
			m.ToolCalls = append(m.ToolCalls, call)
		case llms.ToolCallResponse:
			m.ToolCallID, m.Name = part.ToolCallID, part.Name
			blocks = append(blocks, map[string]any{"type": "text", "text": part.Content})
		}
	}
	if len(blocks) == 1 {
		if b := blocks[0].(map[string]any); b["type"] == "text" {
			m.Content = journal.TextContent(b["text"].(string))
			return m
		}
	}
	if len(blocks) == 0 {
		m.Content = journal.TextContent("")
		return m
	}
	m.Content, _ = json.Marshal(blocks)
	return m
}

// HandleAgentAction implements callbacks.Handler: it remembers the tool
// the next tool result belongs to.
func (h *Handler) HandleAgentAction(ctx context.Context, action schema.AgentAction) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.actions = append(h.actions, action)
}

func (h *Handler) popAction() (schema.AgentAction, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.actions) == 0 {
		return schema.AgentAction{}, false
	}
	a := h.actions[0]
	h.actions = h.actions[1:]
	return a, true
}

// HandleToolEnd implements callbacks.Handler: llm.tool.result.
func (h *Handler) HandleToolEnd(ctx context.Context, output string) {
	m := journal.Message{Type: "tool", Content: journal.TextContent(output), Status: "success"}
	if a, ok := h.popAction(); ok {
		m.Name, m.ToolCallID = a.Tool, a.ToolID
	}
	h.j.ToolEnd(ctx, journal.ToolEnd{Message: &m})
}

// HandleToolError implements callbacks.Handler: no event; the action is
// forgotten.
func (h *Handler) HandleToolError(ctx context.Context, err error) { h.popAction() }

// HandleText implements callbacks.Handler; it records nothing.
func (h *Handler) HandleText(ctx context.Context, text string) {}

// HandleLLMStart implements callbacks.Handler; it records nothing (the
// content-generation callbacks carry the calls).
func (h *Handler) HandleLLMStart(ctx context.Context, prompts []string) {}

// HandleToolStart implements callbacks.Handler; it records nothing.
func (h *Handler) HandleToolStart(ctx context.Context, input string) {}

// HandleAgentFinish implements callbacks.Handler; it records nothing.
func (h *Handler) HandleAgentFinish(ctx context.Context, finish schema.AgentFinish) {}

// HandleRetrieverStart implements callbacks.Handler; it records nothing.
func (h *Handler) HandleRetrieverStart(ctx context.Context, query string) {}

// HandleRetrieverEnd implements callbacks.Handler; it records nothing.
func (h *Handler) HandleRetrieverEnd(ctx context.Context, query string, documents []schema.Document) {
}

// HandleStreamingFunc implements callbacks.Handler; it records nothing.
func (h *Handler) HandleStreamingFunc(ctx context.Context, chunk []byte) {}
