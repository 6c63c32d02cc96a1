package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runstream/runstream/postgres"
)

// syncBuffer is a bytes.Buffer safe for the server goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startServe runs "runstream serve" with args until the test ends and
// returns the base URL and the outputs.
func startServe(t *testing.T, env map[string]string, args ...string) (string, *syncBuffer, *syncBuffer) {
	t.Helper()
	p := runServe(t, env, args...)
	return p.base, p.stdout, p.stderr
}

// serveRun is "runstream serve" running in the test's process.
type serveRun struct {
	base           string
	stdout, stderr *syncBuffer
	// stop asks serve to shut down, as SIGTERM does, and returns what it
	// returned; the test's end calls it too.
	stop func() error
}

// runServe runs "runstream serve" with args until stop or the test's end.
func runServe(t *testing.T, env map[string]string, args ...string) *serveRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	m := &Main{Getenv: func(k string) string { return env[k] }, onListen: func(a string) { addr <- a }}
	p := &serveRun{stdout: &syncBuffer{}, stderr: &syncBuffer{}}
	done := make(chan error, 1)
	go func() {
		done <- m.Run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), p.stdout, p.stderr)
	}()
	p.stop = sync.OnceValue(func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return errors.New("serve did not shut down within 30 s")
		}
	})
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Errorf("serve: %v\nstderr:\n%s", err, p.stderr)
		}
	})
	select {
	case a := <-addr:
		p.base = "http://" + a
		return p
	case err := <-done:
		t.Fatalf("serve exited early: %v\nstderr:\n%s", err, p.stderr)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start listening")
	}
	return nil
}

// waitLog waits up to within for serve's log to hold want, and fails the
// test with the log if it does not. A line logged after the effect a test
// observes (a reload logs once it applied) is read this way, not at once.
func (p *serveRun) waitLog(t *testing.T, want string, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); !strings.Contains(p.stderr.String(), want); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("serve's log lacks %q after %v:\n%s", want, within, p.stderr)
		}
	}
}

func get(t *testing.T, url string) (int, string, http.Header) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body), resp.Header
}

func TestServeMemory(t *testing.T) {
	t.Parallel()
	base, stdout, stderr := startServe(t, nil, "--store", "memory:")
	if !strings.Contains(stdout.String(), "listening on "+base) {
		t.Errorf("stdout does not print the URL %s:\n%s", base, stdout)
	}
	if code, body, _ := get(t, base+"/healthz"); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Errorf("/healthz = %d %s", code, body)
	}
	code, body, header := get(t, base+"/api/contracts/workflow_events.v1.json")
	if code != 200 || header.Get("Content-Type") != "application/json" {
		t.Fatalf("contract = %d %s", code, header.Get("Content-Type"))
	}
	var contract struct {
		SchemaVersion string `json:"schemaVersion"`
		Events        []any  `json:"events"`
	}
	if err := json.Unmarshal([]byte(body), &contract); err != nil || contract.SchemaVersion != "1.0" || len(contract.Events) != 18 {
		t.Errorf("contract body: %v, schemaVersion %q, %d events", err, contract.SchemaVersion, len(contract.Events))
	}
	if code, body, _ := get(t, base+"/readyz"); code != 200 || !strings.Contains(body, `"store":"memory"`) {
		t.Errorf("/readyz = %d %s", code, body)
	}
	// Access logs are JSON lines with the request id.
	var sawAccess bool
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if rec["msg"] == "request" && rec["path"] == "/healthz" && rec["request_id"] != "" {
			sawAccess = true
		}
	}
	if !sawAccess {
		t.Errorf("no access log line for /healthz:\n%s", stderr)
	}
}

func TestEnvironmentConfiguresFlags(t *testing.T) {
	t.Parallel()
	base, _, _ := startServe(t, map[string]string{"RUNSTREAM_STORE": "memory:", "RUNSTREAM_LOG_FORMAT": "text"})
	if code, _, _ := get(t, base+"/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no command", nil, nil, "no command"},
		{"unknown command", nil, []string{"frobnicate"}, "unknown command"},
		{"unknown flag", nil, []string{"serve", "--nope"}, "flag provided but not defined"},
		{"bad store", nil, []string{"serve", "--store", "mysql://root:pw@x/db"}, "want sqlite:PATH"},
		{"bad env value", map[string]string{"RUNSTREAM_MAX_BODY_BYTES": "lots"}, []string{"serve"}, "RUNSTREAM_MAX_BODY_BYTES"},
		{"bad log format", nil, []string{"serve", "--log-format", "xml"}, "--log-format"},
		{"zero streams per user", nil, []string{"serve", "--max-streams-per-user", "0"}, "--max-streams-per-user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Main{Getenv: func(k string) string { return tc.env[k] }}
			var stderr bytes.Buffer
			err := m.Run(t.Context(), tc.args, io.Discard, &stderr)
			if !errors.Is(err, errUsage) || exitCode(err) != 2 {
				t.Fatalf("err = %v, want a usage error", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %q, want it to mention %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "root:pw") {
				t.Errorf("the error shows the store password: %v", err)
			}
		})
	}
}

func TestHelpNamesEnvironmentVariables(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	if err := (&Main{}).Run(t.Context(), []string{"serve", "--help"}, io.Discard, &stderr); err != nil {
		t.Fatalf("serve --help: %v", err)
	}
	for _, want := range []string{"--addr", "RUNSTREAM_ADDR", "RUNSTREAM_STORE", "RUNSTREAM_SQLITE_SYNCHRONOUS", "RUNSTREAM_RUN_EVENTS", "jsonl:DIR", "127.0.0.1:8780", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, stderr.String())
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	var stdout bytes.Buffer
	if err := (&Main{}).Run(t.Context(), []string{"version"}, &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stdout.String(), "runstream ") || !strings.Contains(stdout.String(), "go1.") {
		t.Errorf("version = %q", stdout.String())
	}
}

func TestServeSQLiteDefaultLayout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := dir + "/runstream-data/runstream.db"
	base, stdout, _ := startServe(t, nil, "--store", "sqlite:"+path)
	if !strings.Contains(stdout.String(), path) {
		t.Errorf("stdout does not say where the data lives (%s):\n%s", path, stdout)
	}
	code, body, _ := get(t, base+"/readyz")
	if code != 200 || !strings.Contains(body, `"store":"sqlite"`) || !strings.Contains(body, "FULL") {
		t.Errorf("/readyz = %d %s", code, body)
	}
}

func TestServePostgres(t *testing.T) {
	t.Parallel()
	url := os.Getenv("RUNSTREAM_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("RUNSTREAM_TEST_POSTGRES_URL is not set: skipping the PostgreSQL serve test")
	}
	schema := fmt.Sprintf("rs_cmd_test_%d", time.Now().UnixNano())
	t.Cleanup(func() { dropSchema(t, url, schema) })
	base, stdout, _ := startServe(t, nil, "--store", url, "--postgres-schema", schema)
	if !strings.Contains(stdout.String(), "listening on") {
		t.Errorf("stdout:\n%s", stdout)
	}
	code, body, _ := get(t, base+"/readyz")
	if code != 200 || !strings.Contains(body, `"store":"postgres"`) || !strings.Contains(body, "synchronous_commit") {
		t.Errorf("/readyz = %d %s", code, body)
	}
}

// dropSchema removes a test schema.
func dropSchema(t *testing.T, url, schema string) {
	if err := postgres.DropSchema(context.Background(), url, schema); err != nil {
		t.Errorf("drop schema: %v", err)
	}
}
