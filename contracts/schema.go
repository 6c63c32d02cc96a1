package contracts

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/runstream/runstream"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schema is a JSON Schema (draft 2020-12 unless it says otherwise) given
// by a user: a workflow's inputSchema or a human_input node's formSchema.
// It is safe for concurrent use.
type Schema struct {
	s *jsonschema.Schema
}

// userSchemaURL names a user's schema inside the compiler; nothing is
// fetched from it.
const userSchemaURL = "https://schemas.runstream.invalid/schema.json"

// noLoader refuses every external $ref: the library's default loader would
// read local files or URLs named by a user's schema.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema references are not allowed (%s)", url)
}

// CompileSchema compiles a user's schema. Its error is safe to show to the
// user: it never names the compiler's internal URL.
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
	if err := c.AddResource(userSchemaURL, doc); err != nil {
		return nil, fmt.Errorf("invalid schema: %s", shorten(err.Error()))
	}
	s, err := c.Compile(userSchemaURL)
	if err != nil {
		return nil, fmt.Errorf("invalid schema: %s", shorten(strings.ReplaceAll(err.Error(), userSchemaURL, "")))
	}
	return &Schema{s: s}, nil
}

// Validate returns the problems of value against the schema, sorted by
// path, or nil when it matches.
func (s *Schema) Validate(value json.RawMessage) []Problem {
	v, err := decode(value)
	if err != nil {
		return []Problem{{Path: "", Message: "not a valid JSON value"}}
	}
	if err := s.s.Validate(v); err != nil {
		return newValidationError(schemaProblems(nil, "", err)).Problems
	}
	return nil
}

// ValidationError returns nil when value matches the schema, else an error
// with the given code that names the first failing paths and carries the
// first MaxProblems problems in details.problems (and their number in
// details.problems_total when there are more); what names the value in the
// message.
func (s *Schema) ValidationError(value json.RawMessage, code runstream.ErrorCode, what string) error {
	problems := s.Validate(value)
	if len(problems) == 0 {
		return nil
	}
	var paths []string
	for _, p := range problems[:min(len(problems), maxNamedPaths)] {
		paths = append(paths, cmp.Or(p.Path, "/"))
	}
	at := strings.Join(paths, ", ")
	if len(problems) > maxNamedPaths {
		at = fmt.Sprintf("%s and %d more places", at, len(problems)-maxNamedPaths)
	}
	return WithProblems(runstream.Errorf(code, "%s does not match its schema at %s", what, at), problems)
}

// WithProblems returns e with the first MaxProblems of problems in
// details.problems, and their number in details.problems_total when there
// are more.
func WithProblems(e *runstream.Error, problems []Problem) *runstream.Error {
	if len(problems) > MaxProblems {
		e = e.WithDetail("problems_total", len(problems))
		problems = problems[:MaxProblems]
	}
	return e.WithDetail("problems", problems)
}

// MaxProblems is the number of problems an error of ValidationError
// carries in details.problems; details.problems_total then counts them all.
const MaxProblems = 20

// maxNamedPaths is the number of paths ValidationError's message names.
const maxNamedPaths = 5
