package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// eventsCmd runs "runstream events" with args; it returns the error and
// stdout.
func eventsCmd(t *testing.T, args ...string) (error, string) {
	t.Helper()
	return commandOutput(t, "events", args...)
}

// commandOutput runs "runstream cmd" with args and no environment; it
// returns the error and stdout.
func commandOutput(t *testing.T, cmd string, args ...string) (error, string) {
	t.Helper()
	m := &Main{Getenv: func(string) string { return "" }}
	var stdout, stderr bytes.Buffer
	err := m.Run(t.Context(), append([]string{cmd}, args...), &stdout, &stderr)
	return err, stdout.String()
}

// events prints a finished workflow run's stored events once, in order,
// as text or NDJSON, from --after; an unknown run is an error.
func TestEventsWorkflowRun(t *testing.T) {
	t.Parallel()
	base, _, _ := startServe(t, nil, "--store", "memory:")
	var wf struct{ WorkflowID string }
	apiCall(t, "POST", base+"/api/workflows", "application/json", `{"name":"quick","nodes":[{"id":"a","type":"delay","config":{"ms":1}}],"output":"a"}`, 201, &wf)
	var run struct{ RunID string }
	apiCall(t, "POST", base+"/api/workflows/"+wf.WorkflowID+"/runs", "application/json", `{"input":{}}`, 201, &run)
	// tail returns once the run ended.
	tail := &Main{Getenv: func(string) string { return "" }}
	if err := tail.Run(t.Context(), []string{"tail", "--server", base, run.RunID}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	err, out := eventsCmd(t, "--server", base, run.RunID)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "#1 ") || !strings.Contains(lines[0], "run.created") || !strings.Contains(lines[len(lines)-1], "run.completed") {
		t.Errorf("events printed:\n%s", out)
	}
	err, out = eventsCmd(t, "--server", base, "--json", "--after", "2", run.RunID)
	if err != nil {
		t.Fatal(err)
	}
	jsonLines := strings.Split(strings.TrimSpace(out), "\n")
	for i, line := range jsonLines {
		var env struct{ Seq int }
		if err := json.Unmarshal([]byte(line), &env); err != nil || env.Seq != i+3 {
			t.Fatalf("line %d %q: seq %d, %v; want seq %d", i, line, env.Seq, err, i+3)
		}
	}
	if len(jsonLines) != len(lines)-2 {
		t.Errorf("--after 2 printed %d events of %d", len(jsonLines), len(lines))
	}
	if err, _ := eventsCmd(t, "--server", base, "run_nope"); err == nil || !strings.Contains(err.Error(), "not found") || errors.Is(err, errUsage) {
		t.Errorf("unknown run: %v", err)
	}
	if err, _ := eventsCmd(t, "--server", base); !errors.Is(err, errUsage) {
		t.Errorf("no run id: %v", err)
	}
}

// events --thread prints a thread run's records, over more than one page
// of the endpoint, each once and in order.
func TestEventsThreadRun(t *testing.T) {
	t.Parallel()
	base, _, _ := startServe(t, nil, "--store", "memory:")
	const n = threadEventsPage + 50
	for i := 0; i < n; i += 100 {
		var events []string
		for j := i; j < min(i+100, n); j++ {
			events = append(events, fmt.Sprintf(`{"event_type":"run.start","content":{"chain":"c%d"},"metadata":{"caller":"lead_agent"}}`, j))
		}
		apiCall(t, "POST", base+"/api/threads/t1/runs/r1/events", "application/json", `{"events":[`+strings.Join(events, ",")+`]}`, 201, nil)
	}
	err, out := eventsCmd(t, "--server", base, "--thread", "t1", "--json", "r1")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != n {
		t.Fatalf("printed %d records, want %d", len(lines), n)
	}
	for i, line := range lines {
		var r struct {
			Seq     int
			Content struct{ Chain string }
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.Seq != i+1 || r.Content.Chain != fmt.Sprintf("c%d", i) {
			t.Fatalf("record %d: %q (%v)", i, line, err)
		}
	}
	err, out = eventsCmd(t, "--server", base, "--thread", "t1", "--after", fmt.Sprint(n-1), "r1")
	if err != nil || !strings.HasPrefix(out, fmt.Sprintf("#%d ", n)) || strings.Count(out, "\n") != 1 || !strings.Contains(out, "run.start  trace") {
		t.Errorf("the last record as text: %q, %v", out, err)
	}
}

// events --thread refuses ids the server would not take, which a path
// would otherwise read as another thread's ("..", "/"), and stops on a
// server whose pages do not advance instead of printing them forever.
func TestEventsThreadRefusals(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--thread", "zz", "../../t1/runs/r1"}, {"--thread", "..", "r1"}, {"--thread", "%41", "r1"}} {
		if err, _ := eventsCmd(t, append([]string{"--server", "http://127.0.0.1:1"}, args...)...); !errors.Is(err, errUsage) {
			t.Errorf("events %q: %v, want a usage error", args, err)
		}
	}
	var page strings.Builder
	page.WriteString("[")
	for i := range threadEventsPage {
		if i > 0 {
			page.WriteString(",")
		}
		fmt.Fprintf(&page, `{"thread_id":"t1","run_id":"r1","event_type":"run.start","category":"trace","content":{},"metadata":{},"seq":%d,"created_at":"2026-12-02T00:00:00Z"}`, i+1)
	}
	page.WriteString("]")
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, page.String()) // whatever after_seq says
	}))
	defer stuck.Close()
	err, out := eventsCmd(t, "--server", stuck.URL, "--thread", "t1", "r1")
	if err == nil || !strings.Contains(err.Error(), "do not advance") {
		t.Errorf("a server whose pages do not advance: %v", err)
	}
	if n := strings.Count(out, "\n"); n != threadEventsPage {
		t.Errorf("printed %d lines, want the first page's %d", n, threadEventsPage)
	}
}
