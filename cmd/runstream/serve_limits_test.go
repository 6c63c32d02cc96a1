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
// --max-node-output-bytes fails with WORKFLOW_NODE_LIMIT_EXCEEDED, and the
// same workflow completes under the default.
func TestServeNodeBoundFlags(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "long.yaml")
	os.WriteFile(file, []byte(`name: long
nodes:
  - id: text
    type: transform
    config: {expression: 'repeat("x", 500)'}
output: text
`), 0o600)
	small, _, _ := startServe(t, nil, "--store", "memory:", "--max-node-output-bytes", "100")
	err, out, _ := runCmd(t, "", file, "--server", small)
	if !errors.Is(err, errRunEnded) || !strings.Contains(out, "WORKFLOW_NODE_LIMIT_EXCEEDED") {
		t.Errorf("with --max-node-output-bytes 100: %v\n%s", err, out)
	}
	base, _, _ := startServe(t, nil, "--store", "memory:")
	if err, out, _ := runCmd(t, "", file, "--server", base); err != nil {
		t.Errorf("with the default bound: %v\n%s", err, out)
	}
	for _, flag := range []string{"--max-event-bytes", "--max-node-output-bytes", "--max-artifact-bytes"} {
		m := &Main{Getenv: func(string) string { return "" }}
		if err := m.Run(t.Context(), []string{"serve", "--store", "memory:", flag, "0"}, io.Discard, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("%s 0: %v, want a usage error", flag, err)
		}
	}
}
