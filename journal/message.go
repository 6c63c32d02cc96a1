package journal

import (
	"encoding/json"
	"strings"
)

// Message is the dump of one chat message as the run event stream stores
// it: the content of llm.human.input, llm.ai.response and llm.tool.result.
// Type is "human", "ai", "tool" or "system".
type Message struct {
	Type string `json:"type"`
	// Content is a JSON string or a list of content blocks
	// ({"type":"text","text":…} and others). Empty stores "".
	Content json.RawMessage `json:"content"`
	ID      string          `json:"id,omitempty"`
	Name    string          `json:"name,omitempty"`
	// ToolCalls are the calls an AI message requests; an AI message always
	// carries the key (as [] when there are none).
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID is the call a tool message answers.
	ToolCallID       string         `json:"tool_call_id,omitempty"`
	Status           string         `json:"status,omitempty"`
	Artifact         any            `json:"artifact,omitempty"`
	AdditionalKwargs map[string]any `json:"additional_kwargs,omitempty"`
	ResponseMetadata map[string]any `json:"response_metadata,omitempty"`
	// UsageMetadata is the token usage an AI message reports, if any.
	UsageMetadata *Usage `json:"usage_metadata,omitempty"`
}

// ToolCall is one tool call requested by an AI message.
type ToolCall struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name"`
	// Args is the call's arguments, usually an object.
	Args any    `json:"args"`
	Type string `json:"type,omitempty"`
}

// Usage is the token usage of one model call.
type Usage struct {
	InputTokens        int64         `json:"input_tokens"`
	OutputTokens       int64         `json:"output_tokens"`
	TotalTokens        int64         `json:"total_tokens"`
	InputTokenDetails  *TokenDetails `json:"input_token_details,omitempty"`
	OutputTokenDetails *TokenDetails `json:"output_token_details,omitempty"`
}

// TokenDetails breaks a token count down.
type TokenDetails struct {
	CacheRead     int64 `json:"cache_read,omitempty"`
	CacheCreation int64 `json:"cache_creation,omitempty"`
	Reasoning     int64 `json:"reasoning,omitempty"`
}

// TextContent returns s as a JSON string, for Message.Content.
func TextContent(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// MarshalJSON encodes the message dump; an AI message always has
// tool_calls and every message a content.
func (m Message) MarshalJSON() ([]byte, error) {
	type plain Message
	p := plain(m)
	if len(p.Content) == 0 {
		p.Content = json.RawMessage(`""`)
	}
	if m.Type != "ai" {
		return json.Marshal(p)
	}
	calls := m.ToolCalls
	if calls == nil {
		calls = []ToolCall{}
	}
	return json.Marshal(struct {
		plain
		ToolCalls []ToolCall `json:"tool_calls"`
	}{p, calls})
}

// kwarg returns m.AdditionalKwargs[key].
func (m Message) kwarg(key string) any {
	if m.AdditionalKwargs == nil {
		return nil
	}
	return m.AdditionalKwargs[key]
}

func (m Message) hidden() bool { return m.kwarg("hide_from_ui") == true }

// Text returns the text of the message's content (reference §3.8): a
// string as is; a list, the concatenation without separator of its string
// items and of each object's "text" (else "content") string; an object, its
// "text" or "content" string; anything else "".
func (m Message) Text() string {
	return contentText(m.Content)
}

func contentText(raw json.RawMessage) string {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return ""
	}
	switch c := v.(type) {
	case string:
		return c
	case []any:
		var b strings.Builder
		for _, item := range c {
			switch it := item.(type) {
			case string:
				b.WriteString(it)
			case map[string]any:
				b.WriteString(objectText(it))
			}
		}
		return b.String()
	case map[string]any:
		return objectText(c)
	}
	return ""
}

func objectText(o map[string]any) string {
	if s, ok := o["text"].(string); ok {
		return s
	}
	if s, ok := o["content"].(string); ok {
		return s
	}
	return ""
}

// truncateRunes returns s cut to at most n runes.
func truncateRunes(s string, n int) string {
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}
