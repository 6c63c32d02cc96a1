package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

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
