package nodeset_test

import (
	"strings"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine/nodeset"
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
