package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/runstream/runstream"
)

// Tool is a built-in tool that an llm node's model may call (http_get,
// sql_query). A tool runs under the same policies as the node type it
// mirrors.
type Tool struct {
	// Name matches ^[a-z][a-z0-9_]{0,63}$.
	Name        string
	Description string
	// Parameters is the JSON Schema of the tool's input object, as shown
	// to the model.
	Parameters json.RawMessage
	// Call runs the tool on the model's input. A *runstream.Error's
	// message is shown to the model and in node.tool.finished; any other
	// error counts as a failure without detail. Call must return promptly
	// once ctx is done.
	Call func(ctx context.Context, input json.RawMessage) (json.RawMessage, error)
}

var toolNamePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// toolIndex returns tools by name, refusing an invalid or repeated name.
func toolIndex(tools []Tool) (map[string]Tool, error) {
	out := make(map[string]Tool, len(tools))
	for _, t := range tools {
		if !toolNamePattern.MatchString(t.Name) || t.Call == nil {
			return nil, fmt.Errorf("tool %q needs a name matching %s and a Call function", t.Name, toolNamePattern)
		}
		if _, ok := out[t.Name]; ok {
			return nil, fmt.Errorf("tool %q given twice", t.Name)
		}
		out[t.Name] = t
	}
	return out, nil
}

// CallTool runs one tool call of node n with its events around it:
// node.tool.started, the call, node.tool.finished. The tool's failure is
// not the node's: it is returned as toolErr (caller-safe, for the model),
// while err reports that the node's events could not be written or ctx
// ended, after which the node should return err.
func CallTool(ctx context.Context, n *NodeRun, tool Tool, callID string, input json.RawMessage) (output json.RawMessage, toolErr *runstream.Error, err error) {
	if err := n.ToolStarted(ctx, callID, tool.Name, input); err != nil {
		return nil, nil, err
	}
	start := time.Now()
	out, callErr := tool.Call(ctx, input)
	if ctx.Err() != nil {
		return nil, nil, context.Cause(ctx)
	}
	if callErr != nil {
		toolErr = toolError(callErr)
		out = nil
	} else if len(out) == 0 {
		out = json.RawMessage("null")
	}
	if err := n.ToolFinished(ctx, callID, tool.Name, out, toolErr, time.Since(start)); err != nil {
		return nil, nil, err
	}
	return out, toolErr, nil
}

// toolError is the caller-safe error of a failed tool call.
func toolError(err error) *runstream.Error {
	var re *runstream.Error
	if errors.As(err, &re) && re.Code != runstream.CodeInternal {
		out := *re
		out.Err = nil
		return &out
	}
	return runstream.Errorf(runstream.CodeWorkflowNodeFailed, "the tool failed")
}

// retryOverride sets whether one node error may be retried, whatever the
// default of its code: an http node's 5xx and 429 answers are retryable,
// its other failures are not, though they share one code.
type retryOverride struct {
	err       *runstream.Error
	retryable bool
}

func (o *retryOverride) Error() string { return o.err.Error() }
func (o *retryOverride) Unwrap() error { return o.err }

// WithRetryable returns err marked retryable or not for the engine, which
// then retries the node (per its policy) and writes "retryable" in the
// error object accordingly.
func WithRetryable(err *runstream.Error, retryable bool) error {
	return &retryOverride{err: err, retryable: retryable}
}

// retryableOf reports whether a node's error may be retried: as marked by
// WithRetryable, else as the default of its code.
func retryableOf(err error, code runstream.ErrorCode) bool {
	var o *retryOverride
	if errors.As(err, &o) {
		return o.retryable
	}
	return code.Retryable()
}
