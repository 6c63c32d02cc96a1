package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/engine/enginetest"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/workflow"
)

// TestExprBombsExceedTheBudget: expressions that would build gigabytes
// fail with WORKFLOW_NODE_LIMIT_EXCEEDED instead.
func TestExprBombsExceedTheBudget(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		`len(reduce(1..32, #acc + #acc, "x"))`,
		`reduce(1..64, #acc + #acc, "x")`,
		`len(repeat("x", 200000000))`,
		`len(repeat(repeat("x", 1000000), 1000))`,
		`len(replace(repeat("x", 100000), "", repeat("y", 1000)))`,
		`len(join(map(1..100000, repeat("x", 1000)), ""))`,
		`len(toJSON(reduce(1..40, [#acc, #acc], 1)))`,
		`len(string(reduce(1..40, [#acc, #acc], 1)))`,
		`len(flatten(reduce(1..40, [#acc, #acc], 1)))`,
		`reduce(1..40, [#acc, #acc], 1) == reduce(1..40, [#acc, #acc], 1)`,
		`1 in reduce(1..40, [#acc, #acc], 1)`,
		`reduce(1..40, [#acc, #acc], 1)`,
		`len(reduce(1..100000, upper(#acc), repeat("x", 100000)))`,
		`len(reduce(1..1000000, #acc + "x", ""))`,
		`len(1..100000000)`,
		// A match Go's regexp would spend minutes on: a long string
		// against a pattern of thousands of instructions.
		`repeat("a", 1000000) matches (repeat("(a|b)", 3000) + "c")`,
		`repeat("a", 100000) matches repeat("a?", 300)`,
		`repeat("a", 2000000) matches "(ab|cd|ef|gh|ij|kl|mn|op|qr|st)+x"`, // a fixed pattern, compiled with the expression
		// Matches that are cheap one by one, in a loop: the matching
		// budget is the evaluation's, all together.
		`let s = repeat("a", 1000); len(filter(1..100000, s matches "(a|b)+c"))`,
		// A pattern past its bytes, or compiled over and over.
		`"a" matches repeat("a", 5000)`,
		`len(filter(1..100000, "a" matches ("(" + string(#) + "|[a-z]{100})")))`,
	} {
		t.Run(src, func(t *testing.T) {
			t.Parallel()
			e, err := engine.CompileExpr(src)
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.EvalContext(t.Context(), engine.Env{})
			rerr, ok := errors.AsType[*runstream.Error](err)
			if !ok || rerr.Code != runstream.CodeWorkflowNodeLimitExceeded {
				t.Fatalf("Eval(%s) = %v, want %s", src, err, runstream.CodeWorkflowNodeLimitExceeded)
			}
		})
	}
}

// TestExprStopsWithItsContext: an evaluation whose context is done stops
// at its next metered operation.
func TestExprStopsWithItsContext(t *testing.T) {
	t.Parallel()
	e, err := engine.CompileExpr(`reduce(1..1000, #acc + "x", "")`)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := e.EvalContext(ctx, engine.Env{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Eval with a cancelled context = %v, want context.Canceled", err)
	}
}

// TestExprMeteredOperationsKeepTheirMeaning: the rewritten operators and
// builtins answer as the library's do.
func TestExprMeteredOperationsKeepTheirMeaning(t *testing.T) {
	t.Parallel()
	env, err := engine.NewEnv([]byte(`{"s":"ab","n":2,"a":[1,2],"o":{"k":"v"}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	for src, want := range map[string]string{
		`input.s + "c"`:                         `"abc"`,
		`input.n + 1`:                           `3`,
		`1 + 2`:                                 `3`,
		`repeat(input.s, 3)`:                    `"ababab"`,
		`replace("a-b-c", "-", "+")`:            `"a+b+c"`,
		`join(["a", "b"], ",")`:                 `"a,b"`,
		`join(["a", "b"])`:                      `"ab"`,
		`toJSON(input.o)`:                       `"{\n  \"k\": \"v\"\n}"`,
		`string(1)`:                             `"1"`,
		`flatten([[1], [2, [3]]])`:              `[1,2,3]`,
		`input.a == [1, 2]`:                     `true`,
		`input.a != [1, 2]`:                     `false`,
		`2 in input.a`:                          `true`,
		`"k" in input.o`:                        `true`,
		`upper(input.s)`:                        `"AB"`,
		`map(input.a, # * 2)`:                   `[2,4]`,
		`len(filter(1..10, # % 2 == 0))`:        `5`,
		`concat(input.a, [3])`:                  `[1,2,3]`,
		`reduce(1..4, #acc + #acc, "x")`:        `"xxxxxxxxxxxxxxxx"`,
		`split("a,b", ",")`:                     `["a","b"]`,
		`input.s matches "^a+b$"`:               `true`,
		`"xyz" matches "^a"`:                    `false`,
		`all(["ab", "abb"], # matches "^ab+$")`: `true`,
		`repeat("x", 1000000) matches "error|fail|timeout"`: `false`,
		`input.s == "ab" && input.o.k == "v"`:               `true`,
	} {
		e, err := engine.CompileExpr(src)
		if err != nil {
			t.Errorf("CompileExpr(%s): %v", src, err)
			continue
		}
		got, err := e.Eval(env)
		if err != nil || string(got) != want {
			t.Errorf("Eval(%s) = %s, %v; want %s", src, got, err, want)
		}
	}
}

// TestTransformBombFailsItsNode: a transform that doubles a string 32
// times fails its node with WORKFLOW_NODE_LIMIT_EXCEEDED on its first
// attempt, even when retries are allowed, and the run fails.
func TestTransformBombFailsItsNode(t *testing.T) {
	t.Parallel()
	e := enginetest.Start(t, memory.NewWorkflowStore(), engine.DefaultRegistry(), nil)
	run, events := e.Run(t, `{"name":"bomb","nodes":[
		{"id":"double","type":"transform","retry":{"maxAttempts":3},"config":{"expression":"len(reduce(1..32, #acc + #acc, \"x\"))"}}]}`, `{}`)
	if run.Status != workflow.StatusFailed {
		t.Fatalf("run %s, want failed", run.Status)
	}
	var failed struct {
		Error struct {
			Code      runstream.ErrorCode
			Retryable bool
			Details   map[string]any
		}
	}
	enginetest.Data(t, events, workflow.EventNodeFailed, "double", 0, &failed)
	if failed.Error.Code != runstream.CodeWorkflowNodeLimitExceeded || failed.Error.Retryable || failed.Error.Details["limit"] != engine.LimitExpressionBudget {
		t.Errorf("node.failed: %+v", failed.Error)
	}
	if got := enginetest.Attempts(t, events, "double"); len(got) != 1 {
		t.Errorf("attempts %v, want one", got)
	}
}

// TestRunOutputExpressionBomb: a run output expression past its budget
// fails the run with WORKFLOW_NODE_LIMIT_EXCEEDED.
func TestRunOutputExpressionBomb(t *testing.T) {
	t.Parallel()
	e := enginetest.Start(t, memory.NewWorkflowStore(), engine.DefaultRegistry(), nil)
	run, events := e.Run(t, `{"name":"bomb","nodes":[{"id":"t","type":"transform","config":{"expression":"1"}}],
		"output":"len(reduce(1..32, #acc + #acc, \"x\"))"}`, `{}`)
	if run.Status != workflow.StatusFailed {
		t.Fatalf("run %s, want failed", run.Status)
	}
	var failed struct {
		Error struct {
			Code    runstream.ErrorCode
			Details map[string]any
		}
	}
	enginetest.Data(t, events, workflow.EventRunFailed, "", 0, &failed)
	if failed.Error.Code != runstream.CodeWorkflowNodeLimitExceeded || failed.Error.Details["limit"] != engine.LimitExpressionBudget {
		t.Errorf("run.failed: %+v", failed.Error)
	}
}

// TestTemplateBombFailsItsNode: a template of an http or llm node whose
// expression runs out of its budget fails the node with
// WORKFLOW_NODE_LIMIT_EXCEEDED and details.limit, as a transform does,
// before any request is sent.
func TestTemplateBombFailsItsNode(t *testing.T) {
	t.Parallel()
	const bomb = `{{ repeat(\"x\", 100000000) }}`
	for name, node := range map[string]string{
		"http url":    `{"type":"http","config":{"url":"https://example.com/` + bomb + `"}}`,
		"http header": `{"type":"http","config":{"url":"https://example.com/","headers":{"X-A":"` + bomb + `"}}}`,
		"http json":   `{"type":"http","config":{"method":"post","url":"https://example.com/","json":{"a":"` + bomb + `"}}}`,
		"llm text":    `{"type":"llm","config":{"provider":"scripted","text":"` + bomb + `"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := enginetest.Start(t, memory.NewWorkflowStore(), engine.DefaultRegistry(), nil)
			node := `{"id":"n",` + node[1:]
			run, events := e.Run(t, `{"name":"bomb","nodes":[`+node+`]}`, `{}`)
			wantLimit(t, run, events, "n", engine.LimitExpressionBudget)
		})
	}
}

// TestExprInvalidPatternRefusedAtCompile: a fixed pattern that does not
// compile is refused when the expression compiles, not when it runs.
func TestExprInvalidPatternRefusedAtCompile(t *testing.T) {
	t.Parallel()
	if _, err := engine.CompileExpr(`"a" matches "("`); err == nil {
		t.Errorf(`CompileExpr("a" matches "(") succeeded, want an error`)
	}
	if _, err := engine.CompileExpr(`"a" matches "^a$"`); err != nil {
		t.Errorf(`CompileExpr("a" matches "^a$"): %v`, err)
	}
	// A fixed pattern longer than a pattern may be is refused there too,
	// rather than failing every run.
	long := strings.Repeat("a", 5000)
	if _, err := engine.CompileExpr(`"a" matches "` + long + `"`); err == nil || !strings.Contains(err.Error(), "5000 bytes") || strings.Contains(err.Error(), long[:100]) {
		t.Errorf("CompileExpr of a 5000-byte fixed pattern: %v, want a refusal naming its size, not its text", err)
	}
}

// TestTemplatesStopWithTheirContext: a template rendered with a context
// that is done stops at its first metered operation, with the context's
// cause, as a node's templates do at its timeout or a cancel.
func TestTemplatesStopWithTheirContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(t.Context())
	stop := errors.New("the node timed out")
	cancel(stop)
	tmpl, err := engine.CompileTemplate(`{{ string(1) + "x" }}`)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := tmpl.Render(engine.Env{}); err != nil || s != "1x" {
		t.Fatalf("Render = %q, %v", s, err)
	}
	if _, err := tmpl.RenderContext(ctx, engine.Env{}); !errors.Is(err, stop) {
		t.Errorf("RenderContext with a done context = %v, want its cause", err)
	}
	jt, err := engine.CompileJSONTemplate([]byte(`{"a":"{{ string(1) + \"x\" }}","b":"n={{ string(2) }}"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jt.RenderContext(ctx, engine.Env{}); !errors.Is(err, stop) {
		t.Errorf("JSONTemplate.RenderContext with a done context = %v, want its cause", err)
	}
}
