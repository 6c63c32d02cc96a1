package workflow_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/runstream/runstream/workflow"
)

func TestAppendStoredJSONMatchesAppendJSON(t *testing.T) {
	t.Parallel()
	env := workflow.Envelope{
		SchemaVersion: workflow.SchemaVersion, RunID: "run_1", WorkflowID: "wf_<1>", VersionID: "wv\"1", Seq: 7,
		Event: workflow.EventNodeOutputDelta, NodeID: "n1", Timestamp: time.Date(2026, 8, 26, 10, 0, 0, 120000000, time.FixedZone("", 8*3600)),
		Data: json.RawMessage(`{"channel":"text","delta":"a b"}`),
	}
	want, err := env.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := env.AppendStoredJSON(nil); string(got) != string(want) {
		t.Errorf("AppendStoredJSON = %s\nAppendJSON      = %s", got, want)
	}
	if !json.Valid(want) {
		t.Errorf("invalid JSON %s", want)
	}
	const golden = `{"schemaVersion":"1.0","runId":"run_1","workflowId":"wf_\u003c1\u003e","versionId":"wv\"1","seq":7,"event":"node.output.delta","nodeId":"n1","nodeRunId":null,"timestamp":"2026-08-26T10:00:00.12+08:00","data":{"channel":"text","delta":"a b"}}`
	if string(want) != golden {
		t.Errorf("envelope\n%s\nwant\n%s", want, golden)
	}
}
