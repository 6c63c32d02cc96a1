package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
)

// Env is what expressions and templates see: the run's input as input,
// and the outputs of upstream nodes as nodes.<id>.output. Values are
// decoded JSON (objects are map[string]any, numbers float64).
type Env struct {
	Input any                `expr:"input"`
	Nodes map[string]EnvNode `expr:"nodes"`
	// Meter is set by the evaluation itself, for the metered operations.
	Meter *exprMeter `expr:"metered evaluation"`
}

// EnvNode is one node as expressions see it.
type EnvNode struct {
	Output any `expr:"output"`
}

// NewEnv decodes a run input and node outputs into an Env.
func NewEnv(input json.RawMessage, outputs map[string]json.RawMessage) (Env, error) {
	env := Env{Nodes: make(map[string]EnvNode, len(outputs))}
	if len(input) > 0 {
		if err := json.Unmarshal(input, &env.Input); err != nil {
			return Env{}, fmt.Errorf("decode run input: %w", err)
		}
	}
	for id, out := range outputs {
		var v any
		if err := json.Unmarshal(out, &v); err != nil {
			return Env{}, fmt.Errorf("decode output of node %s: %w", id, err)
		}
		env.Nodes[id] = EnvNode{Output: v}
	}
	return env, nil
}

// maxExprNodes bounds the size of a compiled expression.
const maxExprNodes = 2000

// Expr is a compiled expression over an Env (github.com/expr-lang/expr
// syntax). It is safe for concurrent use.
type Expr struct {
	src     string
	program *vm.Program
}

// CompileExpr compiles an expression over Env. Unknown names fail here, at
// publish time. The error is caller-safe.
func CompileExpr(src string) (*Expr, error) {
	if strings.TrimSpace(src) == "" {
		return nil, errors.New("the expression is empty")
	}
	patcher := &meterPatcher{}
	opts := append([]expr.Option{expr.Env(Env{}), expr.MaxNodes(maxExprNodes)}, meterOptions(patcher)...)
	p, err := expr.Compile(src, opts...)
	if err == nil {
		err = patcher.err
	}
	if err != nil {
		return nil, fmt.Errorf("invalid expression: %s", shorten(firstLine(err.Error())))
	}
	return &Expr{src: src, program: p}, nil
}

// Eval evaluates the expression and returns its value as JSON, within
// the bounds of an evaluation (see ExprBudgetBytes).
func (e *Expr) Eval(env Env) (json.RawMessage, error) {
	return e.EvalContext(context.Background(), env)
}

// EvalContext is Eval that stops, with ctx's cause, at the first metered
// operation after ctx is done. An evaluation past its budget fails with
// WORKFLOW_NODE_LIMIT_EXCEEDED and details.limit "expression_budget".
func (e *Expr) EvalContext(ctx context.Context, env Env) (json.RawMessage, error) {
	m := newExprMeter(ctx)
	v, err := e.run(m, env)
	if err == nil {
		// The value may share arrays many times over; walk it, within the
		// budget, before encoding it.
		err = m.size(v)
	}
	if err != nil {
		if stopped := stoppedError(ctx, "expression"); stopped != nil {
			return nil, stopped
		}
		return nil, evalError("expression failed", err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("expression value is not representable as JSON: %T", v)
	}
	return out, nil
}

// run evaluates the program over env with m as its meter.
func (e *Expr) run(m *exprMeter, env Env) (any, error) {
	env.Meter = m
	machine := vm.VM{MemoryBudget: exprVMMemoryBudget}
	return machine.Run(e.program, env)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// Template is text with {{ expression }} placeholders over an Env. A
// string value is inserted as it is, any other value as JSON.
type Template struct {
	parts []templatePart
}

type templatePart struct {
	text string
	expr *Expr // nil for literal text
}

// CompileTemplate compiles a template. An unclosed {{ or an invalid
// expression fails. The error is caller-safe.
func CompileTemplate(src string) (*Template, error) {
	t := &Template{}
	for src != "" {
		i := strings.Index(src, "{{")
		if i < 0 {
			t.parts = append(t.parts, templatePart{text: src})
			break
		}
		if i > 0 {
			t.parts = append(t.parts, templatePart{text: src[:i]})
		}
		rest := src[i+2:]
		j := strings.Index(rest, "}}")
		if j < 0 {
			return nil, errors.New("template: {{ without }}")
		}
		e, err := CompileExpr(rest[:j])
		if err != nil {
			return nil, fmt.Errorf("template: %w", err)
		}
		t.parts = append(t.parts, templatePart{expr: e})
		src = rest[j+2:]
	}
	return t, nil
}

// Render renders the template over env. Its expressions share one
// evaluation budget (see ExprBudgetBytes), which the rendered text counts
// against too.
func (t *Template) Render(env Env) (string, error) {
	return t.RenderContext(context.Background(), env)
}

// RenderContext is Render that stops, with ctx's cause, at the first
// metered operation after ctx is done: a node renders its templates with
// its attempt's context, so its timeout and a cancel stop them.
func (t *Template) RenderContext(ctx context.Context, env Env) (string, error) {
	s, err := t.render(newExprMeter(ctx), env)
	if err != nil {
		if stopped := stoppedError(ctx, "template"); stopped != nil {
			return "", stopped
		}
	}
	return s, err
}

// stoppedError is the error of an evaluation of what ("expression",
// "template") that failed because ctx is done, wrapping ctx's cause; nil
// while ctx is not done.
func stoppedError(ctx context.Context, what string) error {
	if ctx.Err() == nil {
		return nil
	}
	return fmt.Errorf("%s stopped: %w", what, context.Cause(ctx))
}

// render renders the template, its expressions charged to m.
func (t *Template) render(m *exprMeter, env Env) (string, error) {
	var b strings.Builder
	for _, p := range t.parts {
		if p.expr == nil {
			b.WriteString(p.text)
			continue
		}
		v, err := p.expr.run(m, env)
		if err == nil {
			err = m.size(v)
		}
		if err != nil {
			return "", evalError("template: expression failed", err)
		}
		if s, ok := v.(string); ok {
			b.WriteString(s)
			continue
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return "", fmt.Errorf("template: value is not representable as JSON: %T", v)
		}
		b.Write(raw)
	}
	return b.String(), nil
}
