package workflowllm_test

import (
	"encoding/json"
	"testing"

	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/engine/enginetest"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/journal/workflowllm"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/threadsvc"
	"github.com/runstream/runstream/workflow"
)

// TestLLMNodeAttemptsJournaled runs a workflow whose llm node makes a tool
// call and fails its first attempt, and reads both attempts back through
// the thread service as the thread endpoints do.
func TestLLMNodeAttemptsJournaled(t *testing.T) {
	t.Parallel()
	validator, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	events := memory.NewRunEventStore()
	threads := threadsvc.New(events, events, memory.NewRunStore(), eventlog.NewThreadLog(events, validator, nil, eventlog.ThreadLimits{}), nil, threadsvc.Config{})
	store := memory.NewWorkflowStore()
	t.Cleanup(func() { store.Close() })
	observe := workflowllm.Observer(workflowllm.Config{Threads: threads, Runs: store})
	reg, err := engine.NewRegistry(engine.ObservedLLM(observe, engine.ScriptedProvider()))
	if err != nil {
		t.Fatal(err)
	}
	def := `{"name":"ask","nodes":[{"id":"ask","type":"llm","retry":{"maxAttempts":2,"backoffMs":1},"config":{"provider":"scripted",
		"text":"Pears are ripe.","failAttempts":[1],"failAfterTokens":1,
		"toolCalls":[{"id":"c1","name":"search","input":{"q":"pears"},"output":{"hits":3}}]}}],"output":"ask"}`
	run, wfEvents := enginetest.Start(t, store, reg, nil).Run(t, def, `{}`)
	if run.Status != workflow.StatusCompleted {
		t.Fatalf("run %s", run.Status)
	}
	var nodeRuns []string // one per attempt
	for _, e := range wfEvents {
		if e.NodeRunID != "" && (len(nodeRuns) == 0 || nodeRuns[len(nodeRuns)-1] != e.NodeRunID) {
			nodeRuns = append(nodeRuns, e.NodeRunID)
		}
	}
	if len(nodeRuns) != 2 {
		t.Fatalf("node runs %v, want one per attempt", nodeRuns)
	}
	ctx := t.Context()
	read := func(nodeRunID string) ([]runevents.Record, []string) {
		rows, err := threads.RunEvents(ctx, "alice", runevents.ListEventsParams{ThreadID: run.ID, RunID: nodeRunID, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, r := range rows {
			types = append(types, string(r.EventType))
		}
		return rows, types
	}
	same := func(got []string, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("events %v\nwant   %v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("events %v\nwant   %v", got, want)
			}
		}
	}
	_, failed := read(nodeRuns[0])
	same(failed, "run.start", "run.error")
	rows, types := read(nodeRuns[1])
	same(types, "run.start", "llm.ai.response", "llm.tool.result", "llm.ai.response", "run.end")
	nodeRunID := nodeRuns[1]
	var tool, answer struct {
		Content    string `json:"content"`
		ToolCallID string `json:"tool_call_id"`
	}
	_ = json.Unmarshal(rows[2].Content, &tool)
	_ = json.Unmarshal(rows[3].Content, &answer)
	if tool.ToolCallID != "c1" || tool.Content != `{"hits":3}` || answer.Content != "Pears are ripe." {
		t.Errorf("tool %+v, answer %+v", tool, answer)
	}
	row, err := threads.GetRun(ctx, "alice", run.ID, nodeRunID)
	if err != nil {
		t.Fatal(err)
	}
	if row.Status != runevents.RunSuccess || row.OperationKind != "workflow_llm" {
		t.Errorf("node run row = %+v", row)
	}
	if row, err := threads.GetRun(ctx, "alice", run.ID, nodeRuns[0]); err != nil || row.Status != runevents.RunError {
		t.Errorf("failed attempt's row = %+v, %v", row, err)
	}
	page, err := threads.MessagePage(ctx, "alice", run.ID, threadsvc.Cursors{Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 3 {
		t.Errorf("%d rows in the thread's messages page, want 3", len(page.Data))
	}
}
