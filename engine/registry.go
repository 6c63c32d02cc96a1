package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/runstream/runstream"
)

// NodeFunc runs one attempt of a node. It returns the node's output (one
// JSON value; nil means null) or an error: a *runstream.Error whose code
// tells whether the attempt may be retried (Code.Retryable), any other
// error counting as WORKFLOW_NODE_FAILED. It must return promptly once ctx
// is done (cancellation, timeout, the run failing elsewhere).
type NodeFunc func(ctx context.Context, n *NodeRun) (json.RawMessage, error)

// NodeType is a kind of node, named by a definition's type field.
type NodeType struct {
	Name string
	// Compile checks a node's config at publish time and returns the
	// function that runs its attempts. Its error is reported with
	// details.rule "invalid_config", or the rule of a *runstream.Error
	// that has one, and the error's message.
	Compile func(config json.RawMessage) (NodeFunc, error)
	// Repeatable reports whether an attempt of a node of this type with
	// config (one Compile accepted) acts on nothing outside its run: it
	// reads, computes or waits. An attempt of such a node that a graceful
	// shutdown interrupted runs again where the run continues, without
	// counting against its retry.maxAttempts (see Engine.Stop); any other
	// interrupted attempt counts, as a crashed one does, so that a node
	// runs twice only when its definition says it may. Nil: no node of
	// the type is repeatable.
	Repeatable func(config json.RawMessage) bool
}

// AlwaysRepeatable is the Repeatable of node types whose every node is.
func AlwaysRepeatable(json.RawMessage) bool { return true }

// Registry holds the node types definitions may use. It is immutable and
// safe for concurrent use.
type Registry struct {
	types map[string]NodeType
}

// NewRegistry returns a registry of types; a name given twice, an empty
// name or a nil Compile is an error.
func NewRegistry(types ...NodeType) (*Registry, error) {
	r := &Registry{types: make(map[string]NodeType, len(types))}
	for _, t := range types {
		switch {
		case t.Name == "" || t.Compile == nil:
			return nil, fmt.Errorf("new registry: node type %q needs a name and a Compile function", t.Name)
		case r.types[t.Name].Name != "":
			return nil, fmt.Errorf("new registry: node type %q registered twice", t.Name)
		}
		r.types[t.Name] = t
	}
	return r, nil
}

// Builtins returns the node types of this package: llm (with the scripted
// provider, which may call the http_get tool, and the given providers),
// human_input, transform, delay and http, under the default HTTPOptions.
func Builtins(providers ...LLMProvider) []NodeType {
	return []NodeType{
		LLM(append([]LLMProvider{ScriptedProvider(HTTPGetTool(HTTPOptions{}))}, providers...)...),
		HumanInput(),
		Transform(),
		Delay(),
		HTTP(HTTPOptions{}),
	}
}

// DefaultRegistry returns a registry of Builtins().
func DefaultRegistry() *Registry {
	r, err := NewRegistry(Builtins()...)
	if err != nil {
		panic(err) // the built-in names are distinct
	}
	return r
}

// Plan is a compiled definition, ready to run. It is immutable.
type Plan struct {
	def   *Definition
	nodes map[string]*planNode
	// order lists the node ids in a topological order: in passes, each
	// taking in definition order the nodes whose needs were taken before.
	order  []string
	input  *Schema
	output *Expr // nil when the output is a node id or null
}

type planNode struct {
	spec NodeSpec
	run  NodeFunc
	// upstream lists the node's transitive needs.
	upstream    []string
	maxAttempts int
	// repeatable: an attempt a shutdown interrupted runs again without
	// counting (NodeType.Repeatable).
	repeatable bool
	backoff    time.Duration
	timeout    time.Duration
}

// Definition returns the definition the plan was compiled from.
func (p *Plan) Definition() *Definition { return p.def }

// Order returns the node ids in the order the engine considers them.
func (p *Plan) Order() []string { return slices.Clone(p.order) }

// CheckInput validates a run input against the definition's inputSchema
// (any input passes without one): WORKFLOW_INPUT_INVALID with the failing
// paths in details.problems.
func (p *Plan) CheckInput(input json.RawMessage) error {
	if p.input == nil {
		return nil
	}
	return p.input.ValidationError(input, runstream.CodeWorkflowInputInvalid, "the run input")
}

// backoff returns the wait before the attempt after attempt n.
func (n *planNode) backoffAfter(attempt int) time.Duration {
	d := n.backoff
	for i := 1; i < attempt && d < MaxBackoff; i++ {
		d *= 2
	}
	return min(d, MaxBackoff)
}

// spareAttempts is how many of a node's attempts that a graceful shutdown
// interrupted (shutdowns) do not count against its retry.maxAttempts: all
// of them, up to MaxAttempts, for a repeatable node; none for another.
func (n *planNode) spareAttempts(shutdowns int) int {
	if !n.repeatable {
		return 0
	}
	return min(shutdowns, MaxAttempts)
}

// Validate checks a definition: see Compile.
func (r *Registry) Validate(d *Definition) error {
	_, err := r.Compile(d)
	return err
}

// CompileJSON parses a JSON definition and compiles it.
func (r *Registry) CompileJSON(raw []byte) (*Plan, error) {
	d, err := ParseDefinition(raw)
	if err != nil {
		return nil, err
	}
	return r.Compile(d)
}

// Compile checks every publish-time rule of a definition and compiles it.
// Its error is a *runstream.Error with CodeWorkflowDefinitionInvalid,
// details.rule and, for a rule about a node, NodeID: invalid_name,
// no_nodes, too_many_nodes, invalid_id, duplicate_id, unknown_type,
// unknown_need, cycle, invalid_config, invalid_retry, invalid_timeout,
// invalid_schema (the inputSchema, or a node's own schema),
// invalid_artifact and invalid_output. The first broken rule is reported, nodes in definition
// order.
func (r *Registry) Compile(d *Definition) (*Plan, error) {
	if d.Name == "" || len([]rune(d.Name)) > MaxNameLength {
		return nil, invalid("", RuleInvalidName, "the definition needs a name of 1 to %d characters", MaxNameLength)
	}
	switch {
	case len(d.Nodes) == 0:
		return nil, invalid("", RuleNoNodes, "the definition has no nodes")
	case len(d.Nodes) > MaxNodes:
		return nil, invalid("", RuleTooManyNodes, "the definition has %d nodes, at most %d are allowed", len(d.Nodes), MaxNodes)
	}
	p := &Plan{def: d, nodes: make(map[string]*planNode, len(d.Nodes))}
	for _, n := range d.Nodes {
		if !nodeIDPattern.MatchString(n.ID) {
			return nil, invalid(n.ID, RuleInvalidID, "node id %q must match ^[a-z][a-z0-9_]{0,63}$", shorten(n.ID))
		}
		if p.nodes[n.ID] != nil {
			return nil, invalid(n.ID, RuleDuplicateID, "node id %q is used twice", n.ID)
		}
		if _, ok := r.types[n.Type]; !ok {
			return nil, invalid(n.ID, RuleUnknownType, "node %s has the unknown type %q", n.ID, shorten(n.Type))
		}
		p.nodes[n.ID] = &planNode{spec: n}
	}
	for _, n := range d.Nodes {
		for _, need := range n.Needs {
			if p.nodes[need] == nil {
				return nil, invalid(n.ID, RuleUnknownNeed, "node %s needs the unknown node %q", n.ID, shorten(need))
			}
		}
	}
	order, err := topoOrder(d.Nodes)
	if err != nil {
		return nil, err
	}
	if err := checkInputsOrdered(d.Nodes, order); err != nil {
		return nil, err
	}
	p.order = order
	for _, n := range d.Nodes {
		if err := r.compileNode(p.nodes[n.ID]); err != nil {
			return nil, err
		}
	}
	for _, id := range p.order {
		p.nodes[id].upstream = upstreamOf(p, id)
	}
	if len(d.InputSchema) > 0 {
		s, err := CompileSchema(d.InputSchema)
		if err != nil {
			return nil, invalid("", RuleInvalidSchema, "inputSchema: %s", err.Error())
		}
		p.input = s
	}
	if d.Output != "" && p.nodes[d.Output] == nil {
		e, err := CompileExpr(d.Output)
		if err != nil {
			return nil, invalid("", RuleInvalidOutput, "output is neither a node id nor a valid expression: %s", err.Error())
		}
		p.output = e
	}
	return p, nil
}

func (r *Registry) compileNode(pn *planNode) error {
	n := pn.spec
	config := n.Config
	if len(config) == 0 {
		config = json.RawMessage("{}")
	}
	run, err := r.types[n.Type].Compile(config)
	if err != nil {
		var re *runstream.Error
		if errors.As(err, &re) && re.Details["rule"] != nil {
			out := invalid(n.ID, fmt.Sprint(re.Details["rule"]), "node %s: %s", n.ID, re.Message)
			return out
		}
		return invalid(n.ID, RuleInvalidConfig, "node %s: invalid %s config: %s", n.ID, n.Type, runstream.ErrorMessage(asSafe(err)))
	}
	pn.run = run
	if repeatable := r.types[n.Type].Repeatable; repeatable != nil {
		pn.repeatable = repeatable(config)
	}
	pn.maxAttempts = 1
	if n.Retry != nil {
		if n.Retry.MaxAttempts < 1 || n.Retry.MaxAttempts > MaxAttempts {
			return invalid(n.ID, RuleInvalidRetry, "node %s: retry.maxAttempts must be 1 to %d", n.ID, MaxAttempts)
		}
		if n.Retry.BackoffMs < 0 || time.Duration(n.Retry.BackoffMs)*time.Millisecond > MaxBackoff {
			return invalid(n.ID, RuleInvalidRetry, "node %s: retry.backoffMs must be 0 to %d", n.ID, MaxBackoff.Milliseconds())
		}
		pn.maxAttempts = n.Retry.MaxAttempts
		pn.backoff = time.Duration(n.Retry.BackoffMs) * time.Millisecond
	}
	if n.TimeoutMs < 0 || time.Duration(n.TimeoutMs)*time.Millisecond > MaxNodeTimeout {
		return invalid(n.ID, RuleInvalidTimeout, "node %s: timeoutMs must be 0 (none) to %d", n.ID, MaxNodeTimeout.Milliseconds())
	}
	pn.timeout = time.Duration(n.TimeoutMs) * time.Millisecond
	if n.Artifact != nil {
		if err := n.Artifact.check(); err != nil {
			return invalid(n.ID, RuleInvalidArtifact, "node %s: %s", n.ID, err.Error())
		}
	}
	return nil
}

// asSafe turns a plain error from a node type's Compile, whose text the
// type wrote for the definition's author, into a *runstream.Error.
func asSafe(err error) error {
	var re *runstream.Error
	if errors.As(err, &re) {
		return err
	}
	return runstream.Errorf(runstream.CodeWorkflowDefinitionInvalid, "%s", shorten(err.Error()))
}

// topoOrder orders the nodes so that each comes after its needs (see
// Plan.order), or reports a cycle with the first node, in definition
// order, that lies on one.
func topoOrder(nodes []NodeSpec) ([]string, error) {
	index := make(map[string]int, len(nodes))
	for i, n := range nodes {
		index[n.ID] = i
	}
	placed := make([]bool, len(nodes))
	order := make([]string, 0, len(nodes))
	for len(order) < len(nodes) {
		progress := false
		for i, n := range nodes {
			if placed[i] || !allPlaced(n.Needs, index, placed) {
				continue
			}
			placed[i], progress = true, true
			order = append(order, n.ID)
		}
		if !progress {
			id := firstOnCycle(nodes, index, placed)
			return nil, invalid(id, RuleCycle, "node %s is part of a dependency cycle", id)
		}
	}
	return order, nil
}

func allPlaced(needs []string, index map[string]int, placed []bool) bool {
	for _, need := range needs {
		if !placed[index[need]] {
			return false
		}
	}
	return true
}

// firstOnCycle returns the first unplaced node, in definition order, that
// reaches itself through its needs.
func firstOnCycle(nodes []NodeSpec, index map[string]int, placed []bool) string {
	for i, n := range nodes {
		if placed[i] {
			continue
		}
		seen := map[string]bool{}
		stack := slices.Clone(n.Needs)
		for len(stack) > 0 {
			id := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if id == n.ID {
				return n.ID
			}
			if seen[id] {
				continue
			}
			seen[id] = true
			stack = append(stack, nodes[index[id]].Needs...)
		}
	}
	return nodes[0].ID // unreachable when some node is unplaced
}

// upstreamOf returns the transitive needs of node id in plan order.
func upstreamOf(p *Plan, id string) []string {
	want := map[string]bool{}
	stack := slices.Clone(p.nodes[id].spec.Needs)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !want[n] {
			want[n] = true
			stack = append(stack, p.nodes[n].spec.Needs...)
		}
	}
	var out []string
	for _, n := range p.order {
		if want[n] {
			out = append(out, n)
		}
	}
	return out
}

// checkInputsOrdered refuses two human_input nodes that could await input
// at the same time: a run holds one pending resume token, so every pair of
// human_input nodes must be ordered by needs (one an ancestor of the
// other). order is a topological order of nodes.
func checkInputsOrdered(nodes []NodeSpec, order []string) error {
	needs := make(map[string][]string, len(nodes))
	var inputs []string
	for _, n := range nodes {
		needs[n.ID] = n.Needs
	}
	for _, id := range order {
		for _, n := range nodes {
			if n.ID == id && n.Type == "human_input" {
				inputs = append(inputs, id)
			}
		}
	}
	ancestors := func(id string) map[string]bool {
		seen := map[string]bool{}
		stack := slices.Clone(needs[id])
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if !seen[n] {
				seen[n] = true
				stack = append(stack, needs[n]...)
			}
		}
		return seen
	}
	for i := 1; i < len(inputs); i++ {
		// In topological order, inputs[i-1] must be an ancestor of
		// inputs[i]; then every earlier one is, transitively.
		if !ancestors(inputs[i])[inputs[i-1]] {
			return invalid(inputs[i], RuleParallelInput,
				"human_input nodes %s and %s could await input at the same time; make one need the other", inputs[i-1], inputs[i])
		}
	}
	return nil
}
