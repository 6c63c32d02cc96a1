package engine_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine"
)

// node renders one node of a test definition.
func node(id, typ, config string, needs ...string) string {
	n := map[string]any{"id": id, "type": typ}
	if config != "" {
		n["config"] = json.RawMessage(config)
	}
	if needs != nil {
		n["needs"] = needs
	}
	raw, _ := json.Marshal(n)
	return string(raw)
}

func definition(extra string, nodes ...string) string {
	return `{"name":"d","nodes":[` + strings.Join(nodes, ",") + `]` + extra + `}`
}

const delay10 = `{"ms":10}`

func TestCompileRules(t *testing.T) {
	t.Parallel()
	many := make([]string, engine.MaxNodes+1)
	for i := range many {
		many[i] = node(fmt.Sprintf("n%d", i), "delay", delay10)
	}
	tests := []struct {
		name, def, rule, nodeID string
	}{
		{"malformed unknown field", `{"name":"d","nodes":[],"extra":1}`, engine.RuleMalformed, ""},
		{"malformed wrong type", `{"name":"d","nodes":{}}`, engine.RuleMalformed, ""},
		{"malformed not an object", `[1]`, engine.RuleMalformed, ""},
		{"malformed trailing data", `{"name":"d","nodes":[]} {}`, engine.RuleMalformed, ""},
		{"invalid name", `{"name":"","nodes":[` + node("a", "delay", delay10) + `]}`, engine.RuleInvalidName, ""},
		{"no nodes", definition(""), engine.RuleNoNodes, ""},
		{"too many nodes", definition("", many...), engine.RuleTooManyNodes, ""},
		{"invalid id uppercase", definition("", node("Bad", "delay", delay10)), engine.RuleInvalidID, "Bad"},
		{"invalid id too long", definition("", node("a"+strings.Repeat("b", 64), "delay", delay10)), engine.RuleInvalidID, "a" + strings.Repeat("b", 64)},
		{"duplicate id", definition("", node("a", "delay", delay10), node("b", "delay", delay10), node("a", "delay", delay10)), engine.RuleDuplicateID, "a"},
		{"unknown type", definition("", node("a", "delay", delay10), node("b", "teleport", "")), engine.RuleUnknownType, "b"},
		{"unknown need", definition("", node("a", "delay", delay10), node("b", "delay", delay10, "a", "ghost")), engine.RuleUnknownNeed, "b"},
		{"cycle", definition("", node("a", "delay", delay10), node("b", "delay", delay10, "a", "d"), node("c", "delay", delay10, "b"), node("d", "delay", delay10, "c")), engine.RuleCycle, "b"},
		{"self need", definition("", node("a", "delay", delay10, "a")), engine.RuleCycle, "a"},
		{"parallel human inputs", definition("", node("a", "delay", delay10), node("h1", "human_input", `{"actions":["ok"]}`, "a"), node("h2", "human_input", `{"actions":["ok"]}`, "a")), engine.RuleParallelInput, "h2"},
		{"invalid config delay", definition("", node("a", "delay", `{"ms":-1}`)), engine.RuleInvalidConfig, "a"},
		{"invalid config unknown field", definition("", node("a", "delay", `{"ms":1,"sleep":2}`)), engine.RuleInvalidConfig, "a"},
		{"invalid config transform", definition("", node("a", "transform", `{"expression":"1 +"}`)), engine.RuleInvalidConfig, "a"},
		{"invalid config transform unknown name", definition("", node("a", "transform", `{"expression":"secrets.key"}`)), engine.RuleInvalidConfig, "a"},
		{"invalid config llm provider", definition("", node("a", "llm", `{"provider":"oracle"}`)), engine.RuleInvalidConfig, "a"},
		{"invalid config llm template", definition("", node("a", "llm", `{"provider":"scripted","text":"{{ input.x "}`)), engine.RuleInvalidConfig, "a"},
		{"invalid config human actions", definition("", node("a", "human_input", `{"actions":["ok","ok"]}`)), engine.RuleInvalidConfig, "a"},
		{"invalid retry", `{"name":"d","nodes":[{"id":"a","type":"delay","config":{"ms":1},"retry":{"maxAttempts":0}}]}`, engine.RuleInvalidRetry, "a"},
		{"invalid backoff", `{"name":"d","nodes":[{"id":"a","type":"delay","config":{"ms":1},"retry":{"maxAttempts":2,"backoffMs":-5}}]}`, engine.RuleInvalidRetry, "a"},
		{"invalid timeout", `{"name":"d","nodes":[{"id":"a","type":"delay","config":{"ms":1},"timeoutMs":-1}]}`, engine.RuleInvalidTimeout, "a"},
		{"invalid input schema", definition(`,"inputSchema":{"type":12}`, node("a", "delay", delay10)), engine.RuleInvalidSchema, ""},
		{"input schema reads a file", definition(`,"inputSchema":{"$ref":"file:///etc/passwd"}`, node("a", "delay", delay10)), engine.RuleInvalidSchema, ""},
		{"invalid form schema", definition("", node("a", "human_input", `{"formSchema":{"type":"nope"}}`)), engine.RuleInvalidSchema, "a"},
		{"form schema not an object", definition("", node("a", "human_input", `{"formSchema":true}`)), engine.RuleInvalidSchema, "a"},
		{"invalid output expression", definition(`,"output":"nodes.a.output +"`, node("a", "delay", delay10)), engine.RuleInvalidOutput, ""},
		{"output names no node", definition(`,"output":"ghost"`, node("a", "delay", delay10)), engine.RuleInvalidOutput, ""},
	}
	reg := engine.DefaultRegistry()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := reg.CompileJSON([]byte(tc.def))
			var e *runstream.Error
			if !errors.As(err, &e) {
				t.Fatalf("CompileJSON: %v, want a *runstream.Error", err)
			}
			if e.Code != runstream.CodeWorkflowDefinitionInvalid || e.Details["rule"] != tc.rule || e.NodeID != tc.nodeID {
				t.Errorf("got %s rule %v node %q (%s), want rule %s node %q", e.Code, e.Details["rule"], e.NodeID, e.Message, tc.rule, tc.nodeID)
			}
			if strings.Contains(e.Message, "/etc/passwd") && strings.Contains(e.Message, "root:") {
				t.Errorf("message leaks a file: %s", e.Message)
			}
		})
	}
}

func TestCompileValid(t *testing.T) {
	t.Parallel()
	def := definition(`,"inputSchema":{"type":"object","required":["topic"],"properties":{"topic":{"type":"string"},"n":{"type":"integer","minimum":1}}},"output":"nodes.c.output + 1"`,
		node("c", "transform", `{"expression":"len(nodes.a.output.text) + nodes.b.output.waitedMs"}`, "b", "a"),
		node("a", "llm", `{"provider":"scripted","text":"About {{ input.topic }}"}`),
		node("b", "delay", delay10),
		node("h", "human_input", `{"actions":["ok"]}`, "a"),
	)
	plan, err := engine.DefaultRegistry().CompileJSON([]byte(def))
	if err != nil {
		t.Fatal(err)
	}
	if got := plan.Order(); !slices.Equal(got, []string{"a", "b", "h", "c"}) {
		t.Errorf("order %v", got)
	}
	if err := plan.CheckInput(json.RawMessage(`{"topic":"go","n":2}`)); err != nil {
		t.Errorf("valid input: %v", err)
	}
	err = plan.CheckInput(json.RawMessage(`{"n":0,"extra":true}`))
	var e *runstream.Error
	if !errors.As(err, &e) || e.Code != runstream.CodeWorkflowInputInvalid {
		t.Fatalf("invalid input: %v", err)
	}
	problems, _ := e.Details["problems"].([]engine.Problem)
	var paths []string
	for _, p := range problems {
		paths = append(paths, p.Path)
	}
	if !slices.Equal(paths, []string{"/n", "/topic"}) {
		t.Errorf("failing paths %v, want [/n /topic]", paths)
	}
}

func TestYAMLDefinition(t *testing.T) {
	t.Parallel()
	yamlDef := `
name: approval
inputSchema:
  type: object
nodes:
  - id: draft
    type: llm
    config: {provider: scripted, text: "Draft", tokensPerSecond: 20}
  - id: ask
    type: human_input
    needs: [draft]
    retry: {maxAttempts: 2, backoffMs: 100}
    timeoutMs: 5000
    config:
      actions: [approve, reject]
output: ask
`
	raw, err := engine.YAMLToJSON([]byte(yamlDef))
	if err != nil {
		t.Fatal(err)
	}
	d, err := engine.ParseDefinition(raw)
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "approval" || len(d.Nodes) != 2 || d.Nodes[1].Retry.MaxAttempts != 2 || d.Nodes[1].TimeoutMs != 5000 || d.Output != "ask" ||
		!slices.Equal(d.Nodes[1].Needs, []string{"draft"}) || string(d.InputSchema) != `{"type":"object"}` {
		t.Errorf("parsed %+v", d)
	}
	if err := engine.DefaultRegistry().Validate(d); err != nil {
		t.Errorf("Validate: %v", err)
	}
	for name, bad := range map[string]string{
		"duplicate key":  "name: a\nname: b\n",
		"two documents":  "name: a\n---\nname: b\n",
		"non-string key": "? [1, 2]\n: x\n",
		"syntax":         "name: [a\n",
		"empty":          "",
	} {
		if _, err := engine.YAMLToJSON([]byte(bad)); runstream.ErrorCodeOf(err) != runstream.CodeInvalidArgument {
			t.Errorf("%s: error %v, want INVALID_ARGUMENT", name, err)
		}
	}
}

func TestTemplate(t *testing.T) {
	t.Parallel()
	env, err := engine.NewEnv(json.RawMessage(`{"who":"Ada","n":2}`), map[string]json.RawMessage{"a": json.RawMessage(`{"list":[1,2]}`)})
	if err != nil {
		t.Fatal(err)
	}
	for src, want := range map[string]string{
		"plain":               "plain",
		"Hi {{ input.who }}!": "Hi Ada!",
		"{{input.n * 2}} and {{ nodes.a.output.list }}": "4 and [1,2]",
		"{{ nodes.missing.output }}":                    "null",
	} {
		tpl, err := engine.CompileTemplate(src)
		if err != nil {
			t.Errorf("%q: %v", src, err)
			continue
		}
		if got, err := tpl.Render(env); err != nil || got != want {
			t.Errorf("%q rendered %q, %v; want %q", src, got, err, want)
		}
	}
	for _, bad := range []string{"{{ input.who", "{{ }}", "{{ nope }}"} {
		if _, err := engine.CompileTemplate(bad); err == nil {
			t.Errorf("%q compiled", bad)
		}
	}
}

func TestSplitTokens(t *testing.T) {
	t.Parallel()
	for text, want := range map[string][]string{
		"":                    nil,
		"one":                 {"one"},
		"Hello world, hi":     {"Hello ", "world, ", "hi"},
		"  lead\ttab\n\nend ": {"  ", "lead\t", "tab\n\n", "end "},
		"héllo wörld":         {"héllo ", "wörld"},
	} {
		got := engine.SplitTokens(text)
		if !slices.Equal(got, want) || strings.Join(got, "") != text {
			t.Errorf("SplitTokens(%q) = %q, want %q", text, got, want)
		}
	}
}

func TestSummary(t *testing.T) {
	t.Parallel()
	small := json.RawMessage(`{"a":1}`)
	if got := engine.Summary(small); string(got) != string(small) {
		t.Errorf("small value summarised as %s", got)
	}
	big := json.RawMessage(`"` + strings.Repeat("é", 2000) + `"`)
	got := engine.Summary(big)
	var s string
	if err := json.Unmarshal(got, &s); err != nil || len(got) > 1200 || !strings.HasSuffix(s, "…") {
		t.Errorf("big value summarised as %d bytes (%v)", len(got), err)
	}
}

func TestOrderedHumanInputsCompile(t *testing.T) {
	t.Parallel()
	def := definition("", node("h1", "human_input", `{"actions":["ok"]}`), node("d", "delay", delay10, "h1"),
		node("h2", "human_input", `{"actions":["ok"]}`, "d"), node("side", "delay", delay10))
	if _, err := engine.DefaultRegistry().CompileJSON([]byte(def)); err != nil {
		t.Errorf("human inputs ordered through a delay were refused: %v", err)
	}
}
