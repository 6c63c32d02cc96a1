package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serve journals each llm node attempt into the workflow run's thread
// (thread = run id): the thread's history shows what the model answered.
func TestServeJournalsLLMNodes(t *testing.T) {
	t.Parallel()
	base, _, _ := startServe(t, nil, "--store", "memory:")
	file := filepath.Join(t.TempDir(), "ask.yaml")
	os.WriteFile(file, []byte(`name: ask
nodes:
  - id: ask
    type: llm
    config: {provider: scripted, text: "pears are ripe in autumn"}
output: ask
`), 0o600)
	err, out, stderr := runCmd(t, "", file, "--server", base, "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var first struct{ RunID string }
	json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &first)
	if first.RunID == "" {
		t.Fatalf("no run id in the output:\n%s", out)
	}
	resp, err := http.Get(base + "/api/threads/" + first.RunID + "/messages/page?limit=50")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "pears are ripe in autumn") {
		t.Errorf("the run's thread = %d %s; want the model's answer in its history", resp.StatusCode, body)
	}
}
