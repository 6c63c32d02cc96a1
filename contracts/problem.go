package contracts

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/runstream/runstream/internal/jsonscan"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// ValidationError reports why a value breaks a contract. Every Problem names
// the failing location, so the error is safe to show to the caller that sent
// the value (for example in the details of a VALIDATION_FAILED response).
type ValidationError struct {
	Problems []Problem
}

// Problem is one contract violation.
type Problem struct {
	// Path is a JSON Pointer (RFC 6901) to the failing value inside the
	// validated document; "" is the document itself. For a missing required
	// property it points at the property that should be there.
	Path string `json:"path"`
	// Message says what is wrong, in English. It may quote a (shortened)
	// part of the offending value, never anything else.
	Message string `json:"message"`
}

// newValidationError returns the problems as an error, ordered by path and
// message so that equal input always gives an equal error.
func newValidationError(problems []Problem) *ValidationError {
	slices.SortFunc(problems, func(a, b Problem) int {
		return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(a.Message, b.Message))
	})
	return &ValidationError{Problems: problems}
}

// Error lists the problems on one line.
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("contract validation failed")
	for i, p := range e.Problems {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		path := p.Path
		if path == "" {
			path = "/"
		}
		b.WriteString(path)
		b.WriteString(": ")
		b.WriteString(p.Message)
	}
	return b.String()
}

// Paths returns the Path of every problem, in order.
func (e *ValidationError) Paths() []string {
	paths := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		paths[i] = p.Path
	}
	return paths
}

// maxMessageRunes bounds a problem message, which may quote the offending
// value (a pattern or format failure), so a large value is never echoed.
const maxMessageRunes = 200

// printer renders the library's error kinds; message.Printer is safe for
// concurrent use.
var printer = message.NewPrinter(language.English)

// schemaProblems appends the leaves of a validation error from the schema
// library, with their instance locations under prefix (a JSON Pointer).
func schemaProblems(out []Problem, prefix string, err error) []Problem {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return append(out, Problem{Path: prefix, Message: "invalid value"})
	}
	return appendLeaves(out, prefix, ve)
}

func appendLeaves(out []Problem, prefix string, ve *jsonschema.ValidationError) []Problem {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			out = appendLeaves(out, prefix, c)
		}
		return out
	}
	at := prefix + pointer(ve.InstanceLocation)
	switch k := ve.ErrorKind.(type) {
	case *kind.Required:
		for _, name := range k.Missing {
			out = append(out, Problem{Path: at + PointerToken(name), Message: "required property is missing"})
		}
	case *kind.AdditionalProperties:
		for _, name := range k.Properties {
			out = append(out, Problem{Path: at + PointerToken(name), Message: "property is not allowed"})
		}
	default:
		out = append(out, Problem{Path: at, Message: shorten(k.LocalizedString(printer))})
	}
	return out
}

func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteString(PointerToken(t))
	}
	return b.String()
}

// PointerToken returns a member name or an index as one token of a JSON
// pointer (RFC 6901), its "/" included: "~" and "/" escaped.
func PointerToken(t string) string {
	return "/" + strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
}

func shorten(s string) string {
	if utf8.RuneCountInString(s) <= maxMessageRunes {
		return s
	}
	r := []rune(s)
	return string(r[:maxMessageRunes]) + "…"
}

// decode parses one JSON document keeping numbers exact (json.Number), the
// form the schema library validates. A document jsonscan.Plain accepts,
// as events usually are, is decoded in one pass (plainValue); any other
// by the schema library's decoder, which also words the error.
func decode(raw []byte) (any, error) {
	if jsonscan.Plain(raw, maxDecodeDepth) {
		return plainValue(raw), nil
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not a single valid JSON value: %w", err)
	}
	return v, nil
}

// jsonValue returns v in the form the schema library validates: values made
// only of JSON types (as json.Unmarshal into any produces them) are used as
// they are, json.RawMessage is decoded, and anything else goes through
// json.Marshal first.
func jsonValue(v any) (any, error) {
	if raw, ok := v.(json.RawMessage); ok {
		return decode(raw)
	}
	if native(v) {
		return v, nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("not representable as JSON: %w", err)
	}
	return decode(raw)
}

// native reports whether v consists only of the types encoding/json and
// jsonschema.UnmarshalJSON produce.
func native(v any) bool {
	switch v := v.(type) {
	case nil, bool, string, float64, json.Number:
		return true
	case map[string]any:
		for _, e := range v {
			if !native(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range v {
			if !native(e) {
				return false
			}
		}
		return true
	}
	return false
}
