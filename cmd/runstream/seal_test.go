package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// askFlow parks each run at a human input.
const askFlow = `{"definition":{"name":"ask","nodes":[
	{"id":"ask","type":"human_input","config":{"actions":["approve"]}}],"output":"nodes.ask.output.action"}}`

// awaitToken polls the run's events page until run.awaiting_input and
// returns its resume token.
func awaitToken(t *testing.T, base, runID string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		code, body, _ := get(t, base+"/api/workflows/runs/"+runID+"/events")
		if code != http.StatusOK {
			t.Fatalf("events page: %d %s", code, body)
		}
		var page struct {
			Events []struct {
				Event string `json:"event"`
				Data  struct {
					ResumeToken string `json:"resumeToken"`
				} `json:"data"`
			} `json:"events"`
		}
		if err := json.Unmarshal([]byte(body), &page); err != nil {
			t.Fatalf("events page: %v %s", err, body)
		}
		for _, e := range page.Events {
			if e.Event == "run.awaiting_input" {
				return e.Data.ResumeToken
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("run %s never awaited input", runID)
	return ""
}

// streamToken reads the run's SSE stream from the start until
// run.awaiting_input and returns its resume token.
func streamToken(t *testing.T, base, runID string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/workflows/runs/"+runID+"/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || !strings.Contains(data, `"run.awaiting_input"`) {
			continue
		}
		var e struct {
			Data struct {
				ResumeToken string `json:"resumeToken"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Fatalf("stream frame %s: %v", data, err)
		}
		return e.Data.ResumeToken
	}
	t.Fatalf("the stream of %s ended without run.awaiting_input: %v", runID, sc.Err())
	return ""
}

// filesHolding returns the files under dir whose bytes hold any of needles.
func filesHolding(t *testing.T, dir string, needles ...string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, n := range needles {
			if bytes.Contains(raw, []byte(n)) {
				out = append(out, fmt.Sprintf("%s holds %q", path, n))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// postgresRowsHolding returns the rows of every table of schema, as text,
// that hold any of needles.
func postgresRowsHolding(t *testing.T, url, schema string, needles ...string) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1`, schema)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	if err := rows.Err(); err != nil || len(tables) == 0 {
		t.Fatalf("tables of %s: %v %v", schema, tables, err)
	}
	var out []string
	for _, table := range tables {
		ident := pgx.Identifier{schema, table}.Sanitize()
		rows, err := conn.Query(ctx, "SELECT t::text FROM "+ident+" t")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var text string
			if err := rows.Scan(&text); err != nil {
				t.Fatal(err)
			}
			for _, n := range needles {
				if strings.Contains(text, n) {
					out = append(out, fmt.Sprintf("%s holds %q", table, n))
				}
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// startAskRun publishes askFlow and starts a run of it.
func startAskRun(t *testing.T, base string) string {
	t.Helper()
	code, wf := postJSON(t, base+"/api/workflows", askFlow)
	if code != http.StatusCreated {
		t.Fatalf("publish: %d %v", code, wf)
	}
	code, run := postJSON(t, base+"/api/workflows/"+wf["workflowId"].(string)+"/runs", `{"input":{}}`)
	if code != http.StatusCreated {
		t.Fatalf("start run: %d %v", code, run)
	}
	return run["runId"].(string)
}

// TestResumeTokenSealed parks a run at a human input on SQLite (and
// PostgreSQL when RUNSTREAM_TEST_POSTGRES_URL is set): the events page
// and the stream deliver the token, the store holds it only sealed (no
// file of the data directory, no row of the schema holds it), the key
// file is 0600, and after a restart the same token is delivered and
// resumes the run.
func TestResumeTokenSealed(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			args := []string{"--data-dir", dir, "--workers", "1"}
			var pgURL, schema string
			if backend == "sqlite" {
				args = append(args, "--store", "sqlite:"+filepath.Join(dir, "runstream.db"))
			} else {
				if pgURL = os.Getenv("RUNSTREAM_TEST_POSTGRES_URL"); pgURL == "" {
					t.Skip("RUNSTREAM_TEST_POSTGRES_URL is not set: skipping the PostgreSQL backend")
				}
				schema = fmt.Sprintf("rs_cmd_seal_%d", time.Now().UnixNano())
				t.Cleanup(func() { dropSchema(t, pgURL, schema) })
				args = append(args, "--store", pgURL, "--postgres-schema", schema)
			}
			first := runServe(t, nil, args...)
			runID := startAskRun(t, first.base)
			token := awaitToken(t, first.base, runID)
			if len(token) < 40 || strings.HasPrefix(token, "sealed:") {
				t.Fatalf("the events page gives the token %q, want the plain token", token)
			}
			if got := streamToken(t, first.base, runID); got != token {
				t.Errorf("the stream gives the token %q, want %q", got, token)
			}
			if err := first.stop(); err != nil {
				t.Fatal(err)
			}
			if found := filesHolding(t, dir, token); len(found) > 0 {
				t.Errorf("the data directory holds the resume token: %v", found)
			}
			if backend == "postgres" {
				if found := postgresRowsHolding(t, pgURL, schema, token); len(found) > 0 {
					t.Errorf("the schema holds the resume token: %v", found)
				}
			}
			info, err := os.Stat(filepath.Join(dir, sealKeyFileName))
			if err != nil {
				t.Fatalf("no seal key file: %v", err)
			}
			if mode := info.Mode().Perm(); mode != 0o600 {
				t.Errorf("seal key file mode %o, want 600", mode)
			}

			second := runServe(t, nil, args...)
			if got := awaitToken(t, second.base, runID); got != token {
				t.Errorf("after a restart the events page gives %q, want %q", got, token)
			}
			code, body := postJSON(t, second.base+"/api/workflows/runs/"+runID+"/resume", `{"resumeToken":"`+token+`","action":"approve"}`)
			if code != http.StatusOK {
				t.Errorf("resume: %d %v", code, body)
			}
		})
	}
}

// TestSealKeyConfiguration: a key from RUNSTREAM_SEAL_KEY or
// --seal-key-file; a malformed key, a missing file or both at once are
// usage errors.
func TestSealKeyConfiguration(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	os.WriteFile(keyFile, []byte("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n"), 0o600)
	base, _, _ := startServe(t, map[string]string{"RUNSTREAM_SEAL_KEY": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}, "--store", "sqlite:"+filepath.Join(dir, "a.db"), "--data-dir", filepath.Join(dir, "a"))
	if code, _, _ := get(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz with RUNSTREAM_SEAL_KEY = %d", code)
	}
	if _, err := os.Stat(filepath.Join(dir, "a", sealKeyFileName)); err == nil {
		t.Errorf("a key file was created although RUNSTREAM_SEAL_KEY is set")
	}
	base, _, _ = startServe(t, nil, "--store", "sqlite:"+filepath.Join(dir, "b.db"), "--data-dir", filepath.Join(dir, "b"), "--seal-key-file", keyFile)
	if code, _, _ := get(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz with --seal-key-file = %d", code)
	}
	for name, tc := range map[string]struct {
		env  map[string]string
		args []string
	}{
		"malformed key": {map[string]string{"RUNSTREAM_SEAL_KEY": "c2hvcnQ="}, nil},
		"missing file":  {nil, []string{"--seal-key-file", filepath.Join(dir, "nope")}},
		"both":          {map[string]string{"RUNSTREAM_SEAL_KEY": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}, []string{"--seal-key-file", keyFile}},
	} {
		m := &Main{Getenv: func(k string) string { return tc.env[k] }}
		args := append([]string{"serve", "--addr", "127.0.0.1:0", "--store", "memory:"}, tc.args...)
		var stderr bytes.Buffer
		err := m.Run(t.Context(), args, io.Discard, &stderr)
		if err == nil || !strings.Contains(err.Error(), "seal") {
			t.Errorf("%s: serve = %v, want a seal key usage error", name, err)
		}
	}
}
