package workflow_test

import (
	"encoding/json"
	"io/fs"
	"slices"
	"testing"

	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/workflow"
)

// protocolEvents is the event table of the protocol specification
// (workflow_sse_protocol_v1, "Event types (closed set)"), copied by hand as
// an independent source: the contract and the code must both match it.
var protocolEvents = []workflow.EventType{
	"run.created",
	"run.queued",
	"run.started",
	"node.queued",
	"node.started",
	"node.progress",
	"node.output.delta",
	"node.tool.started",
	"node.tool.finished",
	"artifact.created",
	"node.completed",
	"node.failed",
	"run.awaiting_input",
	"run.resumed",
	"run.cancel_requested",
	"run.cancelled",
	"run.completed",
	"run.failed",
}

type eventsContract struct {
	SchemaVersion string   `json:"schemaVersion"`
	Terminal      []string `json:"terminal_events"`
	Events        []struct {
		Event string `json:"event"`
		Scope string `json:"scope"`
	} `json:"events"`
}

func loadEventsContract(t *testing.T) eventsContract {
	t.Helper()
	raw, err := fs.ReadFile(contracts.FS(), contracts.WorkflowEventsFile)
	if err != nil {
		t.Fatal(err)
	}
	var c eventsContract
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEventsMatchContractAndProtocol(t *testing.T) {
	t.Parallel()
	c := loadEventsContract(t)
	var fromContract []workflow.EventType
	for _, e := range c.Events {
		fromContract = append(fromContract, workflow.EventType(e.Event))
	}
	got := workflow.Events()
	if !slices.Equal(got, fromContract) {
		t.Errorf("Events() = %v\ncontract has %v", got, fromContract)
	}
	if !slices.Equal(got, protocolEvents) {
		t.Errorf("Events() = %v\nprotocol has %v", got, protocolEvents)
	}
	if len(got) != 18 {
		t.Errorf("%d events, the protocol has 18", len(got))
	}
	if c.SchemaVersion != workflow.SchemaVersion {
		t.Errorf("SchemaVersion = %q, contract says %q", workflow.SchemaVersion, c.SchemaVersion)
	}
	for _, e := range got {
		if !e.Known() {
			t.Errorf("%s.Known() = false", e)
		}
	}
	for _, e := range []workflow.EventType{"", "run.paused", "node.output", "RUN.CREATED", "run.created "} {
		if e.Known() || e.Terminal() || e.NodeScoped() {
			t.Errorf("unknown event %q: Known/Terminal/NodeScoped = %t/%t/%t", e, e.Known(), e.Terminal(), e.NodeScoped())
		}
	}
}

// Events returns a copy: changing it does not change the event set.
func TestEventsReturnsCopy(t *testing.T) {
	t.Parallel()
	events := workflow.Events()
	events[0] = "tampered"
	if workflow.Events()[0] != protocolEvents[0] {
		t.Fatal("Events() exposes the package's slice")
	}
}

func TestTerminal(t *testing.T) {
	t.Parallel()
	want := []workflow.EventType{workflow.EventRunCompleted, workflow.EventRunFailed, workflow.EventRunCancelled}
	c := loadEventsContract(t)
	var fromContract []workflow.EventType
	for _, e := range c.Terminal {
		fromContract = append(fromContract, workflow.EventType(e))
	}
	if !sameEventSet(fromContract, want) {
		t.Errorf("contract's terminal events %v, protocol says %v", fromContract, want)
	}
	for _, e := range workflow.Events() {
		if got := e.Terminal(); got != slices.Contains(want, e) {
			t.Errorf("%s.Terminal() = %t", e, got)
		}
	}
}

func TestNodeScoped(t *testing.T) {
	t.Parallel()
	c := loadEventsContract(t)
	if len(c.Events) == 0 {
		t.Fatal("contract has no events")
	}
	for _, e := range c.Events {
		if e.Scope != "node" && e.Scope != "run" {
			t.Errorf("%s: scope %q", e.Event, e.Scope)
		}
		if got := workflow.EventType(e.Event).NodeScoped(); got != (e.Scope == "node") {
			t.Errorf("%s.NodeScoped() = %t, contract scope %q", e.Event, got, e.Scope)
		}
	}
	// Spot checks that do not depend on the contract.
	for e, want := range map[workflow.EventType]bool{
		workflow.EventNodeOutputDelta: true,
		workflow.EventArtifactCreated: true,
		workflow.EventRunCreated:      false,
		workflow.EventRunFailed:       false,
	} {
		if got := e.NodeScoped(); got != want {
			t.Errorf("%s.NodeScoped() = %t, want %t", e, got, want)
		}
	}
}

func sameEventSet[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
