package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/httpapi"
	"github.com/runstream/runstream/live"
)

// app is a running server's parts: the store, the live hub with its poll
// loop, the event log and the HTTP API.
type app struct {
	backend *backend
	hub     *live.Hub
	log     *eventlog.WorkflowLog
	api     *httpapi.Server
	stop    context.CancelFunc
}

// newApp opens the store and starts the hub's poll loop. Close it with
// app.close.
func newApp(ctx context.Context, cfg serveConfig, logger *slog.Logger) (*app, error) {
	backend, err := openBackend(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	validator, err := contracts.NewValidator()
	if err != nil {
		backend.close()
		return nil, fmt.Errorf("load contracts: %w", err)
	}
	hub := live.New(live.Config{Poll: eventlog.Poller(backend.workflows), Logger: logger})
	loopCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	go hub.Run(loopCtx)
	if backend.listen != nil {
		go backend.listen(loopCtx, func(runID string) { hub.Wake(eventlog.WorkflowStreamKey(runID)) })
	}
	a := &app{backend: backend, hub: hub, stop: stop}
	a.log = eventlog.NewWorkflowLog(backend.workflows, validator, hub, nil)
	a.api = httpapi.New(httpapi.Config{
		Logger:        logger,
		Contracts:     contracts.FS(),
		ContractNames: contracts.Names(),
		Ready:         backend.ready,
		Durability:    backend.durability,
		Store:         backend.name,
		MaxBodyBytes:  cfg.maxBodyBytes,
		Version:       version,
		Workflows:     backend.workflows,
		Hub:           hub,
	})
	return a, nil
}

// close stops the background loops and closes the store.
func (a *app) close() error {
	a.stop()
	return a.backend.close()
}
