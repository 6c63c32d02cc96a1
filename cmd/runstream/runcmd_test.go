package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const examples = "../../examples/workflows/"

// runCmd runs "runstream run" with args and stdin; it returns the error,
// stdout and stderr.
func runCmd(t *testing.T, stdin string, args ...string) (error, string, string) {
	t.Helper()
	m := &Main{Getenv: func(string) string { return "" }, Stdin: strings.NewReader(stdin)}
	var stdout, stderr bytes.Buffer
	err := m.Run(t.Context(), append([]string{"run"}, args...), &stdout, &stderr)
	return err, stdout.String(), stderr.String()
}

// printedTypes returns the event type of each line "runstream run" printed.
func printedTypes(out string) []string {
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if fields := strings.Fields(line); len(fields) >= 3 {
			types = append(types, fields[2])
		}
	}
	return types
}

func TestRunCommand(t *testing.T) {
	t.Parallel()
	base, _, _ := startServe(t, nil, "--store", "memory:")
	testRunCommand(t, func(*testing.T) []string { return []string{"--server", base} })
}

// TestRunCommandInProcess runs workflows with the services in the
// command's own process, without HTTP: on a memory store, and on a SQLite
// file whose runs a later "run --store" of the same file sees.
func TestRunCommandInProcess(t *testing.T) {
	t.Parallel()
	t.Run("Memory", func(t *testing.T) {
		t.Parallel()
		testRunCommand(t, func(*testing.T) []string { return []string{"--store", "memory:"} })
	})
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		testRunCommand(t, func(t *testing.T) []string {
			return []string{"--store", "sqlite:" + filepath.Join(t.TempDir(), "runstream.db")}
		})
	})
}

// testRunCommand runs "runstream run" against the target that target's
// flags name (--server or --store).
func testRunCommand(t *testing.T, target func(t *testing.T) []string) {
	approvalOf := func(t *testing.T) []string {
		return append([]string{examples + "approval.yaml", "--input", `{"customer":"Ada","topic":"tea"}`}, target(t)...)
	}

	t.Run("ResumeFlags", func(t *testing.T) {
		t.Parallel()
		err, out, _ := runCmd(t, "", append(approvalOf(t), "--resume", "action=approve", "--values", `{"note":"ok"}`)...)
		if err != nil {
			t.Fatal(err)
		}
		types := printedTypes(out)
		if types[0] != "run.created" || types[len(types)-1] != "run.completed" || !strings.Contains(out, "run.awaiting_input") || !strings.Contains(out, "run.resumed") {
			t.Errorf("events %v", types)
		}
		if !strings.Contains(out, `"approved":true`) || !strings.Contains(out, `"note":"ok"`) {
			t.Errorf("the output of the run is not printed:\n%s", out)
		}
	})
	t.Run("Interactive", func(t *testing.T) {
		t.Parallel()
		// An unknown action is asked again; a note the form refuses is
		// refused by the server, and everything is asked again.
		stdin := "maybe\napprove\n" + strings.Repeat("x", 300) + "\nreject\nnot today\n"
		err, out, stderr := runCmd(t, stdin, approvalOf(t)...)
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		for _, want := range []string{"actions: approve, reject", `"maybe" is not one of`, "note (string): ", "refused: "} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr)
			}
		}
		if !strings.Contains(out, `"approved":false`) || !strings.Contains(out, `"note":"not today"`) {
			t.Errorf("output:\n%s", out)
		}
	})
	t.Run("NoAnswer", func(t *testing.T) {
		t.Parallel()
		err, _, _ := runCmd(t, "", approvalOf(t)...)
		if err == nil || !strings.Contains(err.Error(), "--resume") || errors.Is(err, errUsage) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("JSON", func(t *testing.T) {
		t.Parallel()
		err, out, _ := runCmd(t, "", append(approvalOf(t), "--json", "--resume", "action=reject")...)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var env struct {
				Seq   int64
				Event string
				Data  struct{ ResumeToken string }
			}
			if err := json.Unmarshal([]byte(line), &env); err != nil || env.Seq == 0 {
				t.Fatalf("line %q: %v", line, err)
			}
			if env.Event == "run.awaiting_input" && env.Data.ResumeToken != tokenPlaceholder {
				t.Errorf("the resume token is printed: %q", env.Data.ResumeToken)
			}
		}
	})
	t.Run("FailedRun", func(t *testing.T) {
		t.Parallel()
		err, out, _ := runCmd(t, "", append([]string{examples + "failing.yaml"}, target(t)...)...)
		if !errors.Is(err, errRunEnded) || exitCode(err) != 1 {
			t.Errorf("err = %v, want a failed run", err)
		}
		if types := printedTypes(out); types[len(types)-1] != "run.failed" || !strings.Contains(out, "WORKFLOW_SQL_POLICY_DENIED") {
			t.Errorf("output:\n%s", out)
		}
	})
	t.Run("InvalidDefinition", func(t *testing.T) {
		t.Parallel()
		file := filepath.Join(t.TempDir(), "bad.yaml")
		os.WriteFile(file, []byte("name: bad\nnodes:\n  - {id: a, type: nope}\n"), 0o600)
		err, _, _ := runCmd(t, "", append([]string{file}, target(t)...)...)
		if err == nil || !strings.Contains(err.Error(), "WORKFLOW_DEFINITION_INVALID") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestRunCommandUsage(t *testing.T) {
	t.Parallel()
	tests := [][]string{
		{},
		{"x.yaml", "--input", "{nope"},
		{"x.yaml", "--values", `{"a":1}`},
		{"x.yaml", "--resume", "approve"},
		{"x.yaml", "--resume", "action=approve", "--values", "[1]"},
		{"x.yaml", "--server", "ftp://host"},
		{"x.yaml", "--server", "http://127.0.0.1:1", "--store", "memory:"},
	}
	for _, args := range tests {
		err, _, _ := runCmd(t, "", args...)
		if !errors.Is(err, errUsage) {
			t.Errorf("run %q: err = %v, want a usage error", args, err)
		}
	}
}

// TestRunCommandStoreFromEnvironment: RUNSTREAM_STORE, exported for serve,
// gives way to a --server given on the command line, and runs in process
// only with a notice saying so.
func TestRunCommandStoreFromEnvironment(t *testing.T) {
	t.Parallel()
	base, _, _ := startServe(t, nil, "--store", "memory:")
	run := func(args ...string) (error, string) {
		m := &Main{Getenv: func(name string) string {
			if name == "RUNSTREAM_STORE" {
				return "memory:"
			}
			return ""
		}, Stdin: strings.NewReader("")}
		var stdout, stderr bytes.Buffer
		err := m.Run(t.Context(), append([]string{"run"}, args...), &stdout, &stderr)
		return err, stderr.String()
	}
	quick := filepath.Join(t.TempDir(), "quick.yaml")
	if err := os.WriteFile(quick, []byte("name: quick\nnodes: [{id: a, type: delay, config: {ms: 1}}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err, stderr := run("--server", base, quick); err != nil || strings.Contains(stderr, "in this process") {
		t.Errorf("--server with RUNSTREAM_STORE set: %v\n%s", err, stderr)
	}
	if err, stderr := run(quick); err != nil || !strings.Contains(stderr, "running in this process on memory: (from RUNSTREAM_STORE)") {
		t.Errorf("RUNSTREAM_STORE alone: %v\n%s", err, stderr)
	}
}

// serve wires the server's node configuration: the SQL databases named by
// --sql-database, artifact files under --data-dir, and the openai key from
// the environment only, sent to the base URLs --openai-base-url lists.
func TestServeNodeConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	shop := filepath.Join(dir, "shop.db")
	db, err := sql.Open("sqlite", "file:"+shop)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE items (name TEXT); INSERT INTO items VALUES ('kettle')"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	var auth atomic.Value
	llm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(llm.Close)
	dataDir := filepath.Join(dir, "data")
	base, _, _ := startServe(t, map[string]string{"RUNSTREAM_OPENAI_API_KEY": "sk-from-env"},
		"--store", "sqlite:"+filepath.Join(dir, "rs.db"), "--data-dir", dataDir, "--sql-database", "shop=sqlite:"+shop,
		// The provider is on loopback: open it, and send it the key.
		"--http-node-allow", "127.0.0.0/8", "--openai-base-url", llm.URL+"/v1")
	file := filepath.Join(dir, "flow.yaml")
	os.WriteFile(file, []byte(`name: wiring
nodes:
  - id: items
    type: sql
    config: {database: shop, query: "SELECT name FROM items"}
  - id: ask
    type: llm
    config: {provider: openai, baseURL: "`+llm.URL+`/v1", model: m, prompt: hello}
  - id: note
    type: transform
    needs: [items, ask]
    artifact: {name: note.txt, mimeType: text/plain}
    config: {expression: 'nodes.items.output.rows[0].name + " " + nodes.ask.output.text'}
output: note
`), 0o600)
	err, out, stderr := runCmd(t, "", file, "--server", base, "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if got, _ := auth.Load().(string); got != "Bearer sk-from-env" {
		t.Errorf("the provider was sent Authorization %q", got)
	}
	var runID, artifactID string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var env struct {
			RunID string
			Event string
			Data  struct{ ArtifactID string }
		}
		json.Unmarshal([]byte(line), &env)
		runID = env.RunID
		if env.Event == "artifact.created" {
			artifactID = env.Data.ArtifactID
		}
	}
	content, err := os.ReadFile(filepath.Join(dataDir, "artifacts", runID, artifactID))
	if err != nil || string(content) != "kettle hi" {
		t.Errorf("artifact file: %q (%v)", content, err)
	}
	if strings.Contains(out, "sk-from-env") {
		t.Errorf("an event holds the key")
	}
	code, body, header := get(t, base+"/api/workflows/runs/"+runID+"/artifacts/"+artifactID)
	if code != 200 || body != "kettle hi" || header.Get("Content-Type") != "text/plain" {
		t.Errorf("GET artifact: %d %q %v", code, body, header)
	}

	m := &Main{Getenv: func(string) string { return "" }}
	err = m.Run(t.Context(), []string{"serve", "--store", "memory:", "--sql-database", "shop=mysql://x"}, io.Discard, io.Discard)
	if !errors.Is(err, errUsage) {
		t.Errorf("a bad --sql-database: %v", err)
	}
}

// TestServeHTTPNodeAllow: a bad --http-node-allow or
// RUNSTREAM_HTTP_NODE_ALLOW is a usage error.
func TestServeHTTPNodeAllow(t *testing.T) {
	t.Parallel()
	m := &Main{Getenv: func(string) string { return "" }}
	err := m.Run(t.Context(), []string{"serve", "--store", "memory:", "--http-node-allow", "http://x:80"}, io.Discard, io.Discard)
	if !errors.Is(err, errUsage) {
		t.Errorf("a bad --http-node-allow: %v", err)
	}
	m = &Main{Getenv: func(name string) string {
		if name == "RUNSTREAM_HTTP_NODE_ALLOW" {
			return "user@host"
		}
		return ""
	}}
	err = m.Run(t.Context(), []string{"serve", "--store", "memory:"}, io.Discard, io.Discard)
	if !errors.Is(err, errUsage) {
		t.Errorf("a bad RUNSTREAM_HTTP_NODE_ALLOW: %v", err)
	}
}

// progressWriter closes seen at the first line of node.progress written
// to it.
type progressWriter struct {
	once sync.Once
	seen chan struct{}
}

func (w *progressWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("node.progress")) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

// A Ctrl-C on an in-process run interrupts its running node (a minute's
// delay) instead of waiting for it: the attempt ends with node.failed,
// lost to a shutdown and retried, which a server on the same store then
// shows.
func TestRunCommandInterruptedInProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	store := "sqlite:" + filepath.Join(dir, "runstream.db")
	file := filepath.Join(dir, "long.yaml")
	if err := os.WriteFile(file, []byte("name: long\nnodes: [{id: long, type: delay, config: {ms: 60000, progressEveryMs: 200}}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := &progressWriter{seen: make(chan struct{})}
	go func() {
		<-out.seen
		cancel()
	}()
	var stderr syncBuffer
	m := &Main{Getenv: func(string) string { return "" }, Stdin: strings.NewReader("")}
	err := m.Run(ctx, []string{"run", file, "--store", store}, out, &stderr)
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("err = %v, want interrupted\n%s", err, stderr.String())
	}
	_, runID, _ := strings.Cut(strings.TrimSpace(stderr.String()), ", run ")
	runID, _, _ = strings.Cut(runID, "\n")

	base, _, _ := startServe(t, nil, "--store", store, "--shutdown-timeout", "4s")
	resp, err := http.Get(base + "/api/workflows/runs/" + runID + "/events?limit=1000")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Events []struct {
			Event     string    `json:"event"`
			Timestamp time.Time `json:"timestamp"`
			Data      struct {
				Error struct {
					Code    string `json:"code"`
					Details struct{ Reason string }
				} `json:"error"`
				WillRetry bool `json:"willRetry"`
			} `json:"data"`
		} `json:"events"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("events of run %q: %d %v", runID, resp.StatusCode, err)
	}
	var progress time.Time
	for _, e := range page.Events {
		switch e.Event {
		case "node.progress":
			if progress.IsZero() {
				progress = e.Timestamp
			}
		case "node.failed":
			if e.Data.Error.Code != "WORKFLOW_WORKER_LOST" || e.Data.Error.Details.Reason != "shutdown" || !e.Data.WillRetry {
				t.Errorf("node.failed %+v, want lost to a shutdown and retried", e.Data)
			}
			// Well within serve's 30 s, whose interruption comes 25 s in.
			if waited := e.Timestamp.Sub(progress); waited > 10*time.Second {
				t.Errorf("the node was interrupted %v after the Ctrl-C; want within the in-process timeout (%v)", waited, localShutdownTimeout)
			}
			return
		}
	}
	t.Errorf("run %s has no node.failed: the interrupted attempt was left open", runID)
}
