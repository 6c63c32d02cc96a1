package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func postJSON(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

// serve runs the workflow engine: a run started over HTTP completes.
func TestServeRunsWorkflows(t *testing.T) {
	t.Parallel()
	base, _, stderr := startServe(t, nil, "--store", "memory:", "--workers", "2", "--worker-id", "test-instance")
	code, wf := postJSON(t, base+"/api/workflows", `{"name":"hello","nodes":[
		{"id":"say","type":"llm","config":{"provider":"scripted","text":"hello {{ input.who }}"}}],"output":"nodes.say.output.text"}`)
	if code != http.StatusCreated {
		t.Fatalf("publish: %d %v", code, wf)
	}
	code, run := postJSON(t, base+"/api/workflows/"+wf["workflowId"].(string)+"/runs", `{"input":{"who":"world"}}`)
	if code != http.StatusCreated {
		t.Fatalf("start run: %d %v", code, run)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body, _ := get(t, base+"/api/workflows/runs/"+run["runId"].(string))
		var view struct {
			Status string
			Output json.RawMessage
		}
		json.Unmarshal([]byte(body), &view)
		if view.Status == "completed" {
			if string(view.Output) != `"hello world"` {
				t.Errorf("output %s", view.Output)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run not completed: %s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(stderr.String(), `"worker_id":"test-instance"`) {
		t.Errorf("the log does not name the worker id:\n%s", stderr)
	}
}

func TestServeWorkersUsage(t *testing.T) {
	t.Parallel()
	m := &Main{Getenv: func(string) string { return "" }}
	var stderr bytes.Buffer
	err := m.Run(t.Context(), []string{"serve", "--store", "memory:", "--workers", "-1"}, io.Discard, &stderr)
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--workers") {
		t.Errorf("err = %v, want a usage error about --workers", err)
	}
}
