package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream/client"
	"github.com/runstream/runstream/workflow"
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

// serve runs the workflow engine on every store: a scripted workflow
// published and started over HTTP runs to run.completed, followed on the
// run's event stream.
func TestServeRunsWorkflows(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) string
	}{
		{"memory", func(*testing.T) string { return "memory:" }},
		{"sqlite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "runstream.db") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base, _, stderr := startServe(t, nil, "--store", tc.store(t), "--workers", "2", "--worker-id", "test-instance")
			code, wf := postJSON(t, base+"/api/workflows", `{"name":"hello","nodes":[
				{"id":"say","type":"llm","config":{"provider":"scripted","text":"hello {{ input.who }}"}}],"output":"nodes.say.output.text"}`)
			if code != http.StatusCreated {
				t.Fatalf("publish: %d %v", code, wf)
			}
			code, run := postJSON(t, base+"/api/workflows/"+wf["workflowId"].(string)+"/runs", `{"input":{"who":"world"}}`)
			if code != http.StatusCreated {
				t.Fatalf("start run: %d %v", code, run)
			}
			events := followRun(t, base, run["runId"].(string))
			if len(events) == 0 || events[len(events)-1].Event != workflow.EventRunCompleted {
				t.Fatalf("the run did not complete: events %v\nstderr:\n%s", eventTypes(events), stderr)
			}
			var completed struct{ Output json.RawMessage }
			if err := json.Unmarshal(events[len(events)-1].Data, &completed); err != nil || string(completed.Output) != `"hello world"` {
				t.Errorf("run.completed data %s (%v), want output \"hello world\"", events[len(events)-1].Data, err)
			}
			for _, want := range []workflow.EventType{workflow.EventRunStarted, workflow.EventNodeStarted, workflow.EventNodeCompleted} {
				if !slices.Contains(eventTypes(events), want) {
					t.Errorf("no %s among %v", want, eventTypes(events))
				}
			}
			if _, body, _ := get(t, base+"/api/workflows/runs/"+run["runId"].(string)); !strings.Contains(body, `"completed"`) {
				t.Errorf("the run's view is not completed: %s", body)
			}
			if !strings.Contains(stderr.String(), `"worker_id":"test-instance"`) || strings.Contains(stderr.String(), "workflow engine disabled") {
				t.Errorf("the log does not show the engine started with its worker id:\n%s", stderr)
			}
		})
	}
}

// followRun follows a run's event stream from its first event to its
// terminal one, within 30 seconds.
func followRun(t *testing.T, base, runID string) []workflow.Envelope {
	t.Helper()
	c, err := client.New(base)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var events []workflow.Envelope
	for env, err := range c.Follow(ctx, runID, client.FollowOptions{}) {
		if err != nil {
			t.Fatalf("follow run %s after %v: %v", runID, eventTypes(events), err)
		}
		events = append(events, env)
	}
	return events
}

func eventTypes(events []workflow.Envelope) []workflow.EventType {
	out := make([]workflow.EventType, len(events))
	for i, e := range events {
		out[i] = e.Event
	}
	return out
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

// Shutting serve down ends the open SSE streams, which took their
// connections over from net/http, each with the clean end of its body.
func TestServeShutdownEndsOpenStreams(t *testing.T) {
	t.Parallel()
	p := runServe(t, nil, "--store", "memory:", "--workers", "0") // no engine: the run stays queued
	code, wf := postJSON(t, p.base+"/api/workflows", `{"name":"idle","nodes":[
		{"id":"say","type":"llm","config":{"provider":"scripted","text":"hi"}}]}`)
	if code != http.StatusCreated {
		t.Fatalf("publish: %d %v", code, wf)
	}
	code, run := postJSON(t, p.base+"/api/workflows/"+wf["workflowId"].(string)+"/runs", `{"input":{}}`)
	if code != http.StatusCreated {
		t.Fatalf("start run: %d %v", code, run)
	}
	resp, err := http.Get(p.base + "/api/workflows/runs/" + run["runId"].(string) + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for line := ""; line != "event: run.queued\n"; {
		if line, err = br.ReadString('\n'); err != nil {
			t.Fatalf("read the stream: %v", err)
		}
	}
	readErr := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(br) // fails on a body cut without its last chunk
		readErr <- err
	}()
	if err := p.stop(); err != nil {
		t.Fatalf("serve: %v\nstderr:\n%s", err, p.stderr)
	}
	select {
	case err := <-readErr:
		if err != nil {
			t.Errorf("the stream ended with %v, want its clean end", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream is still open 10 s after serve stopped")
	}
}
