// Package servertest serves the whole HTTP API for tests: the workflow
// service over a memory store, with the engines that execute its runs, on
// a local listener, and follows a run's SSE stream as a browser would.
package servertest

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/httpapi"
	"github.com/runstream/runstream/internal/apitest"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/streams"
	"github.com/runstream/runstream/workflowsvc"
)

// Server is the public HTTP API over a memory store, with the engines that
// execute its runs, started and killed as the instances of a deployment
// would be. Tests talk to it over HTTP at URL. Everything stops when the
// test ends.
type Server struct {
	URL   string
	Store *memory.WorkflowStore
	Log   *eventlog.WorkflowLog

	cfg     ServerConfig
	mu      sync.Mutex
	engines []*engine.Engine
}

// ServerConfig is what a Server's API and engines share.
type ServerConfig struct {
	// Registry compiles the definitions and runs their nodes. Nil:
	// engine.DefaultRegistry().
	Registry *engine.Registry
	// Artifacts holds the bytes of run artifacts. Nil: none; the artifact
	// endpoint answers UNAVAILABLE.
	Artifacts engine.ArtifactBlobs
	// Authenticate names the user a request acts for. Nil: the local user.
	Authenticate func(r *http.Request) (string, error)
}

// NewServer serves the API over a new memory store, with a live hub that
// polls it and the event log that validates every event against the
// contract. It starts no engine: runs stay queued until StartEngine.
func NewServer(t testing.TB, cfg ServerConfig) *Server {
	t.Helper()
	validator, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Store: memory.NewWorkflowStore(), cfg: cfg}
	hub := live.New(live.Config{Poll: streams.Poller(s.Store), PollInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	go hub.Run(ctx)
	s.Log = eventlog.NewWorkflowLog(s.Store, validator, hub, nil)
	workflows := workflowsvc.New(s.Store, s.Log, hub, workflowsvc.Config{
		Definitions: cfg.Registry, Artifacts: cfg.Artifacts, Notify: s.notify,
	})
	api := httpapi.New(httpapi.Config{Authenticate: cfg.Authenticate}, workflows, nil)
	t.Cleanup(func() {
		cancel()
		s.Store.Close()
	})
	s.URL = apitest.Serve(t, api, api).URL
	return s
}

// notify tells every engine started so far that a request changed runID.
func (s *Server) notify(ctx context.Context, runID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.engines {
		e.NotifyContext(ctx, runID)
	}
}

// StartEngine starts an instance's engine over the server's store; edit,
// when not nil, changes its config. Cancelling ctx kills it (see
// engine.Engine.Start); it is stopped when the test ends.
func (s *Server) StartEngine(t testing.TB, ctx context.Context, edit func(*engine.Config)) *engine.Engine {
	t.Helper()
	cfg := engine.Config{
		Store: s.Store, Log: s.Log, Registry: s.cfg.Registry, Artifacts: s.cfg.Artifacts,
		PollInterval: 25 * time.Millisecond, LeaseDuration: 3 * time.Second,
	}
	if edit != nil {
		edit(&cfg)
	}
	eng, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.engines = append(s.engines, eng)
	s.mu.Unlock()
	t.Cleanup(func() { eng.Stop(context.Background()) })
	return eng
}
