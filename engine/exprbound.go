package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"regexp/syntax"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/vm/runtime"

	"github.com/runstream/runstream"
)

// Bounds of one expression evaluation. The expression library bounds the
// elements of ranges, array and map literals and loop iterations (its
// memory budget) but not the bytes of strings, and it cannot be
// interrupted. So every operation that can build a large value is
// rewritten at compile time into a metered call: it charges what it builds
// to the evaluation's budget before building it, and checks the
// evaluation's context, so a runaway evaluation fails with
// WORKFLOW_NODE_LIMIT_EXCEEDED (or its context's error) instead of
// exhausting memory.
const (
	// ExprBudgetBytes bounds the bytes one evaluation builds in total:
	// strings made by +, repeat, replace, join, upper…, values walked by
	// toJSON, string, flatten, == and in, and its result.
	ExprBudgetBytes = 16 << 20
	// exprVMMemoryBudget is the expression library's own budget, in
	// elements of ranges, literals and loop iterations.
	exprVMMemoryBudget = 1_000_000
	// exprMatchSteps bounds the work of one evaluation's matches all
	// together: for each, the bytes of its string times the instructions
	// of its compiled pattern (the bound of Go's regexp engine on it), and
	// exprCompileSteps per instruction of each pattern it compiles; about
	// a quarter of a second of CPU. A match cannot be interrupted, so this
	// bound, rather than the context, is what ends a loop of them.
	exprMatchSteps   = 50_000_000
	exprCompileSteps = 64
	// exprMaxPattern bounds the bytes of a matches pattern.
	exprMaxPattern = 4096
	// exprMaxPatterns bounds the compiled patterns one evaluation keeps.
	exprMaxPatterns = 16
)

// LimitExpressionBudget is details.limit of an evaluation that ran out of
// its budget.
const LimitExpressionBudget = "expression_budget"

// errExprBudget is returned by metered operations past the budget.
var errExprBudget = errors.New("the expression exceeds its budget")

// errMatchBudget is returned by a matches past the budget of matching.
var errMatchBudget = fmt.Errorf("%w of regular expression matching", errExprBudget)

// exprMeter is one evaluation's budget. Expressions reach it through the
// Env field the patched tree names; it is not safe for concurrent use.
type exprMeter struct {
	ctx  context.Context
	left int64
	// matchLeft is what is left of the matching budget (exprMatchSteps).
	matchLeft int64
	// patterns are the evaluation's compiled matches patterns.
	patterns map[string]*meteredPattern
}

// meteredPattern is a compiled matches pattern and its size in
// instructions.
type meteredPattern struct {
	re    *regexp.Regexp
	insts int64
}

// matchWork takes steps from the matching budget.
func (m *exprMeter) matchWork(steps int64) error {
	if steps > m.matchLeft {
		m.matchLeft = 0
		return errMatchBudget
	}
	m.matchLeft -= steps
	return nil
}

// compilePattern compiles a matches pattern of at most exprMaxPattern
// bytes (errMatchBudget past it) and counts its instructions.
func compilePattern(p string) (*meteredPattern, error) {
	if len(p) > exprMaxPattern {
		return nil, errMatchBudget
	}
	parsed, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return nil, err
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, err
	}
	return &meteredPattern{re: re, insts: int64(len(prog.Inst))}, nil
}

// pattern returns p compiled, charging its bytes and its compiling the
// first time in the evaluation.
func (m *exprMeter) pattern(p string) (*meteredPattern, error) {
	if c, ok := m.patterns[p]; ok {
		return c, nil
	}
	if len(p) > exprMaxPattern {
		return nil, errMatchBudget
	}
	if err := m.charge(int64(len(p))); err != nil {
		return nil, err
	}
	c, err := compilePattern(p)
	if err != nil {
		return nil, err
	}
	if err := m.matchWork(exprCompileSteps * c.insts); err != nil {
		return nil, err
	}
	if m.patterns == nil {
		m.patterns = map[string]*meteredPattern{}
	}
	if len(m.patterns) < exprMaxPatterns {
		m.patterns[p] = c
	}
	return c, nil
}

func newExprMeter(ctx context.Context) *exprMeter {
	return &exprMeter{ctx: ctx, left: ExprBudgetBytes, matchLeft: exprMatchSteps}
}

// charge takes n bytes from the budget and checks the context.
func (m *exprMeter) charge(n int64) error {
	if m == nil {
		return errors.New("metered operation without a meter")
	}
	if n < 0 || n > m.left {
		m.left = 0
		return errExprBudget
	}
	m.left -= n
	if err := m.ctx.Err(); err != nil {
		return context.Cause(m.ctx)
	}
	return nil
}

// size walks v and charges its size (string bytes plus 8 per scalar,
// element and key) to the budget, stopping as soon as the budget is
// exhausted: a value that shares one array many times is walked at most
// as far as the budget allows.
func (m *exprMeter) size(v any) error {
	if err := m.charge(8); err != nil {
		return err
	}
	switch v := v.(type) {
	case nil, bool, int, int64, float64:
		return nil
	case string:
		return m.charge(int64(len(v)))
	case []any:
		for _, e := range v {
			if err := m.size(e); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		for k, e := range v {
			if err := m.charge(int64(len(k))); err != nil {
				return err
			}
			if err := m.size(e); err != nil {
				return err
			}
		}
		return nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		for i := range rv.Len() {
			if err := m.size(rv.Index(i).Interface()); err != nil {
				return err
			}
		}
	case reflect.Map:
		it := rv.MapRange()
		for it.Next() {
			if err := m.size(it.Key().Interface()); err != nil {
				return err
			}
			if err := m.size(it.Value().Interface()); err != nil {
				return err
			}
		}
	case reflect.String:
		return m.charge(int64(rv.Len()))
	}
	return nil
}

// shallow charges the top level of v: a string's bytes, 8 per element of
// an array or map.
func (m *exprMeter) shallow(v any) error {
	switch v := v.(type) {
	case string:
		return m.charge(int64(len(v)))
	case []any:
		return m.charge(8 * int64(len(v)))
	case []string:
		return m.charge(8 * int64(len(v)))
	case map[string]any:
		return m.charge(8 * int64(len(v)))
	}
	return m.charge(0)
}

// meterName is the name of the Env field that carries the meter; it is
// not an identifier a definition can spell.
const meterName = "metered evaluation"

// Names of the metered functions the patcher calls; none is an identifier
// a definition can spell.
const (
	meteredAdd   = "metered +"
	meteredEqual = "metered =="
	meteredNot   = "metered !="
	meteredIn    = "metered in"
	meteredMatch = "metered matches"
	meteredAfter = "metered result"
)

// preChecked lists the builtins whose result can be much larger than
// their arguments; their metered version charges before building.
var preChecked = map[string]bool{
	"repeat": true, "replace": true, "join": true,
	"toJSON": true, "string": true, "flatten": true,
}

// postCharged lists the builtins that build a string or an array about as
// large as their arguments; their result is charged after it is built.
var postCharged = map[string]bool{
	"upper": true, "lower": true, "trim": true, "trimPrefix": true, "trimSuffix": true,
	"toBase64": true, "fromBase64": true, "fromJSON": true, "split": true, "splitAfter": true,
	"concat": true, "keys": true, "values": true, "toPairs": true, "fromPairs": true,
	"sort": true, "sortBy": true, "reverse": true, "uniq": true, "groupBy": true,
	"map": true, "filter": true, "take": true,
}

// meterPatcher rewrites a checked tree so that its growing operations go
// through the metered functions. err is the first fixed matches pattern
// it refuses (one past exprMaxPattern bytes), which the expression's
// compiling returns.
type meterPatcher struct{ err error }

func (p *meterPatcher) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.BinaryNode:
		name := ""
		switch n.Operator {
		case "+":
			if !isNumber(n.Left.Type()) || !isNumber(n.Right.Type()) {
				name = meteredAdd
			}
		case "==":
			if !isScalar(n.Left.Type()) || !isScalar(n.Right.Type()) {
				name = meteredEqual
			}
		case "!=":
			if !isScalar(n.Left.Type()) || !isScalar(n.Right.Type()) {
				name = meteredNot
			}
		case "in":
			name = meteredIn
		case "matches":
			str, fixed := n.Right.(*ast.StringNode)
			if !fixed {
				name = meteredMatch
				break
			}
			// A fixed pattern is compiled once, here, not at each
			// evaluation; one that does not compile is left to the
			// library, which refuses it when the expression compiles,
			// and one too long is refused by CompileExpr.
			switch c, err := compilePattern(str.Value); {
			case err == nil:
				ast.Patch(node, meteredCall(meteredMatch, n.Left, &ast.ConstantNode{Value: c}))
			case errors.Is(err, errMatchBudget) && p.err == nil:
				p.err = fmt.Errorf("a matches pattern has %d bytes, more than %d", len(str.Value), exprMaxPattern)
			}
		}
		if name != "" {
			ast.Patch(node, meteredCall(name, n.Left, n.Right))
		}
	case *ast.BuiltinNode:
		switch {
		case preChecked[n.Name]:
			ast.Patch(node, meteredCall("metered "+n.Name, n.Arguments...))
		case postCharged[n.Name]:
			// Walk visits a node after its children, so the builtin's
			// node, now an argument, is not visited again.
			ast.Patch(node, meteredCall(meteredAfter, n))
		}
	}
}

func meteredCall(name string, args ...ast.Node) ast.Node {
	return &ast.CallNode{
		Callee:    &ast.IdentifierNode{Value: name},
		Arguments: append([]ast.Node{&ast.IdentifierNode{Value: meterName}}, args...),
	}
}

func isNumber(t reflect.Type) bool {
	if t == nil {
		return false
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

func isScalar(t reflect.Type) bool {
	return isNumber(t) || t != nil && (t.Kind() == reflect.String || t.Kind() == reflect.Bool)
}

// meterOptions are the compile options that install the metered
// functions and patcher.
func meterOptions(patcher *meterPatcher) []expr.Option {
	opts := []expr.Option{expr.Patch(patcher)}
	add := func(name string, fn func(m *exprMeter, args []any) (any, error)) {
		opts = append(opts, expr.Function(name, func(params ...any) (any, error) {
			if len(params) == 0 {
				return nil, errors.New("metered operation without a meter")
			}
			m, _ := params[0].(*exprMeter)
			if err := m.charge(0); err != nil {
				return nil, err
			}
			return fn(m, params[1:])
		}))
	}
	add(meteredAdd, func(m *exprMeter, a []any) (any, error) {
		if x, ok := a[0].(string); ok {
			if y, ok := a[1].(string); ok {
				if err := m.charge(int64(len(x)) + int64(len(y))); err != nil {
					return nil, err
				}
				return x + y, nil
			}
		}
		return runtime.Add(a[0], a[1]), nil
	})
	add(meteredEqual, func(m *exprMeter, a []any) (any, error) {
		if err := m.sizes(a...); err != nil {
			return nil, err
		}
		return runtime.Equal(a[0], a[1]), nil
	})
	add(meteredNot, func(m *exprMeter, a []any) (any, error) {
		if err := m.sizes(a...); err != nil {
			return nil, err
		}
		return !runtime.Equal(a[0], a[1]), nil
	})
	add(meteredIn, func(m *exprMeter, a []any) (any, error) {
		if err := m.sizes(a...); err != nil {
			return nil, err
		}
		return runtime.In(a[0], a[1]), nil
	})
	add(meteredMatch, func(m *exprMeter, a []any) (any, error) {
		s, ok := a[0].(string)
		if !ok {
			return nil, fmt.Errorf("matches takes a string, not %T", a[0])
		}
		var c *meteredPattern
		switch p := a[1].(type) {
		case *meteredPattern: // a fixed pattern, compiled with the expression
			c = p
		case string:
			var err error
			if c, err = m.pattern(p); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("matches takes a string pattern, not %T", a[1])
		}
		if err := m.matchWork((int64(len(s)) + 1) * c.insts); err != nil {
			return nil, err
		}
		return c.re.MatchString(s), nil
	})
	add(meteredAfter, func(m *exprMeter, a []any) (any, error) {
		if err := m.shallow(a[0]); err != nil {
			return nil, err
		}
		return a[0], nil
	})
	add("metered repeat", func(m *exprMeter, a []any) (any, error) {
		if len(a) != 2 {
			return nil, fmt.Errorf("repeat takes 2 arguments, got %d", len(a))
		}
		s, ok := a[0].(string)
		if !ok {
			return nil, fmt.Errorf("repeat: the first argument is %T, not a string", a[0])
		}
		n := runtime.ToInt(a[1])
		if n < 0 {
			return nil, fmt.Errorf("repeat: the count %d is negative", n)
		}
		if len(s) > 0 && n > int(ExprBudgetBytes) {
			return nil, errExprBudget
		}
		if err := m.charge(int64(len(s)) * int64(n)); err != nil {
			return nil, err
		}
		return strings.Repeat(s, n), nil
	})
	add("metered replace", func(m *exprMeter, a []any) (any, error) {
		if len(a) != 3 && len(a) != 4 {
			return nil, fmt.Errorf("replace takes 3 or 4 arguments, got %d", len(a))
		}
		s, ok1 := a[0].(string)
		old, ok2 := a[1].(string)
		repl, ok3 := a[2].(string)
		if !ok1 || !ok2 || !ok3 {
			return nil, errors.New("replace takes strings")
		}
		count := int64(strings.Count(s, old))
		if len(a) == 4 {
			if n := int64(runtime.ToInt(a[3])); n >= 0 {
				count = min(count, n)
			}
		}
		if err := m.charge(int64(len(s)) + count*int64(len(repl))); err != nil {
			return nil, err
		}
		return callBuiltin("replace", a)
	})
	add("metered join", func(m *exprMeter, a []any) (any, error) {
		if len(a) == 0 {
			return nil, errors.New("join takes 1 or 2 arguments")
		}
		if err := m.sizes(a...); err != nil {
			return nil, err
		}
		if len(a) == 2 {
			glue, _ := a[1].(string)
			if err := m.charge(int64(len(glue)) * int64(reflectLen(a[0]))); err != nil {
				return nil, err
			}
		}
		return callBuiltin("join", a)
	})
	for _, name := range []string{"toJSON", "string", "flatten"} {
		add("metered "+name, func(m *exprMeter, a []any) (any, error) {
			// The output of these is at most a few times the size walked,
			// so walking twice charges it.
			if err := m.sizes(a...); err != nil {
				return nil, err
			}
			if err := m.sizes(a...); err != nil {
				return nil, err
			}
			return callBuiltin(name, a)
		})
	}
	return opts
}

func (m *exprMeter) sizes(vs ...any) error {
	for _, v := range vs {
		if err := m.size(v); err != nil {
			return err
		}
	}
	return nil
}

func reflectLen(v any) int {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map, reflect.String:
		return rv.Len()
	}
	return 0
}

// callBuiltin calls the expression library's builtin name.
func callBuiltin(name string, args []any) (any, error) {
	i, ok := builtin.Index[name]
	if !ok {
		return nil, fmt.Errorf("no builtin %s", name)
	}
	f := builtin.Builtins[i]
	switch {
	case f.Fast != nil && len(args) == 1:
		return f.Fast(args[0]), nil
	case f.Func != nil:
		return f.Func(args...)
	case f.Safe != nil:
		v, _, err := f.Safe(args...)
		return v, err
	}
	return nil, fmt.Errorf("builtin %s cannot be called", name)
}

// evalError turns an evaluation error into the node's error: a budget
// exceeded (this package's or the library's) is
// WORKFLOW_NODE_LIMIT_EXCEEDED, any other a caller-safe message.
func evalError(prefix string, err error) error {
	msg := firstLine(err.Error())
	if errors.Is(err, errMatchBudget) {
		return runstream.Errorf(runstream.CodeWorkflowNodeLimitExceeded,
			"%s: the expression's regular expression matching exceeds its budget (%d steps of string bytes times pattern instructions, patterns of at most %d bytes)", prefix, exprMatchSteps, exprMaxPattern).
			WithDetail("limit", LimitExpressionBudget)
	}
	if errors.Is(err, errExprBudget) || strings.Contains(msg, "memory budget exceeded") {
		return runstream.Errorf(runstream.CodeWorkflowNodeLimitExceeded,
			"%s: the expression exceeds its budget (%d bytes, %d elements)", prefix, ExprBudgetBytes, exprVMMemoryBudget).
			WithDetail("limit", LimitExpressionBudget)
	}
	return fmt.Errorf("%s: %s", prefix, shorten(msg))
}

// RenderError is a node's error for a template that failed to render,
// what naming it ("url", "header X"…): an exceeded budget keeps its code
// and details (WORKFLOW_NODE_LIMIT_EXCEEDED, details.limit), any other
// failure is WORKFLOW_NODE_FAILED.
func RenderError(what string, err error) *runstream.Error {
	if rerr, ok := errors.AsType[*runstream.Error](err); ok && rerr.Code == runstream.CodeWorkflowNodeLimitExceeded {
		out := *rerr
		out.Message = what + ": " + rerr.Message
		return &out
	}
	return runstream.Errorf(runstream.CodeWorkflowNodeFailed, "%s: %s", what, err.Error())
}
