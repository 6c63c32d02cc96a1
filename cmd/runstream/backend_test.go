package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runstream/runstream/jsonl"
)

// TestServeJSONLRunEvents serves thread run events from JSONL files beside
// the SQLite file that keeps the rest, and reads them back after a
// restart configured through RUNSTREAM_RUN_EVENTS.
func TestServeJSONLRunEvents(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	eventsDir := filepath.Join(dir, "events")
	args := []string{"--store", "sqlite:" + filepath.Join(dir, "runstream.db"), "--data-dir", dir}

	p := runServe(t, nil, append(args, "--run-events", "jsonl:"+eventsDir)...)
	if !strings.Contains(p.stdout.String(), eventsDir) {
		t.Errorf("stdout does not say where the run events live (%s):\n%s", eventsDir, p.stdout)
	}
	code, body, _ := get(t, p.base+"/readyz")
	if code != 200 || !strings.Contains(body, `"store":"sqlite"`) || !strings.Contains(body, "jsonl: fsync") {
		t.Errorf("/readyz = %d %s", code, body)
	}
	code, out := postJSON(t, p.base+"/api/threads/t1/runs/r1/events",
		`{"events":[{"event_type":"llm.human.input","content":{"type":"human","content":"hello from jsonl","id":"msg_1"},"metadata":{"caller":"lead_agent"}}]}`)
	if code != 201 {
		t.Fatalf("POST event = %d %v", code, out)
	}
	// The event is in the run's JSONL file, not in the SQLite file.
	line, err := os.ReadFile(filepath.Join(eventsDir, "threads", "t1", "runs", "r1.jsonl"))
	if err != nil || !strings.Contains(string(line), "hello from jsonl") {
		t.Fatalf("run file: %v %q", err, line)
	}
	if err := p.stop(); err != nil {
		t.Fatalf("stop serve: %v", err)
	}

	// The environment variable selects the same store.
	p = runServe(t, map[string]string{"RUNSTREAM_RUN_EVENTS": "jsonl:" + eventsDir}, args...)
	code, body, _ = get(t, p.base+"/api/threads/t1/messages/page?limit=10")
	if code != 200 || !strings.Contains(body, "hello from jsonl") {
		t.Errorf("messages after a restart = %d %s", code, body)
	}
}

// TestServeJSONLRunEventsRefusals: a malformed --run-events is a usage
// error that opens nothing; a directory another store holds fails serve.
func TestServeJSONLRunEventsRefusals(t *testing.T) {
	t.Parallel()
	for _, value := range []string{"jsonl:", "csv:/tmp/x", "/tmp/events"} {
		dir := t.TempDir()
		db := filepath.Join(dir, "runstream.db")
		err := (&Main{}).Run(t.Context(), []string{"serve", "--store", "sqlite:" + db, "--run-events", value}, io.Discard, io.Discard)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--run-events") {
			t.Errorf("--run-events %q: err = %v, want a usage error naming the flag", value, err)
		}
		if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("--run-events %q: the store was opened (%v)", value, err)
		}
	}

	dir := t.TempDir()
	held, err := jsonl.Open(jsonl.Config{Dir: filepath.Join(dir, "events")})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	m := &Main{onListen: func(string) { t.Error("serve listens although its run-event directory is held") }}
	err = m.Run(t.Context(), []string{"serve", "--addr", "127.0.0.1:0", "--store", "memory:", "--run-events", "jsonl:" + filepath.Join(dir, "events")}, io.Discard, io.Discard)
	if err == nil || exitCode(err) != 1 || !errors.Is(err, jsonl.ErrLocked) {
		t.Errorf("serve over a held directory: err = %v, want jsonl.ErrLocked with exit status 1", err)
	}
}
