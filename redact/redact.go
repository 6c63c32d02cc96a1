package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/runstream/runstream/internal/jsonscan"
)

// maxPlainDepth is the nesting jsonscan.Plain accepts before JSON leaves
// the check of a document to json.Valid (whose own limit it is).
const maxPlainDepth = 10000

// Options configures a Redactor. The zero value gives the default rules.
type Options struct {
	// ExtraKeys are more sensitive key names. They are normalised like keys
	// and match as weak names: the whole key, or a suffix that starts a word
	// ("ticket" matches "ticket" and "jira_ticket", not "pticket").
	ExtraKeys []string
	// KeepKeys are object keys, compared exactly, whose values pass through
	// untouched by every rule. The workflow engine redacts the data of
	// run.awaiting_input with KeepKeys: []string{"resumeToken"}, the one
	// secret that must stay in its event; every other writer uses a
	// Redactor without it.
	KeepKeys []string
	// KeepReasoning keeps the reasoning a chat shows (reasoning_content,
	// thinking text and blocks, see "Hidden reasoning"); credentials are
	// removed all the same. It is the profile of LangGraph stream chunks
	// (package langgraph): DeerFlow's chat displays reasoning_content.
	KeepReasoning bool
}

// Redactor removes secrets and hidden reasoning from event payloads. It
// holds no mutable state: one Redactor is safe for concurrent use.
type Redactor struct {
	extra []string // normalised ExtraKeys
	keep  []string
	// keepReasoning turns the hidden-reasoning rules off.
	keepReasoning bool
}

// New returns a Redactor with the default rules plus opts.
func New(opts Options) *Redactor {
	r := &Redactor{keep: slices.Clone(opts.KeepKeys), keepReasoning: opts.KeepReasoning}
	for _, k := range opts.ExtraKeys {
		if n := normalizeName(k); n != "" {
			r.extra = append(r.extra, n)
		}
	}
	return r
}

// maxPasses bounds how often String re-applies the rules to its own output
// until nothing changes, which makes redaction idempotent even when one
// replacement exposes a match for an earlier rule.
const maxPasses = 4

// String redacts the secrets found in s by the value rules and the
// key=value rules. It returns s itself and false when nothing matched.
func (r *Redactor) String(s string) (string, bool) {
	out, changed := r.pass(s)
	if !changed {
		return s, false
	}
	for range maxPasses - 1 {
		next, again := r.pass(out)
		if !again {
			break
		}
		out = next
	}
	return out, true
}

// Continuation redacts s, a piece of text that continues text written
// before it (a streamed delta), as String does, except that its start is
// read as the middle of a line, not the start of one: a name there
// ("password: go to settings") is prose, as it is in the whole text, while
// the lines after its first newline are read as any text. The writer of
// the pieces redacts each with the text before it first (the engine's
// emitter); Continuation is the choke point's pass over what it wrote.
func (r *Redactor) Continuation(s string) (string, bool) {
	out, changed := r.String(continued + s)
	if !changed {
		return s, false
	}
	if rest, ok := strings.CutPrefix(out, continued); ok {
		return rest, true
	}
	return r.String(s)
}

// continued is put before a Continuation's text: a word and a space, so
// that the text reads as the middle of a sentence, where no rule sees the
// start of a line and no name is glued to what follows.
const continued = "x "

func (r *Redactor) pass(s string) (string, bool) {
	mask := candidates(s)
	if mask == 0 {
		return s, false
	}
	changed := false
	for i := range valueRules {
		if mask&(1<<i) == 0 {
			continue
		}
		var c bool
		if s, c = valueRules[i].apply(s); c {
			changed = true
		}
	}
	if mask&(1<<assignRule) != 0 {
		if out, c := r.assignments(s); c {
			return out, true
		}
	}
	return s, changed
}

// Value redacts a value as encoding/json decodes into any: map[string]any,
// []any, string, float64, json.Number, bool and nil. Values of any other
// type are returned unchanged; encode them and use JSON instead.
//
// Value never modifies v: when something changes, the maps and slices on
// the path to the change are copied and everything else is shared with v.
// When nothing changes it returns v itself and false.
func (r *Redactor) Value(v any) (any, bool) {
	switch x := v.(type) {
	case string:
		if s, changed := r.String(x); changed {
			return s, true
		}
	case map[string]any:
		return r.object(x)
	case []any:
		return r.array(x)
	}
	return v, false
}

// JSON redacts one JSON document. Numbers are decoded as json.Number so
// they keep their exact text. When nothing changes it returns raw itself
// and false, without re-encoding; otherwise the document is re-encoded
// compactly, object keys sorted, HTML characters not escaped. Invalid JSON
// is an error.
func (r *Redactor) JSON(raw []byte) ([]byte, bool, error) {
	// Plain accepts only valid JSON; what it does not accept (escaped
	// surrogates, big objects, …) json.Valid decides.
	if !jsonscan.Plain(raw, maxPlainDepth) && !json.Valid(raw) {
		var v any
		err := json.Unmarshal(raw, &v) // for the position of the error
		return nil, false, fmt.Errorf("redact json: %w", err)
	}
	if !r.rawMayChange(raw) {
		return raw, false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false, fmt.Errorf("redact json: %w", err)
	}
	out, changed := r.Value(v)
	if !changed {
		return raw, false, nil
	}
	var buf bytes.Buffer
	buf.Grow(len(raw))
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, false, fmt.Errorf("redact json: encode: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), true, nil
}

// object applies the key rules, the hidden-reasoning rules and, below every
// other key, Value.
func (r *Redactor) object(m map[string]any) (any, bool) {
	var out map[string]any // a copy of m, made at the first change
	var blockFields []string
	if !r.keepReasoning {
		blockFields = hiddenBlockFields(m)
	}
	var buf [maxKeyTail]byte
	for k, v := range m {
		if slices.Contains(r.keep, k) {
			continue
		}
		norm, starts := normalizeKey(k, &buf)
		if (!r.keepReasoning && hiddenKey(norm, v)) || slices.Contains(blockFields, k) {
			if out == nil {
				out = maps.Clone(m)
			}
			delete(out, k)
			continue
		}
		if match := matchNorm(norm, starts, r.extra); match != noMatch {
			if masks(v, match) {
				if out == nil {
					out = maps.Clone(m)
				}
				out[k] = marker("key")
			}
			continue
		}
		if nv, changed := r.Value(v); changed {
			if out == nil {
				out = maps.Clone(m)
			}
			out[k] = nv
		}
	}
	if out == nil {
		return m, false
	}
	return out, true
}

// array drops hidden reasoning blocks and applies Value to the rest.
func (r *Redactor) array(a []any) (any, bool) {
	var out []any // a copy of a[:i], made at the first change
	for i, v := range a {
		if !r.keepReasoning && isHiddenBlock(v) {
			if out == nil {
				out = make([]any, i, len(a))
				copy(out, a)
			}
			continue
		}
		nv, changed := r.Value(v)
		if changed && out == nil {
			out = make([]any, i, len(a))
			copy(out, a)
		}
		if out != nil {
			out = append(out, nv)
		}
	}
	if out == nil {
		return a, false
	}
	return out, true
}

// masks reports whether a value under a sensitive key is replaced. Values
// that cannot carry a secret stay: null, booleans, "", empty objects and
// arrays, a marker; so does a number under a weak name ("output_token": 12
// is a count). Everything else, whatever its type, becomes the marker.
func masks(v any, match keyMatch) bool {
	switch x := v.(type) {
	case nil, bool:
		return false
	case string:
		return x != "" && !isMarker(x)
	case map[string]any:
		return len(x) > 0
	case []any:
		return len(x) > 0
	case float64, json.Number:
		return match == strongMatch
	}
	return true
}

// Hidden reasoning. Keys "redacted_thinking" and "reasoning_content" (any
// spelling) are deleted wherever they appear; "thinking" is deleted when its
// value is text or a list, and kept when it is an object, a boolean, a
// number or null, since that is request configuration such as Anthropic's
// {"type":"enabled","budget_tokens":…}. Blocks whose "type" is "thinking"
// or "redacted_thinking" are dropped from arrays; elsewhere (a streaming
// "content_block") they lose their hidden fields, as do the delta and
// reasoning blocks listed in hiddenFields.

// hiddenFields are the fields deleted from an object by its "type".
var hiddenFields = map[string][]string{
	"thinking":          {"thinking", "signature"},
	"redacted_thinking": {"data"},
	"thinking_delta":    {"thinking"},
	"signature_delta":   {"signature"},
	"reasoning":         {"encrypted_content"},
}

func hiddenKey(norm []byte, v any) bool {
	switch string(norm) {
	case "redactedthinking", "reasoningcontent":
		return true
	case "thinking":
		switch v.(type) {
		case string, []any:
			return true
		}
	}
	return false
}

func hiddenBlockFields(m map[string]any) []string {
	if t, ok := m["type"].(string); ok {
		return hiddenFields[t]
	}
	return nil
}

func isHiddenBlock(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	t, _ := m["type"].(string)
	return t == "thinking" || t == "redacted_thinking"
}
