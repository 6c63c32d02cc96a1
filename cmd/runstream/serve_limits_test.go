package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serve's node bounds are flags: a node whose output passes
// --max-node-output-bytes, or the run's outputs --max-run-output-bytes,
// fails with WORKFLOW_NODE_LIMIT_EXCEEDED, and the same workflow completes
// under the defaults.
func TestServeNodeBoundFlags(t *testing.T) {
	t.Parallel()
	// Two nodes of about 500 bytes of output each.
	file := filepath.Join(t.TempDir(), "two.yaml")
	os.WriteFile(file, []byte(`name: two
nodes:
  - id: a
    type: transform
    config: {expression: 'repeat("x", 500)'}
  - id: b
    type: transform
    needs: [a]
    config: {expression: 'repeat("y", 500)'}
output: b
`), 0o600)
	small, _, _ := startServe(t, nil, "--store", "memory:", "--max-node-output-bytes", "100")
	err, out, _ := runCmd(t, "", file, "--server", small)
	if !errors.Is(err, errRunEnded) || !strings.Contains(out, "WORKFLOW_NODE_LIMIT_EXCEEDED") {
		t.Errorf("with --max-node-output-bytes 100: %v\n%s", err, out)
	}
	// The second node passes a run bound of 700 bytes.
	tight, _, _ := startServe(t, nil, "--store", "memory:", "--max-node-output-bytes", "600", "--max-run-output-bytes", "700")
	err, out, _ = runCmd(t, "", file, "--server", tight)
	if !errors.Is(err, errRunEnded) || !strings.Contains(out, "WORKFLOW_NODE_LIMIT_EXCEEDED") || !strings.Contains(out, "the run's nodes may return") {
		t.Errorf("with --max-run-output-bytes 700: %v\n%s", err, out)
	}
	base, _, _ := startServe(t, nil, "--store", "memory:")
	if err, out, _ := runCmd(t, "", file, "--server", base); err != nil {
		t.Errorf("with the default bounds: %v\n%s", err, out)
	}
	m := &Main{Getenv: func(string) string { return "" }}
	if err := m.Run(t.Context(), []string{"serve", "--store", "memory:", "--max-run-output-bytes", "1000", "--max-node-output-bytes", "2000"}, io.Discard, io.Discard); !errors.Is(err, errUsage) {
		t.Errorf("--max-run-output-bytes below --max-node-output-bytes: %v, want a usage error", err)
	}
	for _, flag := range []string{"--max-event-bytes", "--max-node-output-bytes", "--max-run-output-bytes", "--max-artifact-bytes"} {
		m := &Main{Getenv: func(string) string { return "" }}
		if err := m.Run(t.Context(), []string{"serve", "--store", "memory:", flag, "0"}, io.Discard, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("%s 0: %v, want a usage error", flag, err)
		}
	}
}
