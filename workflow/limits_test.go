package workflow_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

func TestCheckEventSize(t *testing.T) {
	t.Parallel()
	data := func(n int) json.RawMessage { return json.RawMessage(`"` + strings.Repeat("x", n-2) + `"`) }
	e := workflow.NewEvent{Event: workflow.EventNodeProgress, Data: data(workflow.DefaultMaxEventBytes)}
	if err := workflow.CheckEventSize(0, e, 0); err != nil {
		t.Errorf("an event of exactly the default bound: %v", err)
	}
	e.Data = data(workflow.DefaultMaxEventBytes + 1)
	if err := workflow.CheckEventSize(3, e, 0); runstream.ErrorCodeOf(err) != runstream.CodePayloadTooLarge {
		t.Errorf("an event past the default bound: %v", err)
	}
	e.Data = data(100)
	if err := workflow.CheckEventSize(0, e, 99); runstream.ErrorCodeOf(err) != runstream.CodePayloadTooLarge {
		t.Errorf("an event past a configured bound: %v", err)
	}
}
