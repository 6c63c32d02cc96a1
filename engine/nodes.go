package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/runstream/runstream"
)

// DecodeConfig decodes a node's config strictly: unknown fields, fields of
// the wrong type and trailing data fail with a caller-safe error.
func DecodeConfig(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errors.New(decodeMessage(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the config object")
	}
	return nil
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Transform returns the transform node type: config {"expression"}, an
// expression over input and nodes.<id>.output whose value is the node's
// output.
func Transform() NodeType {
	return NodeType{Name: "transform", Repeatable: AlwaysRepeatable, Compile: func(raw json.RawMessage) (NodeFunc, error) {
		var c struct {
			Expression string `json:"expression"`
		}
		if err := DecodeConfig(raw, &c); err != nil {
			return nil, err
		}
		e, err := CompileExpr(c.Expression)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, n *NodeRun) (json.RawMessage, error) {
			env, err := n.Env()
			if err != nil {
				return nil, err
			}
			out, err := e.EvalContext(ctx, env)
			if err != nil {
				if _, ok := errors.AsType[*runstream.Error](err); ok || ctx.Err() != nil {
					return nil, err
				}
				return nil, runstream.Errorf(runstream.CodeWorkflowNodeFailed, "%s", err.Error())
			}
			return out, nil
		}, nil
	}}
}

// MaxDelay is the longest wait of a delay node.
const MaxDelay = 24 * time.Hour

// Delay returns the delay node type: config {"ms", "progressEveryMs"?}. It
// waits ms milliseconds, reporting node.progress {phase "waiting",
// message, percent} at the start, every progressEveryMs (default a tenth
// of the wait, at least 100 ms) and at the end. Its output is
// {"waitedMs": ms}.
func Delay() NodeType {
	return NodeType{Name: "delay", Repeatable: AlwaysRepeatable, Compile: func(raw json.RawMessage) (NodeFunc, error) {
		var c struct {
			Ms              int64 `json:"ms"`
			ProgressEveryMs int64 `json:"progressEveryMs"`
		}
		if err := DecodeConfig(raw, &c); err != nil {
			return nil, err
		}
		total := time.Duration(c.Ms) * time.Millisecond
		if c.Ms < 0 || total > MaxDelay {
			return nil, fmt.Errorf("ms must be 0 to %d", MaxDelay.Milliseconds())
		}
		every := time.Duration(c.ProgressEveryMs) * time.Millisecond
		switch {
		case c.ProgressEveryMs < 0 || every > MaxDelay:
			return nil, fmt.Errorf("progressEveryMs must be 0 (default) to %d", MaxDelay.Milliseconds())
		case every == 0:
			every = max(total/10, 100*time.Millisecond)
		}
		return func(ctx context.Context, n *NodeRun) (json.RawMessage, error) {
			report := func(waited time.Duration) error {
				pct := 100.0
				if total > 0 {
					pct = float64(waited) * 100 / float64(total)
				}
				return n.Progress(ctx, "waiting", fmt.Sprintf("waited %d of %d ms", waited.Milliseconds(), total.Milliseconds()), pct)
			}
			if err := report(0); err != nil {
				return nil, err
			}
			for waited := time.Duration(0); waited < total; {
				step := min(every, total-waited)
				if err := sleep(ctx, step); err != nil {
					return nil, err
				}
				waited += step
				if err := report(waited); err != nil {
					return nil, err
				}
			}
			return json.Marshal(map[string]int64{"waitedMs": c.Ms})
		}, nil
	}}
}

// Limits of a human_input node.
const (
	maxActions      = 20
	maxActionLength = 64
)

// HumanInput returns the human_input node type: config {"formSchema"?,
// "actions"?, "expiresInMs"?}. It pauses the run with run.awaiting_input
// (formSchema defaults to {"type":"object"}, actions to ["submit"], the
// token's lifetime to the engine's). A resume request names one of the
// actions and values that match formSchema; the node's output is then
// {"action", "values"}.
func HumanInput() NodeType {
	return NodeType{Name: "human_input", Repeatable: AlwaysRepeatable, Compile: func(raw json.RawMessage) (NodeFunc, error) {
		var c struct {
			FormSchema  json.RawMessage `json:"formSchema"`
			Actions     []string        `json:"actions"`
			ExpiresInMs int64           `json:"expiresInMs"`
		}
		if err := DecodeConfig(raw, &c); err != nil {
			return nil, err
		}
		if len(c.FormSchema) == 0 {
			c.FormSchema = json.RawMessage(`{"type":"object"}`)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, c.FormSchema); err != nil || compact.Bytes()[0] != '{' {
			return nil, runstream.Errorf(runstream.CodeWorkflowDefinitionInvalid, "formSchema must be a JSON Schema object").WithDetail("rule", RuleInvalidSchema)
		}
		schema := json.RawMessage(compact.Bytes())
		if _, err := CompileSchema(schema); err != nil {
			return nil, runstream.Errorf(runstream.CodeWorkflowDefinitionInvalid, "formSchema: %s", err.Error()).WithDetail("rule", RuleInvalidSchema)
		}
		if len(c.Actions) == 0 {
			c.Actions = []string{"submit"}
		}
		if err := checkActions(c.Actions); err != nil {
			return nil, err
		}
		if c.ExpiresInMs < 0 {
			return nil, errors.New("expiresInMs must not be negative")
		}
		ttl := time.Duration(c.ExpiresInMs) * time.Millisecond
		return func(ctx context.Context, n *NodeRun) (json.RawMessage, error) {
			return nil, n.AwaitInput(ctx, schema, c.Actions, ttl)
		}, nil
	}}
}

func checkActions(actions []string) error {
	if len(actions) > maxActions {
		return fmt.Errorf("at most %d actions are allowed", maxActions)
	}
	for i, a := range actions {
		if a == "" || len(a) > maxActionLength {
			return fmt.Errorf("actions[%d] must have 1 to %d bytes", i, maxActionLength)
		}
		if slices.Index(actions, a) != i {
			return fmt.Errorf("action %q is given twice", a)
		}
	}
	return nil
}
