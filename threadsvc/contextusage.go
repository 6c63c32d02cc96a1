package threadsvc

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/runstream/runstream/runevents"
)

// DefaultContextWindows is the maximum context, in tokens, of common
// models, as their providers publish it. Config.ContextWindows replaces
// it. A model name matches its exact entry, else the longest entry it
// starts with ("gpt-4o-2024-08-06" matches "gpt-4o").
var DefaultContextWindows = map[string]int64{
	"gpt-4o": 128000, "gpt-4o-mini": 128000, "gpt-4-turbo": 128000,
	"gpt-4.1": 1047576, "gpt-4.1-mini": 1047576, "gpt-4.1-nano": 1047576,
	"gpt-5": 400000, "o1": 200000, "o3": 200000, "o3-mini": 200000, "o4-mini": 200000,
	"claude-3-5-sonnet": 200000, "claude-3-5-haiku": 200000, "claude-3-7-sonnet": 200000,
	"claude-sonnet-4": 200000, "claude-opus-4": 200000,
	"gemini-1.5-pro": 2097152, "gemini-2.0-flash": 1048576, "gemini-2.5-pro": 1048576, "gemini-2.5-flash": 1048576,
	"deepseek-chat": 128000, "deepseek-reasoner": 128000,
}

// ContextUsage is how full the model's context was after the thread's
// last lead AI message: TokenCount from that message's usage,
// MaxContextTokens the model's window (null when the model is not in
// the table), Percentage TokenCount/MaxContextTokens*100 rounded to one
// decimal (null without a window).
type ContextUsage struct {
	TokenCount       int64    `json:"token_count"`
	MaxContextTokens *int64   `json:"max_context_tokens"`
	Percentage       *float64 `json:"percentage"`
}

// contextScan bounds the message rows read, newest first, to find the
// last lead AI message.
const contextScan = 200

// contextUsage returns the context usage of the thread's last lead AI
// message with a usage among its newest contextScan message rows
// visible to user, or nil when there is none. The model is the
// message's response_metadata.model_name, else its run row's model.
func (s *Service) contextUsage(ctx context.Context, user, threadID string, runs []runevents.ThreadRun) (*ContextUsage, error) {
	rows, err := s.events.ListMessages(ctx, runevents.ListMessagesParams{ThreadID: threadID, Owner: runevents.OwnedBy(user), Limit: contextScan})
	if err != nil {
		return nil, err
	}
	for i := len(rows) - 1; i >= 0; i-- {
		rec := rows[i]
		if !rec.LeadAI() {
			continue
		}
		count, ok := usageTokens(rec.Metadata)
		if !ok {
			continue
		}
		model := responseModel(rec.Content)
		for _, run := range runs {
			if model == "" && run.RunID == rec.RunID {
				model = run.ModelName
				break
			}
		}
		out := &ContextUsage{TokenCount: count}
		if max, ok := s.contextWindow(model); ok {
			pct := math.Round(float64(count)/float64(max)*1000) / 10
			out.MaxContextTokens, out.Percentage = &max, &pct
		}
		return out, nil
	}
	return nil, nil
}

// usageTokens reads the tokens of metadata.usage: total_tokens, else
// input_tokens + output_tokens; ok is false without a positive count.
func usageTokens(metadata json.RawMessage) (int64, bool) {
	var m struct {
		Usage struct {
			Input  int64 `json:"input_tokens"`
			Output int64 `json:"output_tokens"`
			Total  int64 `json:"total_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(metadata, &m) != nil {
		return 0, false
	}
	n := m.Usage.Total
	if n <= 0 {
		n = m.Usage.Input + m.Usage.Output
	}
	return n, n > 0
}

// responseModel returns the content's response_metadata.model_name (or
// .model), "" when it has none.
func responseModel(content json.RawMessage) string {
	var c struct {
		Meta struct {
			ModelName string `json:"model_name"`
			Model     string `json:"model"`
		} `json:"response_metadata"`
	}
	if json.Unmarshal(content, &c) != nil {
		return ""
	}
	if c.Meta.ModelName != "" {
		return c.Meta.ModelName
	}
	return c.Meta.Model
}

// contextWindow returns the window of model: its exact entry, else the
// longest entry it starts with.
func (s *Service) contextWindow(model string) (int64, bool) {
	if model == "" {
		return 0, false
	}
	if n, ok := s.windows[model]; ok && n > 0 {
		return n, true
	}
	best, n := "", int64(0)
	for name, max := range s.windows {
		if len(name) > len(best) && strings.HasPrefix(model, name) && max > 0 {
			best, n = name, max
		}
	}
	return n, best != ""
}

// ParseContextWindow reads MODEL=TOKENS (a serve flag): a model name and
// a positive token count.
func ParseContextWindow(s string) (string, int64, error) {
	model, tokens, ok := strings.Cut(s, "=")
	n, err := strconv.ParseInt(strings.TrimSpace(tokens), 10, 64)
	model = strings.TrimSpace(model)
	if !ok || model == "" || err != nil || n <= 0 {
		return "", 0, fmt.Errorf("context window %q: want MODEL=TOKENS with TOKENS a positive integer", s)
	}
	return model, n, nil
}
