package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/runstream/runstream"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Schema is a compiled JSON Schema: a definition's inputSchema or a
// human_input node's formSchema. It is safe for concurrent use.
type Schema struct {
	s *jsonschema.Schema
}

// Problem is one way a value breaks a schema.
type Problem struct {
	// Path is a JSON Pointer to the failing value ("" is the value itself).
	Path    string `json:"path"`
	Message string `json:"message"`
}

// schemaURL names a schema inside its compiler; nothing is fetched.
const schemaURL = "https://schemas.runstream.invalid/schema.json"

// noLoader refuses every external reference, so a schema cannot make the
// server read files or the network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema references are not allowed (%s)", url)
}

// CompileSchema compiles a JSON Schema, draft 2020-12 unless its $schema
// names another draft. External references are refused. Its error is
// caller-safe.
func CompileSchema(raw json.RawMessage) (*Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, errors.New("the schema is not valid JSON")
	}
	if _, ok := doc.(map[string]any); !ok {
		if _, ok := doc.(bool); !ok {
			return nil, errors.New("a schema must be an object or a boolean")
		}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("invalid schema: %s", shorten(err.Error()))
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("invalid schema: %s", shorten(strings.ReplaceAll(err.Error(), schemaURL, "")))
	}
	return &Schema{s: s}, nil
}

// Validate returns the problems of value (JSON) against the schema, sorted
// by path; none when it matches.
func (s *Schema) Validate(value json.RawMessage) []Problem {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
	if err != nil {
		return []Problem{{Path: "", Message: "not a valid JSON value"}}
	}
	err = s.s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []Problem{{Path: "", Message: "invalid value"}}
	}
	problems := leaves(nil, ve)
	slices.SortFunc(problems, func(a, b Problem) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
	return slices.Compact(problems)
}

// ValidationError returns nil when value matches the schema, else an error
// with code and the problems in details.problems.
func (s *Schema) ValidationError(value json.RawMessage, code runstream.ErrorCode, what string) error {
	problems := s.Validate(value)
	if len(problems) == 0 {
		return nil
	}
	paths := make([]string, len(problems))
	for i, p := range problems {
		paths[i] = p.Path
		if paths[i] == "" {
			paths[i] = "/"
		}
	}
	return runstream.Errorf(code, "%s does not match its schema at %s", what, strings.Join(paths, ", ")).
		WithDetail("problems", problems)
}

var printer = message.NewPrinter(language.English)

func leaves(out []Problem, ve *jsonschema.ValidationError) []Problem {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			out = leaves(out, c)
		}
		return out
	}
	at := pointer(ve.InstanceLocation)
	switch k := ve.ErrorKind.(type) {
	case *kind.Required:
		for _, name := range k.Missing {
			out = append(out, Problem{Path: at + "/" + escapePointer(name), Message: "required property is missing"})
		}
	case *kind.AdditionalProperties:
		for _, name := range k.Properties {
			out = append(out, Problem{Path: at + "/" + escapePointer(name), Message: "property is not allowed"})
		}
	default:
		out = append(out, Problem{Path: at, Message: shorten(k.LocalizedString(printer))})
	}
	return out
}

func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(escapePointer(t))
	}
	return b.String()
}

func escapePointer(t string) string {
	return strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1")
}

// shorten bounds a message that may quote part of a value.
func shorten(s string) string {
	const max = 200
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max]) + "…"
}
