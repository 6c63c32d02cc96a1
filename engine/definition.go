package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/runstream/runstream/internal/jsontype"
	"io"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/runstream/runstream"
	"go.yaml.in/yaml/v3"
)

// Definition is a workflow definition as published: a DAG of nodes, an
// optional JSON Schema for the run input and the run's output.
type Definition struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// InputSchema, when set, is a JSON Schema (draft 2020-12 unless it
	// says otherwise) that a run's input must match.
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	Nodes       []NodeSpec      `json:"nodes"`
	// Output names the node whose output is the run's output, or is an
	// expression over input and nodes.<id>.output. Empty: the output is
	// null.
	Output string `json:"output,omitempty"`
}

// NodeSpec is one node of a definition.
type NodeSpec struct {
	// ID matches ^[a-z][a-z0-9_]{0,63}$ and is unique in the definition.
	ID   string `json:"id"`
	Type string `json:"type"`
	// Needs lists the nodes that must complete before this one starts.
	Needs  []string        `json:"needs,omitempty"`
	Config json.RawMessage `json:"config,omitempty"`
	Retry  *RetryPolicy    `json:"retry,omitempty"`
	// TimeoutMs bounds each attempt; 0 means no timeout.
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
	// Artifact, when set, stores the node's output as an artifact (see
	// ArtifactContent), announced by artifact.created.
	Artifact *ArtifactSpec `json:"artifact,omitempty"`
}

// RetryPolicy says how often a node is attempted. Attempt n+1 starts
// BackoffMs·2^(n-1) milliseconds after attempt n failed with a retryable
// error.
type RetryPolicy struct {
	MaxAttempts int   `json:"maxAttempts"`
	BackoffMs   int64 `json:"backoffMs"`
}

// Limits of a definition.
const (
	MaxNodes       = 200
	MaxNameLength  = 200
	MaxAttempts    = 10
	MaxBackoff     = time.Hour
	MaxNodeTimeout = 24 * time.Hour
)

// Rules of a definition, reported in details.rule of
// WORKFLOW_DEFINITION_INVALID.
const (
	RuleMalformed       = "malformed"
	RuleInvalidName     = "invalid_name"
	RuleNoNodes         = "no_nodes"
	RuleTooManyNodes    = "too_many_nodes"
	RuleInvalidID       = "invalid_id"
	RuleDuplicateID     = "duplicate_id"
	RuleUnknownType     = "unknown_type"
	RuleUnknownNeed     = "unknown_need"
	RuleCycle           = "cycle"
	RuleInvalidConfig   = "invalid_config"
	RuleInvalidRetry    = "invalid_retry"
	RuleInvalidTimeout  = "invalid_timeout"
	RuleInvalidSchema   = "invalid_schema"
	RuleInvalidOutput   = "invalid_output"
	RuleInvalidArtifact = "invalid_artifact"
	RuleParallelInput   = "parallel_human_input"
)

var nodeIDPattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// invalid returns a WORKFLOW_DEFINITION_INVALID error for rule.
func invalid(nodeID, rule, format string, args ...any) *runstream.Error {
	e := runstream.Errorf(runstream.CodeWorkflowDefinitionInvalid, format, args...).WithDetail("rule", rule)
	if nodeID != "" {
		e.WithNode(nodeID)
	}
	return e
}

// ParseDefinition decodes a definition from JSON. Unknown fields, a value
// that is not one JSON object and fields of the wrong type fail with
// WORKFLOW_DEFINITION_INVALID, rule "malformed". It checks nothing else:
// see Registry.Compile.
func ParseDefinition(raw []byte) (*Definition, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var d Definition
	if err := dec.Decode(&d); err != nil {
		return nil, invalid("", RuleMalformed, "the definition is not a valid definition object: %s", decodeMessage(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, invalid("", RuleMalformed, "the definition has data after its JSON object")
	}
	return &d, nil
}

// decodeMessage is the caller-safe text of a JSON decoding error: it names
// fields and offsets, never values.
func decodeMessage(err error) string {
	if msg, ok := jsontype.Describe(err, "it"); ok {
		return msg
	}
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return fmt.Sprintf("invalid JSON at byte %d", syntax.Offset)
	}
	return err.Error()
}

// YAMLToJSON converts one YAML document to JSON. Mapping keys must be
// strings; duplicate keys, several documents and values JSON cannot hold
// fail with CodeInvalidArgument.
func YAMLToJSON(raw []byte) (json.RawMessage, error) {
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	var doc any
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, runstream.Errorf(runstream.CodeInvalidArgument, "the YAML body is empty")
		}
		return nil, runstream.Wrap(err, runstream.CodeInvalidArgument, "invalid YAML: %s", err.Error())
	}
	var extra any
	if err := dec.Decode(&extra); err != io.EOF {
		return nil, runstream.Errorf(runstream.CodeInvalidArgument, "the YAML body holds more than one document")
	}
	v, err := jsonCompatible(doc, 0)
	if err != nil {
		return nil, runstream.Wrap(err, runstream.CodeInvalidArgument, "YAML not representable as JSON: %s", err.Error())
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, runstream.Wrap(err, runstream.CodeInvalidArgument, "YAML not representable as JSON")
	}
	return out, nil
}

// maxYAMLDepth bounds the nesting of a converted YAML document.
const maxYAMLDepth = 64

// jsonCompatible turns a decoded YAML value into one json.Marshal accepts
// with the same meaning.
func jsonCompatible(v any, depth int) (any, error) {
	if depth > maxYAMLDepth {
		return nil, fmt.Errorf("nesting deeper than %d levels", maxYAMLDepth)
	}
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			c, err := jsonCompatible(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case map[any]any:
		return nil, errors.New("a mapping key is not a string")
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			c, err := jsonCompatible(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case string:
		if !utf8.ValidString(v) {
			return nil, errors.New("a string is not valid UTF-8")
		}
		return v, nil
	case nil, bool, int, int64, uint64, float64:
		return v, nil
	case time.Time:
		return v.Format(time.RFC3339Nano), nil
	}
	return nil, fmt.Errorf("unsupported value of type %T", v)
}
