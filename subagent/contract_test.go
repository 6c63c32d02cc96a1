package subagent_test

import (
	"encoding/json"
	"testing"

	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/journal"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/subagent"
	"github.com/runstream/runstream/threadsvc"
)

// TestEventsMatchTheContract writes every kind of event through the thread
// service, whose event log validates them against the contract, and reads
// one task's steps back as the subtask card does.
func TestEventsMatchTheContract(t *testing.T) {
	t.Parallel()
	validator, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	events := memory.NewRunEventStore()
	log := eventlog.NewThreadLog(events, validator, nil, eventlog.ThreadLimits{})
	svc := threadsvc.New(events, events, memory.NewRunStore(), log, nil, threadsvc.Config{})
	w := subagent.NewWriter(journal.ServiceSink{Service: svc, User: "u"}, "t1", "r1", nil)
	ctx := t.Context()
	for _, chunk := range []string{
		`{"type":"task_started","task_id":"a","description":"Research"}`,
		`{"type":"task_started","task_id":"b"}`,
		`{"type":"task_running","task_id":"a","message_index":1,"message":{"type":"ai","content":"x","tool_calls":[{"name":"s","args":{"q":1}}]}}`,
		`{"type":"task_running","task_id":"b","message_index":1,"message":{"type":"ai","content":"y"}}`,
		`{"type":"task_running","task_id":"a","message_index":2,"message":{"type":"tool","name":"s","content":"found"}}`,
		`{"type":"task_completed","task_id":"a","result":"done","usage":{"input_tokens":1,"output_tokens":2,"total_tokens":3},"model_name":"m"}`,
		`{"type":"task_timed_out","task_id":"b"}`,
	} {
		if err := w.Add(ctx, json.RawMessage(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if w.Pending() != 0 {
		t.Fatalf("%d events refused", w.Pending())
	}
	steps, err := svc.RunEvents(ctx, "u", runevents.ListEventsParams{ThreadID: "t1", RunID: "r1",
		EventTypes: []runevents.EventType{runevents.EventSubagentStep}, TaskID: "a", Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 {
		t.Fatalf("%d steps of task a, want 2", len(steps))
	}
	page, err := svc.MessagePage(ctx, "u", "t1", threadsvc.Cursors{Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 0 {
		t.Errorf("subagent events in the message page: %v", page.Data)
	}
}
