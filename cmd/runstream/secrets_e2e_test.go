package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream/redact/redacttest"
	"github.com/runstream/runstream/workflow"
)

// TestNoSecretKeptOrShown plants every synthetic secret of the redaction
// corpus in each place a caller can put one, through the HTTP API of a
// real server: thread events, run rows, feedback, a workflow run's input,
// a node output (an http node reading a local server that answers them,
// stored as a text artifact too), the request path and query, and the
// members of bad requests. Then no store file (the SQLite file and its
// WAL, the JSONL run-event files, the artifact files), no PostgreSQL row,
// no page, no SSE stream, no log line, no error body and no /metrics
// holds any part of any of them.
func TestNoSecretKeptOrShown(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "jsonl", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			testNoSecretKeptOrShown(t, backend)
		})
	}
}

func testNoSecretKeptOrShown(t *testing.T, backend string) {
	dir := t.TempDir()
	args := []string{"--data-dir", dir, "--workers", "2", "--http-node-allow", "127.0.0.0/8", "--log-level", "DEBUG"}
	var pgURL, schema string
	switch backend {
	case "sqlite":
		args = append(args, "--store", "sqlite:"+filepath.Join(dir, "runstream.db"))
	case "jsonl":
		args = append(args, "--store", "sqlite:"+filepath.Join(dir, "runstream.db"), "--run-events", "jsonl:"+filepath.Join(dir, "events"))
	case "postgres":
		if pgURL = os.Getenv("RUNSTREAM_TEST_POSTGRES_URL"); pgURL == "" {
			t.Skip("RUNSTREAM_TEST_POSTGRES_URL is not set: skipping the PostgreSQL backend")
		}
		schema = fmt.Sprintf("rs_cmd_secrets_%d", time.Now().UnixNano())
		t.Cleanup(func() { dropSchema(t, pgURL, schema) })
		args = append(args, "--store", pgURL, "--postgres-schema", schema)
	}
	secrets := redacttest.Secrets(rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 13)))
	var texts, oneLine []string
	for _, s := range secrets {
		texts = append(texts, s.Text)
		if !strings.Contains(s.Text, "\n") {
			oneLine = append(oneLine, s.Text)
		}
	}
	var needles []string
	for _, s := range secrets {
		for _, p := range s.Parts {
			needles = append(needles, p)
			if quoted, _ := json.Marshal(p); string(quoted[1:len(quoted)-1]) != p {
				needles = append(needles, string(quoted[1:len(quoted)-1])) // as JSON text holds it
			}
		}
	}
	leaks := func(what, text string) {
		t.Helper()
		for _, n := range needles {
			if at := strings.Index(text, n); at >= 0 {
				t.Errorf("%s holds the secret part %q: …%s…", what, n, text[max(at-150, 0):min(at+len(n)+50, len(text))])
				return
			}
		}
	}
	textsJSON, _ := json.Marshal(texts)

	// The local server an http node reads: it answers every secret.
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"secrets":%s,"note":%q}`, textsJSON, strings.Join(texts, "\n"))
	}))
	defer remote.Close()

	srv := runServe(t, nil, args...)
	base := srv.base
	var shown strings.Builder // every response body
	call := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		shown.WriteString(string(raw))
		shown.WriteByte('\n')
		return resp.StatusCode, string(raw)
	}
	want := func(status int) func(int, string) string {
		return func(code int, body string) string {
			t.Helper()
			if code != status {
				t.Fatalf("status %d, want %d: %s", code, status, body)
			}
			return body
		}
	}

	// Thread events, each secret a string of its own, in content and
	// metadata.
	events, _ := json.Marshal(map[string]any{"events": []any{map[string]any{
		"event_type": "run.start",
		"content":    map[string]any{"chain": nil, "notes": texts, "prose": "the config:\n" + strings.Join(texts, "\n")},
		"metadata":   map[string]any{"caller": "lead_agent", "notes": texts},
	}}})
	want(http.StatusCreated)(call("POST", "/api/threads/t1/runs/r1/events", string(events)))

	// Run rows and feedback.
	meta, _ := json.Marshal(map[string]any{"notes": texts, "api_key": texts[0]})
	for i, text := range oneLine {
		label := text
		if len(label) > 128 {
			label = "model"
		}
		run := fmt.Sprintf("rr%d", i)
		body, _ := json.Marshal(map[string]any{"status": "success", "model_name": label, "metadata": json.RawMessage(meta)})
		want(http.StatusOK)(call("PUT", "/api/threads/t1/runs/"+run, string(body)))
		fb, _ := json.Marshal(map[string]any{"rating": 1, "comment": text})
		want(http.StatusOK)(call("PUT", "/api/threads/t1/runs/"+run+"/feedback", string(fb)))
	}

	// A workflow whose http node reads the secrets (its output a text
	// artifact too), run with the secrets as input.
	def := `{"definition":{"name":"leaky","nodes":[
		{"id":"call","type":"http","config":{"url":"` + remote.URL + `/"},"artifact":{"name":"answer.txt","mimeType":"text/plain"}},
		{"id":"text","type":"transform","needs":["call"],"config":{"expression":"nodes.call.output.body.note"},"artifact":{"name":"note.txt","mimeType":"text/plain"}}],
		"output":"call"}}`
	var wf struct {
		WorkflowID string `json:"workflowId"`
	}
	json.Unmarshal([]byte(want(http.StatusCreated)(call("POST", "/api/workflows", def))), &wf)
	input, _ := json.Marshal(map[string]any{"input": map[string]any{"notes": texts, "password": "hunter2hunter2"}})
	var run struct {
		RunID string `json:"runId"`
	}
	json.Unmarshal([]byte(want(http.StatusCreated)(call("POST", "/api/workflows/"+wf.WorkflowID+"/runs", string(input)))), &run)
	stream := readRunStream(t, base, run.RunID)
	if !strings.Contains(stream, "run.completed") {
		t.Fatalf("the run did not complete:\n%s", stream)
	}
	leaks("the run's SSE stream", stream)
	runBody := want(http.StatusOK)(call("GET", "/api/workflows/runs/"+run.RunID, ""))
	want(http.StatusOK)(call("GET", "/api/workflows/runs/"+run.RunID+"/events", ""))
	var artifacts struct {
		Events []struct {
			Event string `json:"event"`
			Data  struct {
				ArtifactID string `json:"artifactId"`
			} `json:"data"`
		} `json:"events"`
	}
	json.Unmarshal([]byte(want(http.StatusOK)(call("GET", "/api/workflows/runs/"+run.RunID+"/events", ""))), &artifacts)
	found := 0
	for _, e := range artifacts.Events {
		if e.Event == "artifact.created" {
			want(http.StatusOK)(call("GET", "/api/workflows/runs/"+run.RunID+"/artifacts/"+e.Data.ArtifactID, ""))
			found++
		}
	}
	if found != 2 {
		t.Errorf("%d artifacts, want 2 (run %s)", found, runBody)
	}

	// The path and the query, and members of bad requests.
	for _, text := range oneLine {
		call("GET", "/api/threads/t1/runs/"+url.PathEscape(text)+"/messages?q="+url.QueryEscape(text)+"&x="+url.QueryEscape("token="+text), "")
		call("GET", "/api/"+url.PathEscape(text), "")
		bad, _ := json.Marshal(map[string]any{"status": "running", text: 1})
		call("PUT", "/api/threads/t1/runs/bad", string(bad))
		bad, _ = json.Marshal(map[string]any{"events": []any{map[string]any{"event_type": text}}})
		call("POST", "/api/threads/t1/runs/r2/events", string(bad))
		call("POST", "/api/threads/t1/runs/r2/events", `{"events":[],"`+strings.ReplaceAll(text, `"`, ``)+`":1,"`+strings.ReplaceAll(text, `"`, ``)+`":2}`)
	}

	// Pages and streams of the thread.
	want(http.StatusOK)(call("GET", "/api/threads/t1/runs/r1/events", ""))
	want(http.StatusOK)(call("GET", "/api/threads/t1/runs", ""))
	want(http.StatusOK)(call("GET", "/api/threads/t1/messages", ""))
	want(http.StatusOK)(call("GET", "/api/runs/rr0/feedback", ""))
	leaks("the thread's SSE stream", readFor(t, base+"/api/threads/t1/stream", 2*time.Second))
	leaks("/metrics", want(http.StatusOK)(call("GET", "/metrics", "")))
	leaks("the responses", shown.String())
	if strings.Contains(shown.String(), "hunter2hunter2") {
		t.Errorf("a response holds the input's password")
	}

	if err := srv.stop(); err != nil {
		t.Fatal(err)
	}
	leaks("the log", srv.stderr.String())
	if !strings.Contains(srv.stderr.String(), `"msg":"request"`) {
		t.Errorf("no access log lines:\n%s", srv.stderr)
	}
	for _, f := range filesHolding(t, dir, needles...) {
		t.Errorf("store file: %s", f)
	}
	if backend == "postgres" {
		for _, r := range postgresRowsHolding(t, pgURL, schema, needles...) {
			t.Errorf("PostgreSQL: %s", r)
		}
	}
}

// readRunStream reads a workflow run's SSE stream from the start to its
// end (a terminal event), at most 30 s.
func readRunStream(t *testing.T, base, runID string) string {
	t.Helper()
	return readFor(t, base+"/api/workflows/runs/"+runID+"/stream", 30*time.Second)
}

// readFor returns what a GET of url sends within d (or until it ends).
func readFor(t *testing.T, url string, d time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, raw)
	}
	return string(raw)
}

// TestStreamedSecretOverSSE: a model that streams a credential token by
// token, a token per delta window, shows none of it to a follower of the
// run's SSE stream, whose deltas still join to the text, redacted.
func TestStreamedSecretOverSSE(t *testing.T) {
	t.Parallel()
	const token = "q8Zt3LmN0pXv7Rk2Yb5WcJ4hQ9"
	const key = "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34Op56"
	dir := t.TempDir()
	srv := runServe(t, nil, "--store", "sqlite:"+filepath.Join(dir, "runstream.db"), "--data-dir", filepath.Join(dir, "data"))
	// The scripted model's tokens: no string of the definition holds a
	// whole credential (publishing one is refused), as a model's output
	// arrives in pieces.
	def := `{"definition":{"name":"talk","nodes":[{"id":"say","type":"llm",
		"config":{"provider":"scripted","tokens":["use ","Authorization: ","Bearer ","` + token[:13] + `","` + token[13:] + ` ","and ","the ","key ","` +
		key[:14] + `","` + key[14:] + ` ","now"],"tokensPerSecond":20}}],
		"output":"say"}}`
	post := func(path, body string) map[string]any {
		resp, err := http.Post(srv.base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST %s: %d %v %v", path, resp.StatusCode, out, err)
		}
		return out
	}
	wf := post("/api/workflows", def)
	run := post("/api/workflows/"+wf["workflowId"].(string)+"/runs", `{}`)
	stream := readRunStream(t, srv.base, run["runId"].(string))
	var joined strings.Builder
	deltas := 0
	for _, line := range strings.Split(stream, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || !strings.Contains(data, `"event":"node.output.delta"`) {
			continue
		}
		deltas++
		if strings.Contains(data, token[:8]) || strings.Contains(data, key[:12]) || strings.Contains(data, key[12:24]) {
			t.Errorf("a delta on the stream holds part of a secret: %s", data)
		}
		var env struct{ Data workflow.OutputDelta }
		json.Unmarshal([]byte(data), &env)
		joined.WriteString(env.Data.Delta)
	}
	if deltas < 4 || joined.String() != "use Authorization: Bearer [REDACTED:bearer] and the key [REDACTED:openai_key] now" {
		t.Errorf("%d deltas on the stream join to %q", deltas, joined.String())
	}
}
