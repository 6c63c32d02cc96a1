package engine_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/engine/enginetest"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/workflow"
)

// thinker is a node type that answers as an llm provider may: text with
// its hidden reasoning.
func thinker() engine.NodeType {
	return engine.NodeType{Name: "thinker", Compile: func(json.RawMessage) (engine.NodeFunc, error) {
		return func(context.Context, *engine.NodeRun) (json.RawMessage, error) {
			return json.RawMessage(`{"text":"answer","reasoning_content":"hidden-thoughts-xyz"}`), nil
		}, nil
	}}
}

// TestNodeOutputsAreRedacted: a raw HTTP result, an llm-like output with
// reasoning_content and human input values are stored (and passed
// downstream) redacted.
func TestNodeOutputsAreRedacted(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"user":"ada","password":"hunter2-planted"}`)
	}))
	t.Cleanup(srv.Close)
	allow, err := engine.ParseHTTPAllowList("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := engine.NewRegistry(engine.HTTP(engine.HTTPOptions{Allow: allow}), engine.Transform(), thinker())
	if err != nil {
		t.Fatal(err)
	}
	store := memory.NewWorkflowStore()
	e := enginetest.Start(t, store, reg, nil)
	run, _ := e.Run(t, `{"name":"r","nodes":[
		{"id":"call","type":"http","config":{"url":"`+srv.URL+`/"}},
		{"id":"think","type":"thinker","config":{}},
		{"id":"copy","type":"transform","needs":["call","think"],"config":{"expression":"[nodes.call.output.body, nodes.think.output]"}}],"output":"copy"}`, `{}`)
	if run.Status != workflow.StatusCompleted {
		t.Fatalf("run %s: %s", run.Status, run.Error)
	}
	outputs, err := store.NodeOutputs(t.Context(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	for id, out := range outputs {
		for _, planted := range []string{"hunter2-planted", "hidden-thoughts-xyz"} {
			if strings.Contains(string(out), planted) {
				t.Errorf("the stored output of %s holds %q: %s", id, planted, out)
			}
		}
	}
	if !strings.Contains(string(outputs["call"]), "REDACTED") || !strings.Contains(string(outputs["think"]), `"answer"`) {
		t.Errorf("outputs: %s", outputs)
	}
	if resumed := string(engine.ResumeOutput("submit", json.RawMessage(`{"note":"ok","password":"hunter2-planted"}`))); strings.Contains(resumed, "hunter2-planted") {
		t.Errorf("ResumeOutput keeps the password: %s", resumed)
	}
}
