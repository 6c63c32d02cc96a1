// Package openaillm is the "openai" provider of the llm node type: any
// OpenAI-compatible chat-completions endpoint, streamed, with tool calls
// executed by the engine's built-in tools (github.com/openai/openai-go/v3).
//
// The API key comes from the server (its environment or configuration),
// never from a definition: a config that holds a key is refused at
// publish time, and no key, header or provider message is ever written
// into an event or an error.
package openaillm

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"
	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/tracing"
	"go.opentelemetry.io/otel/trace"
)

// Defaults and bounds of a node's config.
const (
	DefaultBaseURL       = "https://api.openai.com/v1"
	DefaultMaxToolRounds = 8
	MaxToolRounds        = 32
	// maxToolResultBytes bounds a tool result sent back to the model.
	maxToolResultBytes = 64 << 10
)

// APIKeyEnv lists the environment variables a server reads the key from,
// in order.
var APIKeyEnv = []string{"RUNSTREAM_OPENAI_API_KEY", "OPENAI_API_KEY"}

// Options configure the provider for a server.
type Options struct {
	// APIKey is sent as a bearer token, only to the endpoints of
	// KeyBaseURLs; empty sends none (local servers often need none).
	APIKey string
	// KeyBaseURLs are the base URLs the key is sent to. A definition that
	// names another baseURL is sent no key, so that it cannot make the
	// server hand its key to a host of the author's choosing. Defaults to
	// DefaultBaseURL.
	KeyBaseURLs []string
	// HTTPClient sends the requests. Defaults to http.DefaultTransport
	// with the traceparent of the node attempt (tracing.Transport).
	HTTPClient *http.Client
	// Tools may be offered to the model, by the names a node lists in
	// its "tools".
	Tools []engine.Tool
}

// sendsKeyTo reports whether the key goes to the endpoint at baseURL:
// one of KeyBaseURLs (DefaultBaseURL when empty), trailing slashes aside.
func (o Options) sendsKeyTo(baseURL string) bool {
	bases := o.KeyBaseURLs
	if len(bases) == 0 {
		bases = []string{DefaultBaseURL}
	}
	for _, b := range bases {
		if strings.TrimRight(b, "/") == strings.TrimRight(baseURL, "/") {
			return true
		}
	}
	return false
}

// config is the config of an llm node with provider "openai".
type config struct {
	Provider string `json:"provider"`
	// BaseURL is the endpoint's base (…/v1); it may hold no credentials.
	BaseURL string `json:"baseURL"`
	Model   string `json:"model"`
	// System and Prompt are templates over input and nodes.<id>.output.
	System        string   `json:"system"`
	Prompt        string   `json:"prompt"`
	Tools         []string `json:"tools"`
	MaxToolRounds int      `json:"maxToolRounds"`
	Temperature   *float64 `json:"temperature"`
	MaxTokens     int64    `json:"maxTokens"`
}

// keyFields are config fields that would put a credential into a
// definition.
var keyFields = []string{"apikey", "api_key", "key", "authorization", "headers", "token", "bearer"}

// Provider returns the "openai" llm provider: config {"provider":
// "openai", "baseURL"? (DefaultBaseURL), "model", "system"?, "prompt",
// "tools"? (names of opts.Tools), "maxToolRounds"?, "temperature"?,
// "maxTokens"?}. Tokens stream as node.output.delta on channel "text";
// each tool call is node.tool.started → the tool → node.tool.finished, its
// result sent back to the model, until the model answers without tool
// calls. The output is {"text", "toolCalls"?}. Provider failures are
// WORKFLOW_LLM_PROVIDER_ERROR, retryable unless the endpoint refused the
// request itself (4xx other than 408, 409 and 429).
func Provider(opts Options) engine.LLMProvider {
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Transport: tracing.Transport(nil)}
	}
	tools := make(map[string]engine.Tool, len(opts.Tools))
	for _, t := range opts.Tools {
		tools[t.Name] = t
	}
	return engine.LLMProvider{Name: "openai", Compile: func(raw json.RawMessage) (engine.NodeFunc, error) {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err == nil {
			for name := range fields {
				if slices.Contains(keyFields, strings.ToLower(name)) {
					return nil, fmt.Errorf("a definition never holds the API key (field %q): the server reads it from %s", name, strings.Join(APIKeyEnv, " or "))
				}
			}
		}
		var c config
		if err := engine.DecodeConfig(raw, &c); err != nil {
			return nil, err
		}
		n, err := compile(c, opts, tools)
		if err != nil {
			return nil, err
		}
		return n.run, nil
	}}
}

// node is a compiled openai llm node.
type node struct {
	cfg       config
	opts      Options
	system    *engine.Template
	prompt    *engine.Template
	tools     map[string]engine.Tool
	toolDefs  []openai.ChatCompletionToolUnionParam
	maxRounds int
}

func compile(c config, opts Options, available map[string]engine.Tool) (*node, error) {
	if c.BaseURL == "" {
		c.BaseURL = DefaultBaseURL
	}
	u, err := url.Parse(c.BaseURL)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return nil, errors.New("baseURL must be an absolute http or https URL")
	case u.User != nil || u.RawQuery != "":
		return nil, errors.New("baseURL must hold no credentials and no query")
	case c.Model == "":
		return nil, errors.New("model is required")
	case strings.TrimSpace(c.Prompt) == "":
		return nil, errors.New("prompt is required")
	case c.MaxToolRounds < 0 || c.MaxToolRounds > MaxToolRounds:
		return nil, fmt.Errorf("maxToolRounds must be 0 (default %d) to %d", DefaultMaxToolRounds, MaxToolRounds)
	case c.Temperature != nil && (*c.Temperature < 0 || *c.Temperature > 2):
		return nil, errors.New("temperature must be 0 to 2")
	case c.MaxTokens < 0:
		return nil, errors.New("maxTokens must not be negative")
	}
	n := &node{cfg: c, opts: opts, tools: map[string]engine.Tool{}, maxRounds: c.MaxToolRounds}
	if n.maxRounds == 0 {
		n.maxRounds = DefaultMaxToolRounds
	}
	if n.system, err = engine.CompileTemplate(c.System); err != nil {
		return nil, fmt.Errorf("system: %w", err)
	}
	if n.prompt, err = engine.CompileTemplate(c.Prompt); err != nil {
		return nil, fmt.Errorf("prompt: %w", err)
	}
	for _, name := range c.Tools {
		t, ok := available[name]
		if !ok {
			return nil, fmt.Errorf("tool %q is not available on this server", name)
		}
		var params shared.FunctionParameters
		if err := json.Unmarshal(t.Parameters, &params); err != nil {
			return nil, fmt.Errorf("tool %s has invalid parameters", name)
		}
		n.tools[name] = t
		n.toolDefs = append(n.toolDefs, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: t.Name, Description: openai.String(t.Description), Parameters: params,
		}))
	}
	return n, nil
}

// toolCall is a tool call of the model, assembled from stream deltas.
type toolCall struct {
	index          int64
	id, name, args string
}

// callResult is one tool call in the node's output.
type callResult struct {
	ID     string          `json:"id"`
	Name   string          `json:"name"`
	Status string          `json:"status"`
	Output json.RawMessage `json:"output,omitempty"`
	Error  string          `json:"error,omitempty"`
}

func (n *node) run(ctx context.Context, nr *engine.NodeRun) (json.RawMessage, error) {
	env, err := nr.Env()
	if err != nil {
		return nil, err
	}
	params := openai.ChatCompletionNewParams{Model: n.cfg.Model, Tools: n.toolDefs}
	if n.cfg.Temperature != nil {
		params.Temperature = openai.Float(*n.cfg.Temperature)
	}
	if n.cfg.MaxTokens > 0 {
		params.MaxCompletionTokens = openai.Int(n.cfg.MaxTokens)
	}
	system, err := n.system.RenderContext(ctx, env)
	if err != nil {
		return nil, engine.RenderError("system", err)
	}
	if system != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(system))
	}
	prompt, err := n.prompt.RenderContext(ctx, env)
	if err != nil {
		return nil, engine.RenderError("prompt", err)
	}
	params.Messages = append(params.Messages, openai.UserMessage(prompt))

	// A traced attempt asks for the token usage, recorded on its span
	// when the endpoint reports it.
	var used tokenUsage
	if trace.SpanFromContext(ctx).IsRecording() {
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		tracing.SetModel(ctx, "openai", n.cfg.Model)
		defer func() {
			if used.input > 0 || used.output > 0 {
				tracing.SetTokens(ctx, used.input, used.output)
			}
		}()
	}

	reqOpts := []option.RequestOption{
		option.WithBaseURL(n.cfg.BaseURL), option.WithHTTPClient(n.opts.HTTPClient), option.WithMaxRetries(0),
	}
	if n.opts.APIKey != "" && n.opts.sendsKeyTo(n.cfg.BaseURL) {
		reqOpts = append(reqOpts, option.WithAPIKey(n.opts.APIKey))
	}
	client := openai.NewChatCompletionService(reqOpts...)

	var text strings.Builder
	var results []callResult
	for round := 0; ; round++ {
		content, calls, err := n.stream(ctx, nr, client, params, &text, &used)
		if err != nil {
			return nil, err
		}
		if len(calls) == 0 {
			break
		}
		if round == n.maxRounds {
			return nil, runstream.Errorf(runstream.CodeWorkflowLLMProviderError, "the model still called tools after %d rounds", n.maxRounds)
		}
		assistant := openai.ChatCompletionAssistantMessageParam{}
		if content != "" {
			assistant.Content.OfString = openai.String(content)
		}
		for _, c := range calls {
			assistant.ToolCalls = append(assistant.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID: c.id, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.name, Arguments: c.args},
				},
			})
		}
		params.Messages = append(params.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &assistant})
		for _, c := range calls {
			res, reply, err := n.callTool(ctx, nr, c)
			if err != nil {
				return nil, err
			}
			results = append(results, res)
			params.Messages = append(params.Messages, openai.ToolMessage(reply, c.id))
		}
	}
	return json.Marshal(struct {
		Text      string       `json:"text"`
		ToolCalls []callResult `json:"toolCalls,omitempty"`
	}{text.String(), results})
}

// tokenUsage counts the tokens of a node attempt's requests, when their
// answers report them.
type tokenUsage struct{ input, output int64 }

// stream makes one chat-completions request and streams its answer: the
// content goes to node.output.delta (and text) as it arrives, the tokens
// reported to u; the tool calls are returned once complete, in the order
// of their index.
func (n *node) stream(ctx context.Context, nr *engine.NodeRun, client openai.ChatCompletionService, params openai.ChatCompletionNewParams, text *strings.Builder, u *tokenUsage) (string, []toolCall, error) {
	s := client.NewStreaming(ctx, params)
	defer s.Close()
	var content strings.Builder
	var calls []*toolCall
	byIndex := map[int64]*toolCall{}
	finished := false
	for s.Next() {
		chunk := s.Current()
		u.input += chunk.Usage.PromptTokens
		u.output += chunk.Usage.CompletionTokens
		for _, choice := range chunk.Choices {
			if choice.Index != 0 {
				continue
			}
			if d := choice.Delta.Content; d != "" {
				if err := nr.Delta(ctx, "text", d); err != nil {
					return "", nil, err
				}
				content.WriteString(d)
				text.WriteString(d)
			}
			for _, d := range choice.Delta.ToolCalls {
				c := byIndex[d.Index]
				if c == nil {
					c = &toolCall{index: d.Index}
					byIndex[d.Index] = c
					calls = append(calls, c)
				}
				if d.ID != "" {
					c.id = d.ID
				}
				c.name += d.Function.Name
				c.args += d.Function.Arguments
			}
			if choice.FinishReason != "" {
				finished = true
			}
		}
	}
	if err := s.Err(); err != nil {
		return "", nil, providerError(ctx, err)
	}
	if !finished {
		return "", nil, providerError(ctx, errors.New("the stream ended before the model finished"))
	}
	slices.SortStableFunc(calls, func(a, b *toolCall) int { return cmp.Compare(a.index, b.index) })
	out := make([]toolCall, len(calls))
	for i, c := range calls {
		out[i] = *c
		if out[i].id == "" {
			out[i].id = fmt.Sprintf("call_%d", i+1)
		}
	}
	return content.String(), out, nil
}

// callTool runs one tool call of the model and returns its result for
// the output and the reply for the model. err means the node must stop.
func (n *node) callTool(ctx context.Context, nr *engine.NodeRun, c toolCall) (callResult, string, error) {
	res := callResult{ID: c.id, Name: c.name, Status: "ok"}
	input := json.RawMessage(c.args)
	if strings.TrimSpace(c.args) == "" {
		input = json.RawMessage("{}")
	}
	tool, ok := n.tools[c.name]
	var toolErr *runstream.Error
	var out json.RawMessage
	switch {
	case !json.Valid(input):
		toolErr = runstream.Errorf(runstream.CodeInvalidArgument, "the tool call's arguments are not valid JSON")
		input, _ = json.Marshal(c.args)
	case !ok:
		toolErr = runstream.Errorf(runstream.CodeInvalidArgument, "no tool %q is offered", c.name)
	}
	if toolErr != nil {
		name := c.name
		if name == "" {
			name = "unknown"
		}
		if err := nr.ToolStarted(ctx, c.id, name, input); err != nil {
			return res, "", err
		}
		if err := nr.ToolFinished(ctx, c.id, name, nil, toolErr, 0); err != nil {
			return res, "", err
		}
	} else {
		var err error
		if out, toolErr, err = engine.CallTool(ctx, nr, tool, c.id, input); err != nil {
			return res, "", err
		}
	}
	if toolErr != nil {
		res.Status, res.Error = "error", toolErr.Message
		reply, _ := json.Marshal(map[string]string{"error": toolErr.Message})
		return res, string(reply), nil
	}
	res.Output = out
	reply := string(out)
	if len(reply) > maxToolResultBytes {
		reply = reply[:maxToolResultBytes] + "… [truncated]"
	}
	return res, reply, nil
}

// providerError words a failed request or stream without the provider's
// own message, which may quote the key or the prompt.
func providerError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	var apiErr *openai.Error
	var streamErr *ssestream.StreamError
	switch {
	case errors.As(err, &apiErr):
		status := apiErr.StatusCode
		e := runstream.Errorf(runstream.CodeWorkflowLLMProviderError, "the model provider answered HTTP %d", status).WithDetail("status", status)
		refused := status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusConflict && status != http.StatusTooManyRequests
		return engine.WithRetryable(e, !refused)
	case errors.As(err, &streamErr):
		return runstream.Errorf(runstream.CodeWorkflowLLMProviderError, "the model provider reported an error in the middle of the stream")
	}
	return runstream.Errorf(runstream.CodeWorkflowLLMProviderError, "the model provider could not be reached or broke the stream")
}
