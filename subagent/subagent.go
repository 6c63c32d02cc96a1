package subagent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/runstream/runstream/runevents"
)

// MaxText is the most characters (runes) a step text, a result, an error
// or a serialized tool-call argument keeps.
const MaxText = 8192

// ErrMalformed is wrapped by the error of a task chunk that breaks a rule.
var ErrMalformed = errors.New("malformed subagent chunk")

// Map returns the event of one chunk of the run (threadID, runID). ok is
// false, with a nil error, when the chunk is not a task chunk; a task chunk
// that breaks a rule is an error wrapping ErrMalformed.
func Map(threadID, runID string, chunk json.RawMessage) (e runevents.NewEvent, ok bool, err error) {
	obj, err := decodeObject(chunk)
	if err != nil {
		return e, false, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	var typ string
	if json.Unmarshal(obj["type"], &typ) != nil || !strings.HasPrefix(typ, "task_") {
		return e, false, nil
	}
	var status string
	switch typ {
	case "task_started", "task_running":
	case "task_completed":
		status = "completed"
	case "task_failed":
		status = "failed"
	case "task_cancelled":
		status = "cancelled"
	case "task_timed_out":
		status = "timed_out"
	default:
		return e, false, nil
	}
	var taskID string
	if json.Unmarshal(obj["task_id"], &taskID) != nil || taskID == "" {
		return e, false, malformed(typ, "task_id must be a non-empty string")
	}
	e = runevents.NewEvent{ThreadID: threadID, RunID: runID, Category: runevents.CategorySubagent}
	var content, metadata any
	switch typ {
	case "task_started":
		desc, present := obj["description"]
		var d *string
		if present && string(desc) != "null" {
			var s string
			if json.Unmarshal(desc, &s) != nil {
				return e, false, malformed(typ, "description must be a string or null")
			}
			d = &s
		}
		e.EventType = runevents.EventSubagentStart
		content = map[string]any{"task_id": taskID, "description": d}
		metadata = map[string]any{"task_id": taskID}
	case "task_running":
		index, okIndex := nonNegativeInt(obj["message_index"])
		if !okIndex {
			return e, false, malformed(typ, "message_index must be an integer >= 0")
		}
		msg, err := decodeObject(obj["message"])
		if err != nil {
			return e, false, malformed(typ, "message must be an object")
		}
		e.EventType = runevents.EventSubagentStep
		content = stepPayload(taskID, index, msg)
		metadata = map[string]any{"task_id": taskID, "message_index": index}
	default:
		e.EventType = runevents.EventSubagentEnd
		content = endPayload(taskID, status, obj)
		metadata = map[string]any{"task_id": taskID}
	}
	if e.Content, err = marshal(content); err != nil {
		return e, false, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if e.Metadata, err = marshal(metadata); err != nil {
		return e, false, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return e, true, nil
}

func malformed(typ, why string) error {
	return fmt.Errorf("%w: %s: %s", ErrMalformed, typ, why)
}

func decodeObject(raw json.RawMessage) (map[string]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, errors.New("not a JSON object")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// nonNegativeInt reads a JSON integer >= 0: no fraction, no exponent, no
// boolean.
func nonNegativeInt(raw json.RawMessage) (int64, bool) {
	s := string(bytes.TrimSpace(raw))
	if s == "" || strings.ContainsAny(s, ".eE-\"tfn[{") {
		return 0, false
	}
	var n int64
	if json.Unmarshal(raw, &n) != nil {
		return 0, false
	}
	return n, true
}

func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// truncate cuts s to MaxText runes and reports whether it did.
func truncate(s string) (string, bool) {
	if utf8.RuneCountInString(s) <= MaxText {
		return s, false
	}
	i := 0
	for pos := range s {
		if i == MaxText {
			return s[:pos], true
		}
		i++
	}
	return s, false
}

// textOf is the string form of a result or error: a string as is, any
// other value its compact JSON text.
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

func endPayload(taskID, status string, obj map[string]json.RawMessage) map[string]any {
	c := map[string]any{"task_id": taskID, "status": status}
	var model string
	if json.Unmarshal(obj["model_name"], &model) == nil && strings.TrimSpace(model) != "" {
		c["model_name"] = strings.TrimSpace(model)
	}
	if u, ok := usage(obj["usage"]); ok {
		c["usage"] = u
	}
	for _, key := range []string{"result", "error"} {
		raw, present := obj[key]
		if !present || string(bytes.TrimSpace(raw)) == "null" {
			continue
		}
		text, cut := truncate(textOf(raw))
		c[key] = text
		if cut {
			c[key+"_truncated"] = true
		}
	}
	return c
}

// usage keeps exactly input_tokens, output_tokens and total_tokens when all
// three are non-negative integers.
func usage(raw json.RawMessage) (map[string]int64, bool) {
	obj, err := decodeObject(raw)
	if err != nil {
		return nil, false
	}
	out := map[string]int64{}
	for _, key := range []string{"input_tokens", "output_tokens", "total_tokens"} {
		n, ok := nonNegativeInt(obj[key])
		if !ok {
			return nil, false
		}
		out[key] = n
	}
	return out, true
}

// stepPayload is the content of subagent.step (reference §4.3).
func stepPayload(taskID string, index int64, msg map[string]json.RawMessage) map[string]any {
	var typ string
	_ = json.Unmarshal(msg["type"], &typ)
	text, cut := truncate(contentText(msg["content"]))
	p := map[string]any{"task_id": taskID, "message_index": index, "text": text, "truncated": cut}
	if typ == "tool" {
		p["kind"] = "tool"
		var name *string
		var s string
		if json.Unmarshal(msg["name"], &s) == nil {
			name = &s
		}
		p["tool_name"] = name
		return p
	}
	p["kind"] = "ai"
	p["tool_calls"] = toolCalls(msg["tool_calls"])
	return p
}

// contentText joins a content's text parts with "\n": a string as is; a
// list's strings and its objects' string "text", empty parts skipped; null
// or absent ""; anything else its JSON text.
func contentText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return textOf(raw)
	}
	var parts []string
	for _, it := range items {
		var part string
		if json.Unmarshal(it, &part) != nil {
			var obj struct {
				Text *string `json:"text"`
			}
			if json.Unmarshal(it, &obj) != nil || obj.Text == nil {
				continue
			}
			part = *obj.Text
		}
		if part != "" {
			parts = append(parts, part)
		}
	}
	return strings.Join(parts, "\n")
}

// toolCalls keeps each call's name and args; args whose serialized form
// (the string itself, or JSON with ", " and ": " separators) is longer than
// MaxText are replaced by its first MaxText characters with
// args_truncated.
func toolCalls(raw json.RawMessage) []map[string]any {
	out := []map[string]any{}
	var calls []json.RawMessage
	if json.Unmarshal(raw, &calls) != nil {
		return out
	}
	for _, c := range calls {
		var call struct {
			Name *string         `json:"name"`
			Args json.RawMessage `json:"args"`
		}
		if json.Unmarshal(c, &call) != nil {
			continue
		}
		args := call.Args
		if len(args) == 0 {
			args = json.RawMessage("null")
		}
		var serialized string
		if json.Unmarshal(args, &serialized) != nil {
			serialized = spacedJSON(args)
		}
		entry := map[string]any{"name": call.Name, "args": args}
		if cut, truncated := truncate(serialized); truncated {
			entry["args"] = cut
			entry["args_truncated"] = true
		}
		out = append(out, entry)
	}
	return out
}

// spacedJSON re-encodes raw with the separators ", " and ": " and
// non-ASCII text kept, the form the original measures arguments in.
func spacedJSON(raw json.RawMessage) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var b strings.Builder
	// stack of (isObject, count) for the open containers
	type frame struct {
		object bool
		n      int
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		if len(stack) > 0 {
			top := &stack[len(stack)-1]
			_, isEnd := tok.(json.Delim)
			if isEnd && (tok == json.Delim('}') || tok == json.Delim(']')) {
				// closing: no separator
			} else {
				switch {
				case top.object && top.n%2 == 1:
					b.WriteString(": ")
				case top.n > 0:
					b.WriteString(", ")
				}
				top.n++
			}
		}
		switch t := tok.(type) {
		case json.Delim:
			b.WriteString(t.String())
			switch t {
			case '{':
				stack = append(stack, frame{object: true})
			case '[':
				stack = append(stack, frame{})
			default:
				stack = stack[:len(stack)-1]
			}
		case string:
			enc, _ := marshal(t)
			b.Write(enc)
		case json.Number:
			b.WriteString(t.String())
		case bool:
			fmt.Fprint(&b, t)
		case nil:
			b.WriteString("null")
		}
	}
	return b.String()
}
