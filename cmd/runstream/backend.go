package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/workflow"
)

// backend is the opened store of a server: its name, where its data lives,
// its durability mode, and the domain stores it provides.
type backend struct {
	name       string
	location   string
	durability string
	runEvents  runevents.Store
	workflows  workflow.Store
	ready      func(context.Context) error
	// listen, when not nil, delivers other instances' appends (PostgreSQL
	// LISTEN) until ctx is done.
	listen func(ctx context.Context, wake func(runID string))
	close  func() error
}

// openBackend opens the store named by cfg.store.
func openBackend(ctx context.Context, cfg serveConfig, logger *slog.Logger) (*backend, error) {
	switch {
	case cfg.store == "memory:":
		events, workflows := memory.NewRunEventStore(), memory.NewWorkflowStore()
		return &backend{
			name:       "memory",
			location:   "process memory (nothing survives a restart)",
			durability: "memory: none",
			runEvents:  events,
			workflows:  workflows,
			ready:      func(context.Context) error { return nil },
			close:      func() error { return errors.Join(events.Close(), workflows.Close()) },
		}, nil
	default:
		return nil, fmt.Errorf("%w: --store %q: want sqlite:PATH, postgres://… or memory:", errUsage, redactURL(cfg.store))
	}
}

// redactURL hides the password of a store URL in messages.
func redactURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return s
	}
	user, _, _ := strings.Cut(rest[:at], ":")
	return scheme + "://" + user + ":xxxxx@" + rest[at+1:]
}
