package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runevents"
)

// backend is the opened store of a server: its name, where its data lives,
// its durability mode, and the domain stores it provides.
type backend struct {
	name       string
	location   string
	durability string
	runEvents  runevents.Store
	ready      func(context.Context) error
	close      func() error
}

// openBackend opens the store named by cfg.store.
func openBackend(ctx context.Context, cfg serveConfig) (*backend, error) {
	switch {
	case cfg.store == "memory:":
		s := memory.NewRunEventStore()
		return &backend{
			name:       "memory",
			location:   "process memory (nothing survives a restart)",
			durability: "memory: none",
			runEvents:  s,
			ready:      func(context.Context) error { return nil },
			close:      s.Close,
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
