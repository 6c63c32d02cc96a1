package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runstream/runstream/httpapi"
	"github.com/runstream/runstream/internal/threadtest"
)

// newServer is the HTTP API over memory stores, in process.
func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	svc := threadtest.Service(t)
	api := httpapi.New(httpapi.Config{}, nil, svc)
	srv := httptest.NewServer(api)
	t.Cleanup(func() {
		_ = api.Shutdown(t.Context())
		srv.Close()
	})
	return srv
}

func get(t *testing.T, srv *httptest.Server, path string, into any) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, into); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, body)
	}
}

// TestAgentAgainstServer runs the example offline against an in-process
// server and reads its run back through every history endpoint.
func TestAgentAgainstServer(t *testing.T) {
	srv := newServer(t)
	dir := t.TempDir()
	var out bytes.Buffer
	env := func(string) string { return "" } // offline: the scripted models
	if err := run(t.Context(), []string{"-server", srv.URL, "-thread", "th1", "-run", "run1", "-dir", dir}, &out, env); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "The report is in outputs/report.md.") {
		t.Errorf("output = %q", out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "outputs", "report.md")); err != nil {
		t.Fatalf("the agent wrote no report: %v", err)
	}

	var page struct {
		Data []struct {
			EventType string          `json:"event_type"`
			Content   json.RawMessage `json:"content"`
		} `json:"data"`
	}
	get(t, srv, "/api/threads/th1/messages/page?limit=50", &page)
	var types []string
	for _, r := range page.Data {
		types = append(types, r.EventType)
	}
	want := "llm.human.input llm.ai.response llm.tool.result llm.ai.response llm.tool.result llm.tool.result llm.ai.response"
	if strings.Join(types, " ") != want {
		t.Errorf("messages page = %v\nwant %s", types, want)
	}

	var steps []struct {
		Content struct {
			Kind string `json:"kind"`
			Text string `json:"text"`
		} `json:"content"`
	}
	get(t, srv, "/api/threads/th1/runs/run1/events?event_types=subagent.step&task_id=call-task-1&limit=500", &steps)
	if len(steps) != 3 || steps[0].Content.Kind != "ai" || steps[1].Content.Kind != "tool" ||
		steps[1].Content.Text != "plan\nbuild\nship\n" {
		t.Errorf("subagent steps = %+v", steps)
	}

	var changes struct {
		Available bool `json:"available"`
		Summary   struct {
			Created, Modified, Additions, Deletions int
		} `json:"summary"`
		Files []struct {
			Path, Status, Diff string
		} `json:"files"`
	}
	get(t, srv, "/api/threads/th1/runs/run1/workspace-changes?include_files=true&include_diff=true", &changes)
	if !changes.Available || changes.Summary.Created != 1 || changes.Summary.Modified != 1 || len(changes.Files) != 2 {
		t.Fatalf("workspace changes = %+v", changes)
	}
	if f := changes.Files[1]; f.Path != "/mnt/user-data/workspace/notes.txt" || !strings.Contains(f.Diff, "+reviewed") {
		t.Errorf("notes.txt change = %+v", f)
	}

	var usage map[string]any
	get(t, srv, "/api/threads/th1/token-usage", &usage)
	// lead 150+240+272, research 60+95
	if usage["total_tokens"] != 817.0 {
		t.Errorf("token usage = %v", usage)
	}
	var runRow map[string]any
	get(t, srv, "/api/threads/th1/runs/run1", &runRow)
	if runRow["status"] != "success" || runRow["llm_call_count"] != 3.0 || runRow["subagent_tokens"] != 155.0 {
		t.Errorf("run row = %v", runRow)
	}
	var all []struct {
		EventType string `json:"event_type"`
	}
	get(t, srv, "/api/threads/th1/runs/run1/events?limit=500", &all)
	var seen []string
	for _, e := range all {
		seen = append(seen, e.EventType)
	}
	for _, want := range []string{"run.start", "run.end", "subagent.start", "subagent.end", "workspace_changes", "run.delivery"} {
		found := false
		for _, s := range seen {
			found = found || s == want
		}
		if !found {
			t.Errorf("no %s among %v", want, seen)
		}
	}
}
