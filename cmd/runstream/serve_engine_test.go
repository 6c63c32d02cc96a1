package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream/auth"
	"github.com/runstream/runstream/workflow"
)

// queuelessStore hides the run queue of a workflow store, so that no
// engine can run on it.
type queuelessStore struct{ workflow.Store }

// TestServeFailsWhenTheEngineCannotStart: serve exits with the engine's
// reason, and never listens, instead of serving runs nothing executes.
func TestServeFailsWhenTheEngineCannotStart(t *testing.T) {
	t.Parallel()
	m := &Main{
		openBackend: func(ctx context.Context, cfg serveConfig, logger *slog.Logger) (*backend, error) {
			b, err := openBackend(ctx, cfg, logger)
			if err != nil {
				return nil, err
			}
			b.workflows = queuelessStore{b.workflows}
			return b, nil
		},
	}
	// Should serve listen all the same, it stops at once and the test fails.
	ctx, cancel := context.WithCancel(t.Context())
	m.onListen = func(string) { t.Error("serve listens without its engine"); cancel() }
	var stdout bytes.Buffer
	err := m.Run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--store", "memory:"}, &stdout, io.Discard)
	cancel()
	if err == nil || exitCode(err) != 1 {
		t.Fatalf("serve = %v, want an error with exit status 1", err)
	}
	for _, want := range []string{"start the workflow engine", "does not implement workflow.Queue"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("serve = %q, want the reason (%q)", err, want)
		}
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout = %q, want nothing", stdout.String())
	}

	// Without an engine (--workers 0) the same store serves: the failure
	// above is the engine's.
	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	listening := make(chan struct{})
	m.onListen = func(string) { close(listening); cancel() }
	if err := m.Run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--store", "memory:", "--workers", "0"}, io.Discard, io.Discard); err != nil {
		t.Fatalf("serve --workers 0 = %v", err)
	}
	select {
	case <-listening:
	default:
		t.Error("serve --workers 0 returned without listening")
	}
}

// TestServeMaxRunsPerUser: --max-runs-per-user, or its variable, sets the
// cap per user of the engine; without either there is no cap (0), whatever
// --workers, so that one user (every caller with --auth none) may use
// every worker; a negative or non-numeric value is a usage error.
func TestServeMaxRunsPerUser(t *testing.T) {
	t.Parallel()
	errOpened := errors.New("opened")
	serve := func(env map[string]string, args ...string) (int, error) {
		got := -1
		m := &Main{
			Getenv: func(k string) string { return env[k] },
			openBackend: func(_ context.Context, cfg serveConfig, _ *slog.Logger) (*backend, error) {
				got = cfg.maxRunsPerUser
				return nil, errOpened
			},
		}
		err := m.Run(t.Context(), append([]string{"serve", "--addr", "127.0.0.1:0", "--store", "memory:"}, args...), io.Discard, io.Discard)
		return got, err
	}
	const env = "RUNSTREAM_MAX_RUNS_PER_USER"
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want int
	}{
		{nil, nil, 0},
		{nil, []string{"--workers", "8"}, 0},
		{nil, []string{"--workers", "1"}, 0},
		{nil, []string{"--max-runs-per-user", "0"}, 0},
		{nil, []string{"--max-runs-per-user", "3"}, 3},
		{nil, []string{"--workers", "2", "--max-runs-per-user", "10"}, 10},
		{map[string]string{env: "2"}, nil, 2},
		{map[string]string{env: "2"}, []string{"--max-runs-per-user", "5"}, 5},
	} {
		got, err := serve(tc.env, tc.args...)
		if !errors.Is(err, errOpened) || got != tc.want {
			t.Errorf("serve %v with %v: cap %d, %v; want %d", tc.args, tc.env, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		env  map[string]string
		args []string
	}{
		{nil, []string{"--max-runs-per-user", "-1"}},
		{nil, []string{"--max-runs-per-user", "many"}},
		{map[string]string{env: "-3"}, nil},
	} {
		if _, err := serve(tc.env, tc.args...); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "max-runs-per-user") {
			t.Errorf("serve %v with %v = %v, want a usage error naming the flag", tc.args, tc.env, err)
		}
	}
}

// TestServeSharesWorkersAmongUsers, as users reach it over HTTP: serve
// with three workers and --max-runs-per-user 1; alice starts three long
// runs, then bob one. Alice executes one run at a time, her two others
// queued though a worker is idle, and bob's run takes a worker. Without
// the cap, alice's runs take every worker as she starts them, and bob's
// waits (the order among waiting runs is the conformance tests' and
// TestMaxRunsPerOwner's).
func TestServeSharesWorkersAmongUsers(t *testing.T) {
	t.Parallel()
	keys := map[string]string{"alice": auth.NewKey(), "bob": auth.NewKey()}
	var file strings.Builder
	for user, key := range keys {
		hash, _ := auth.HashKey(key)
		file.WriteString(user + " " + hash + "\n")
	}
	keysFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keysFile, []byte(file.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	base, _, stderr := startServe(t, nil, "--store", "memory:", "--auth", "token", "--api-keys-file", keysFile,
		"--workers", "3", "--max-runs-per-user", "1")
	startRuns := func(user string, n int) []string {
		code, body, _ := call(t, "POST", base+"/api/workflows", keys[user], `{"name":"wait","nodes":[{"id":"w","type":"delay","config":{"ms":3000}}]}`)
		var wf struct{ WorkflowID string }
		if err := json.Unmarshal(body, &wf); code != http.StatusCreated || err != nil {
			t.Fatalf("publish as %s: %d %s", user, code, body)
		}
		var ids []string
		for range n {
			code, body, _ := call(t, "POST", base+"/api/workflows/"+wf.WorkflowID+"/runs", keys[user], `{"input":{}}`)
			var run struct{ RunID string }
			if err := json.Unmarshal(body, &run); code != http.StatusCreated || err != nil {
				t.Fatalf("start a run as %s: %d %s", user, code, body)
			}
			ids = append(ids, run.RunID)
		}
		return ids
	}
	statuses := func(user string, ids []string) map[workflow.RunStatus]int {
		out := map[workflow.RunStatus]int{}
		for _, id := range ids {
			code, body, _ := call(t, "GET", base+"/api/workflows/runs/"+id, keys[user], "")
			var run struct{ Status workflow.RunStatus }
			if err := json.Unmarshal(body, &run); code != http.StatusOK || err != nil {
				t.Fatalf("get run %s as %s: %d %s", id, user, code, body)
			}
			out[run.Status]++
		}
		return out
	}
	alice := startRuns("alice", 3)
	bob := startRuns("bob", 1)
	var a, b map[workflow.RunStatus]int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		a, b = statuses("alice", alice), statuses("bob", bob)
		if a[workflow.StatusRunning] > 1 {
			t.Fatalf("alice executes %d runs at once, over --max-runs-per-user 1", a[workflow.StatusRunning])
		}
		if b[workflow.StatusRunning] == 1 {
			break
		}
	}
	if b[workflow.StatusRunning] != 1 || a[workflow.StatusRunning] != 1 || a[workflow.StatusQueued] != 2 {
		t.Fatalf("alice's runs %v and bob's %v; want bob's running while alice executes one and two wait\nstderr:\n%s", a, b, stderr)
	}
}
