package engine

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/runstream/runstream/workflow"
)

// Which built-in nodes an interrupted attempt may run again without
// their retry policy: those that act on nothing outside the run (an http
// node only with a safe method).
func TestRepeatable(t *testing.T) {
	plan, err := DefaultRegistry().CompileJSON([]byte(`{"name":"r","nodes":[
		{"id":"get","type":"http","config":{"url":"https://example.com/"}},
		{"id":"head","type":"http","config":{"method":"head","url":"https://example.com/"}},
		{"id":"post","type":"http","config":{"method":"POST","url":"https://example.com/"}},
		{"id":"delete","type":"http","config":{"method":"DELETE","url":"https://example.com/"}},
		{"id":"delay","type":"delay","config":{"ms":1}},
		{"id":"transform","type":"transform","config":{"expression":"1"}},
		{"id":"llm","type":"llm","config":{"provider":"scripted","text":"hi"}},
		{"id":"ask","type":"human_input","config":{"formSchema":{"type":"object"},"actions":["ok"]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"get": true, "head": true, "post": false, "delete": false, "delay": true, "transform": true, "llm": true, "ask": true}
	for id, repeatable := range want {
		if got := plan.nodes[id].repeatable; got != repeatable {
			t.Errorf("node %s repeatable %v, want %v", id, got, repeatable)
		}
	}
}

// A repeatable node's interrupted attempts do not count up to
// MaxAttempts of them; another node's always count.
func TestSpareAttempts(t *testing.T) {
	repeatable, other := &planNode{repeatable: true}, &planNode{}
	for _, tc := range []struct{ shutdowns, repeatable, other int }{{0, 0, 0}, {1, 1, 0}, {MaxAttempts, MaxAttempts, 0}, {MaxAttempts + 5, MaxAttempts, 0}} {
		if got := repeatable.spareAttempts(tc.shutdowns); got != tc.repeatable {
			t.Errorf("repeatable node, %d shutdowns: %d spare, want %d", tc.shutdowns, got, tc.repeatable)
		}
		if got := other.spareAttempts(tc.shutdowns); got != tc.other {
			t.Errorf("other node, %d shutdowns: %d spare, want %d", tc.shutdowns, got, tc.other)
		}
	}
}

// Replay reads an interrupted attempt's node.failed as a shutdown, counts
// the node's shutdowns across attempts, and takes a node.failed without
// an error object (the contract requires one) as an ordinary failure.
func TestReplayShutdowns(t *testing.T) {
	ev := func(seq int64, typ workflow.EventType, data string) workflow.Envelope {
		return workflow.Envelope{Seq: seq, Event: typ, NodeID: "n", Data: json.RawMessage(data)}
	}
	lost := `{"error":{"code":"WORKFLOW_WORKER_LOST","message":"m","retryable":true,"details":{"reason":"shutdown"}},"attempt":%d,"willRetry":true}`
	states, err := replayNodes([]workflow.Envelope{
		ev(1, workflow.EventNodeStarted, `{"attempt":1}`),
		ev(2, workflow.EventNodeFailed, fmt.Sprintf(lost, 1)),
		ev(3, workflow.EventNodeStarted, `{"attempt":2}`),
		ev(4, workflow.EventNodeFailed, fmt.Sprintf(lost, 2)),
		ev(5, workflow.EventNodeStarted, `{"attempt":3}`),
		ev(6, workflow.EventNodeFailed, `{"attempt":3,"willRetry":true}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if st := states["n"]; st.shutdowns != 2 || st.shutdown || !st.willRetry || st.attempt != 3 {
		t.Errorf("state %+v: want 2 shutdowns, the last failure an ordinary one, retried", st)
	}
}
