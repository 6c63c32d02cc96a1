package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/tracing"
)

// LLMProvider is a backend of the llm node type, chosen by the node's
// config field "provider".
type LLMProvider struct {
	Name string
	// Compile checks the node's whole config (provider included) and
	// returns the function that runs an attempt. Tokens go to
	// NodeRun.Delta on channel "text", tool calls to ToolStarted and
	// ToolFinished; the output should be {"text", "toolCalls"?}.
	Compile func(config json.RawMessage) (NodeFunc, error)
}

// LLM returns the llm node type over providers.
func LLM(providers ...LLMProvider) NodeType {
	byName := make(map[string]LLMProvider, len(providers))
	for _, p := range providers {
		byName[p.Name] = p
	}
	return NodeType{Name: "llm", Repeatable: AlwaysRepeatable, Compile: func(raw json.RawMessage) (NodeFunc, error) {
		var head struct {
			Provider string `json:"provider"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return nil, errors.New(decodeMessage(err))
		}
		p, ok := byName[head.Provider]
		if !ok {
			names := make([]string, 0, len(byName))
			for n := range byName {
				names = append(names, n)
			}
			slices.Sort(names)
			return nil, fmt.Errorf("provider %q is not one of %s", shorten(head.Provider), strings.Join(names, ", "))
		}
		return p.Compile(raw)
	}}
}

// LLMAttempt is what one attempt of an llm node did: when it started,
// its output ({"text", "toolCalls"?}) or its error.
type LLMAttempt struct {
	Started time.Time
	Output  json.RawMessage
	Err     error
}

// ObservedLLM returns the llm node type over providers (as LLM does) whose
// every attempt is reported to observe when it ends, on the node's
// goroutine, before the node's result is stored; observe must not block
// for long and cannot change the result. journal/workflowllm observes
// attempts into the run event stream.
func ObservedLLM(observe func(ctx context.Context, n *NodeRun, a LLMAttempt), providers ...LLMProvider) NodeType {
	t := LLM(providers...)
	compile := t.Compile
	t.Compile = func(raw json.RawMessage) (NodeFunc, error) {
		run, err := compile(raw)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, n *NodeRun) (json.RawMessage, error) {
			a := LLMAttempt{Started: time.Now()}
			a.Output, a.Err = run(ctx, n)
			observe(ctx, n, a)
			return a.Output, a.Err
		}, nil
	}
	return t
}

// scriptedConfig is the config of an llm node with provider "scripted".
type scriptedConfig struct {
	Provider string `json:"provider"`
	// Text is a template streamed token by token (a token is a word with
	// the white space after it); Tokens gives the tokens instead.
	Text   string   `json:"text"`
	Tokens []string `json:"tokens"`
	// TokensPerSecond paces the stream; 0 streams as fast as possible.
	TokensPerSecond float64 `json:"tokensPerSecond"`
	// ToolCalls are made, in order, before the text is streamed.
	ToolCalls []scriptedToolCall `json:"toolCalls"`
	// FailAttempts lists the attempts that fail with a retryable
	// WORKFLOW_LLM_PROVIDER_ERROR after FailAfterTokens tokens.
	FailAttempts    []int `json:"failAttempts"`
	FailAfterTokens int   `json:"failAfterTokens"`
}

type scriptedToolCall struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Input is a JSON template (see JSONTemplate) over input and
	// nodes.<id>.output.
	Input json.RawMessage `json:"input"`
	// Output is the tool's scripted result; Error, when set, makes the
	// call fail with that message instead. Without either, the provider's
	// tool of that name is called for real.
	Output     json.RawMessage `json:"output"`
	Error      string          `json:"error"`
	DurationMs int64           `json:"durationMs"`
}

// scriptedCall is a compiled scripted tool call.
type scriptedCall struct {
	scriptedToolCall
	input *JSONTemplate
	// tool is set when the call runs a real tool.
	tool *Tool
}

type toolCallResult struct {
	ID     string          `json:"id"`
	Name   string          `json:"name"`
	Status string          `json:"status"`
	Output json.RawMessage `json:"output,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// ScriptedProvider returns the deterministic llm provider "scripted", for
// demos and tests: it makes the tool calls of its script (with the
// scripted results, or by calling the given tools for real), then streams
// the script's text token by token at tokensPerSecond, and may fail on
// given attempts. Offline unless a script calls a real tool.
func ScriptedProvider(tools ...Tool) LLMProvider {
	byName, err := toolIndex(tools)
	if err != nil {
		panic("engine: scripted provider: " + err.Error())
	}
	return LLMProvider{Name: "scripted", Compile: func(raw json.RawMessage) (NodeFunc, error) {
		return compileScripted(raw, byName)
	}}
}

func compileScripted(raw json.RawMessage, tools map[string]Tool) (NodeFunc, error) {
	var c scriptedConfig
	if err := DecodeConfig(raw, &c); err != nil {
		return nil, err
	}
	switch {
	case c.Text != "" && c.Tokens != nil:
		return nil, errors.New("give text or tokens, not both")
	case c.TokensPerSecond < 0 || c.TokensPerSecond > 1e6:
		return nil, errors.New("tokensPerSecond must be 0 (unpaced) to 1000000")
	case c.FailAfterTokens < 0:
		return nil, errors.New("failAfterTokens must not be negative")
	}
	calls := make([]scriptedCall, len(c.ToolCalls))
	for i, tc := range c.ToolCalls {
		if tc.ID == "" || tc.Name == "" {
			return nil, fmt.Errorf("toolCalls[%d] needs an id and a name", i)
		}
		if tc.DurationMs < 0 || time.Duration(tc.DurationMs)*time.Millisecond > MaxDelay {
			return nil, fmt.Errorf("toolCalls[%d].durationMs must be 0 to %d", i, MaxDelay.Milliseconds())
		}
		in, err := CompileJSONTemplate(tc.Input)
		if err != nil {
			return nil, fmt.Errorf("toolCalls[%d].input: %w", i, err)
		}
		calls[i] = scriptedCall{scriptedToolCall: tc, input: in}
		if len(tc.Output) == 0 && tc.Error == "" {
			tool, ok := tools[tc.Name]
			if !ok {
				return nil, fmt.Errorf("toolCalls[%d]: no tool %q is available: give its output or error", i, shorten(tc.Name))
			}
			calls[i].tool = &tool
		}
	}
	text, err := CompileTemplate(c.Text)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, n *NodeRun) (json.RawMessage, error) {
		return runScripted(ctx, n, c, calls, text)
	}, nil
}

// scriptedToolCalls makes the script's tool calls in order.
func scriptedToolCalls(ctx context.Context, n *NodeRun, script []scriptedCall) ([]toolCallResult, error) {
	var calls []toolCallResult
	if len(script) == 0 {
		return nil, nil
	}
	env, err := n.Env()
	if err != nil {
		return nil, err
	}
	for _, tc := range script {
		input, err := tc.input.RenderContext(ctx, env)
		if err != nil {
			return nil, RenderError("tool call "+tc.ID+": input", err)
		}
		res := toolCallResult{ID: tc.ID, Name: tc.Name, Status: "ok"}
		if tc.tool != nil {
			out, toolErr, err := CallTool(ctx, n, *tc.tool, tc.ID, input)
			if err != nil {
				return nil, err
			}
			res.Output = out
			if toolErr != nil {
				res.Status, res.Error = "error", toolErr.Message
			}
			calls = append(calls, res)
			continue
		}
		if err := n.ToolStarted(ctx, tc.ID, tc.Name, input); err != nil {
			return nil, err
		}
		if err := sleep(ctx, time.Duration(tc.DurationMs)*time.Millisecond); err != nil {
			return nil, err
		}
		res.Output = tc.Output
		var toolErr *runstream.Error
		if tc.Error != "" {
			res.Status, res.Output, res.Error = "error", nil, tc.Error
			toolErr = runstream.Errorf(runstream.CodeWorkflowNodeFailed, "%s", tc.Error)
		}
		if err := n.ToolFinished(ctx, tc.ID, tc.Name, tc.Output, toolErr, time.Duration(tc.DurationMs)*time.Millisecond); err != nil {
			return nil, err
		}
		calls = append(calls, res)
	}
	return calls, nil
}

func runScripted(ctx context.Context, n *NodeRun, c scriptedConfig, script []scriptedCall, text *Template) (json.RawMessage, error) {
	calls, err := scriptedToolCalls(ctx, n, script)
	if err != nil {
		return nil, err
	}
	tokens := c.Tokens
	if tokens == nil {
		env, err := n.Env()
		if err != nil {
			return nil, err
		}
		s, err := text.RenderContext(ctx, env)
		if err != nil {
			return nil, RenderError("text", err)
		}
		tokens = SplitTokens(s)
	}
	fail := slices.Contains(c.FailAttempts, n.Attempt)
	var full strings.Builder
	start := time.Now()
	streamed := 0
	for i, tok := range tokens {
		if fail && i == c.FailAfterTokens {
			break
		}
		if c.TokensPerSecond > 0 {
			due := start.Add(time.Duration(float64(i) / c.TokensPerSecond * float64(time.Second)))
			if err := sleep(ctx, time.Until(due)); err != nil {
				return nil, err
			}
		}
		if err := n.Delta(ctx, "text", tok); err != nil {
			return nil, err
		}
		full.WriteString(tok)
		streamed++
	}
	tracing.SetTokens(ctx, -1, int64(streamed))
	if fail {
		return nil, runstream.Errorf(runstream.CodeWorkflowLLMProviderError, "scripted provider failure on attempt %d", n.Attempt)
	}
	return json.Marshal(struct {
		Text      string           `json:"text"`
		ToolCalls []toolCallResult `json:"toolCalls,omitempty"`
	}{full.String(), calls})
}

// SplitTokens splits text into tokens as the scripted provider streams
// them: each token is a run of non-space characters with the white space
// that follows it (leading white space is a token of its own). The tokens
// concatenate to text.
func SplitTokens(text string) []string {
	var tokens []string
	start, inSpace := 0, false
	for i, r := range text {
		space := unicode.IsSpace(r)
		if !space && inSpace && i > start {
			tokens = append(tokens, text[start:i])
			start = i
		}
		inSpace = space
	}
	if start < len(text) {
		tokens = append(tokens, text[start:])
	}
	return tokens
}
