package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
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
