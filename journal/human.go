package journal

import (
	"encoding/json"
	"maps"
	"strings"
)

// humanInputSources are the sources whose hidden structured replies are
// user input (reference §3.4).
var humanInputSources = map[string]bool{"ask_clarification": true}

// pickHumanInput returns the message of a lead-agent prompt that is the
// user's input: the latest human message, not a summary, that is visible or
// a valid structured reply from an allowed source.
func pickHumanInput(prompts [][]Message) (Message, bool) {
	for b := len(prompts) - 1; b >= 0; b-- {
		batch := prompts[b]
		for i := len(batch) - 1; i >= 0; i-- {
			m := batch[i]
			if m.Type != "human" || m.Name == "summary" {
				continue
			}
			if !m.hidden() {
				return m, true
			}
			if src, ok := humanInputResponseSource(m.kwarg("human_input_response")); ok && humanInputSources[src] {
				return m, true
			}
		}
	}
	return Message{}, false
}

// humanInputResponseSource returns the source of a valid structured
// human-input response: version 1, kind "human_input_response", non-blank
// source, request_id and value, response_kind "text", or "option" with a
// non-blank option_id.
func humanInputResponseSource(v any) (string, bool) {
	r, ok := v.(map[string]any)
	if !ok {
		return "", false
	}
	if !isOne(r["version"]) || r["kind"] != "human_input_response" {
		return "", false
	}
	for _, key := range []string{"source", "request_id", "value"} {
		if !nonBlank(r[key]) {
			return "", false
		}
	}
	switch r["response_kind"] {
	case "text":
	case "option":
		if !nonBlank(r["option_id"]) {
			return "", false
		}
	default:
		return "", false
	}
	return r["source"].(string), true
}

func isOne(v any) bool {
	switch n := v.(type) {
	case float64:
		return n == 1
	case int:
		return n == 1
	case int64:
		return n == 1
	case json.Number:
		return n.String() == "1"
	}
	return false
}

func nonBlank(v any) bool {
	s, ok := v.(string)
	return ok && strings.TrimSpace(s) != ""
}

// uiCopy returns the copy of m that the history shows: when
// additional_kwargs.original_user_content is a string, the content is that
// text (a list keeps its non-text blocks in order, the first text block
// carrying the text and later ones dropped) and the key is removed. m is
// not changed.
func uiCopy(m Message) Message {
	original, ok := m.kwarg("original_user_content").(string)
	if !ok {
		return m
	}
	c := m
	c.AdditionalKwargs = maps.Clone(m.AdditionalKwargs)
	delete(c.AdditionalKwargs, "original_user_content")
	var blocks []any
	if json.Unmarshal(m.Content, &blocks) != nil {
		c.Content = TextContent(original)
		return c
	}
	out := make([]any, 0, len(blocks)+1)
	placed := false
	for _, b := range blocks {
		obj, isObj := b.(map[string]any)
		if !isObj || obj["type"] != "text" {
			out = append(out, b)
			continue
		}
		if placed {
			continue
		}
		nb := maps.Clone(obj)
		nb["text"] = original
		out = append(out, nb)
		placed = true
	}
	if !placed {
		out = append([]any{map[string]any{"type": "text", "text": original}}, out...)
	}
	c.Content, _ = json.Marshal(out)
	return c
}
