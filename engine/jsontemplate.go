package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// JSONTemplate is a JSON value whose strings are templates (see
// Template): rendering it renders each string. A string that is exactly
// one placeholder, "{{ expr }}", takes the expression's value whatever its
// type, so {"limit": "{{ input.limit }}"} renders a number. It is safe for
// concurrent use.
type JSONTemplate struct {
	root jsonNode
}

// jsonNode is one value of a JSONTemplate: a literal, a template string,
// a single expression, an object or an array.
type jsonNode struct {
	literal any // a JSON value without templates (also used for null)
	tmpl    *Template
	expr    *Expr
	object  map[string]jsonNode
	array   []jsonNode
	kind    byte // 'l' literal, 't' template, 'e' expression, 'o' object, 'a' array
}

// maxJSONTemplateDepth bounds the nesting of a JSON template.
const maxJSONTemplateDepth = 32

// CompileJSONTemplate compiles a JSON value; empty raw compiles to null.
// The error is caller-safe.
func CompileJSONTemplate(raw json.RawMessage) (*JSONTemplate, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return &JSONTemplate{root: jsonNode{kind: 'l'}}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errors.New(decodeMessage(err))
	}
	root, err := compileJSONNode(v, 0)
	if err != nil {
		return nil, err
	}
	return &JSONTemplate{root: root}, nil
}

func compileJSONNode(v any, depth int) (jsonNode, error) {
	if depth > maxJSONTemplateDepth {
		return jsonNode{}, fmt.Errorf("nesting deeper than %d levels", maxJSONTemplateDepth)
	}
	switch v := v.(type) {
	case string:
		if !strings.Contains(v, "{{") {
			return jsonNode{kind: 'l', literal: v}, nil
		}
		trimmed := strings.TrimSpace(v)
		if inner, ok := strings.CutPrefix(trimmed, "{{"); ok {
			if inner, ok := strings.CutSuffix(inner, "}}"); ok && !strings.Contains(inner, "{{") && !strings.Contains(inner, "}}") {
				e, err := CompileExpr(inner)
				if err != nil {
					return jsonNode{}, fmt.Errorf("template: %w", err)
				}
				return jsonNode{kind: 'e', expr: e}, nil
			}
		}
		t, err := CompileTemplate(v)
		if err != nil {
			return jsonNode{}, err
		}
		return jsonNode{kind: 't', tmpl: t}, nil
	case map[string]any:
		n := jsonNode{kind: 'o', object: make(map[string]jsonNode, len(v))}
		for k, e := range v {
			c, err := compileJSONNode(e, depth+1)
			if err != nil {
				return jsonNode{}, err
			}
			n.object[k] = c
		}
		return n, nil
	case []any:
		n := jsonNode{kind: 'a', array: make([]jsonNode, len(v))}
		for i, e := range v {
			c, err := compileJSONNode(e, depth+1)
			if err != nil {
				return jsonNode{}, err
			}
			n.array[i] = c
		}
		return n, nil
	}
	return jsonNode{kind: 'l', literal: v}, nil
}

// Render renders the template over env into JSON. Its expressions share
// one evaluation budget (see ExprBudgetBytes), as a Template's do.
func (t *JSONTemplate) Render(env Env) (json.RawMessage, error) {
	return t.RenderContext(context.Background(), env)
}

// RenderContext is Render that stops, with ctx's cause, at the first
// metered operation after ctx is done (see Template.RenderContext).
func (t *JSONTemplate) RenderContext(ctx context.Context, env Env) (json.RawMessage, error) {
	v, err := t.root.render(newExprMeter(ctx), env)
	if err != nil {
		if stopped := stoppedError(ctx, "template"); stopped != nil {
			return nil, stopped
		}
		return nil, err
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("template: value is not representable as JSON")
	}
	return out, nil
}

func (n jsonNode) render(m *exprMeter, env Env) (any, error) {
	switch n.kind {
	case 't':
		return n.tmpl.render(m, env)
	case 'e':
		v, err := n.expr.run(m, env)
		if err == nil {
			err = m.size(v)
		}
		if err != nil {
			return nil, evalError("template: expression failed", err)
		}
		return v, nil
	case 'o':
		out := make(map[string]any, len(n.object))
		for k, c := range n.object {
			v, err := c.render(m, env)
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	case 'a':
		out := make([]any, len(n.array))
		for i, c := range n.array {
			v, err := c.render(m, env)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	return n.literal, nil
}
