package nodeset_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine/enginetest"
	"github.com/runstream/runstream/engine/nodeset"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/workflow"
)

// Every node type and both llm providers are registered; the scripted
// provider may call both built-in tools.
func TestRegistry(t *testing.T) {
	t.Parallel()
	reg, err := nodeset.Registry(nodeset.Config{})
	if err != nil {
		t.Fatal(err)
	}
	def := `{"name":"all","nodes":[
		{"id":"a","type":"llm","config":{"provider":"scripted","text":"x","toolCalls":[
			{"id":"c1","name":"http_get","input":{"url":"http://127.0.0.1:1/"}},
			{"id":"c2","name":"sql_query","input":{"database":"shop","query":"SELECT 1"}}]}},
		{"id":"b","type":"llm","config":{"provider":"openai","baseURL":"http://127.0.0.1:1/v1","model":"m","prompt":"p","tools":["http_get","sql_query"]}},
		{"id":"c","type":"human_input"},
		{"id":"d","type":"transform","config":{"expression":"1"}},
		{"id":"e","type":"delay","config":{"ms":1}},
		{"id":"f","type":"http","config":{"url":"http://127.0.0.1:1/"}},
		{"id":"g","type":"sql","config":{"database":"shop","query":"SELECT 1"}}]}`
	if _, err := reg.CompileJSON([]byte(def)); err != nil {
		t.Fatalf("compile: %v", err)
	}
	_, err = reg.CompileJSON([]byte(`{"name":"x","nodes":[{"id":"a","type":"llm","config":{"provider":"other"}}]}`))
	if runstream.ErrorCodeOf(err) != runstream.CodeWorkflowDefinitionInvalid || !strings.Contains(err.Error(), "openai, scripted") {
		t.Errorf("unknown provider: %v", err)
	}
	names := map[string]bool{}
	for _, tool := range nodeset.Tools(nodeset.Config{}) {
		names[tool.Name] = true
	}
	if len(names) != 2 || !names["http_get"] || !names["sql_query"] {
		t.Errorf("tools %v", names)
	}
}

// An openai node's baseURL is the definition's, so the provider's client
// holds it to the http node's address policy: loopback is refused unless
// the allow-list opens it, and the endpoint is never reached.
func TestOpenAIBaseURLIsGuarded(t *testing.T) {
	t.Parallel()
	var reached atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }))
	t.Cleanup(srv.Close)
	reg, err := nodeset.Registry(nodeset.Config{})
	if err != nil {
		t.Fatal(err)
	}
	store := memory.NewWorkflowStore()
	t.Cleanup(func() { store.Close() })
	run, _ := enginetest.Start(t, store, reg, nil).Run(t, `{"name":"ask","nodes":[{"id":"ask","type":"llm",
		"config":{"provider":"openai","baseURL":"`+srv.URL+`/v1","model":"m","prompt":"hi"}}],"output":"ask"}`, `{}`)
	if run.Status != workflow.StatusFailed {
		t.Errorf("run %s, want failed", run.Status)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the loopback endpoint was reached %d times", n)
	}
}
