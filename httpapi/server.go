package httpapi

import (
	"context"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/workflow"
	"golang.org/x/sync/singleflight"
)

// Defaults of Config.
const (
	DefaultMaxBodyBytes = 8 << 20
)

// Config configures a Server.
type Config struct {
	// Logger receives access logs and errors. Defaults to a discarding
	// logger.
	Logger *slog.Logger
	// Registry collects the server's metrics and is served at /metrics.
	// Defaults to a new registry with the Go and process collectors.
	Registry *prometheus.Registry
	// Contracts holds the contract files served at /api/contracts/{name}.
	// Required.
	Contracts fs.FS
	// ContractNames lists the files of Contracts that are served. Required.
	ContractNames []string
	// Ready reports whether the server can serve requests (the store is
	// reachable). Defaults to always ready.
	Ready func(ctx context.Context) error
	// Durability describes the store's durability mode for /readyz.
	Durability string
	// Store names the store backend for /readyz (sqlite, postgres, memory).
	Store string
	// MaxBodyBytes limits every request body. Defaults to DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Version is reported by /healthz.
	Version string
	// Authenticate returns the user a request acts for, or an error
	// (CodeUnauthenticated) to refuse it. Defaults to LocalUser for every
	// request: the "none" mode of one local user.
	Authenticate func(r *http.Request) (string, error)
	// Workflows stores workflow runs and their events. Required.
	Workflows workflow.Store
	// Hub fans committed events out to followers. Required.
	Hub *live.Hub
	// Stream bounds the SSE streams.
	Stream StreamConfig
	// Log writes the events of the workflow endpoints that create, cancel
	// and resume runs; without it they answer UNAVAILABLE.
	Log *eventlog.WorkflowLog
	// Definitions compiles the definitions published and checks run
	// inputs. Defaults to engine.DefaultRegistry().
	Definitions *engine.Registry
	// Notify, when set, is told of each run a request queued, resumed or
	// asked to cancel (engine.Engine.Notify), so that an engine of this
	// process reacts before its next poll.
	Notify func(runID string)
	// Artifacts holds the bytes of run artifacts, the same blobs the
	// engine writes; nil: the artifact endpoint answers UNAVAILABLE.
	Artifacts engine.ArtifactBlobs

	// RunEvents stores thread run events. Nil: the thread endpoints answer
	// UNAVAILABLE.
	RunEvents runevents.Store
	// Threads reads a thread's rows of every category (thread stream,
	// existence checks). Defaults to RunEvents when it implements
	// runevents.ThreadReader.
	Threads runevents.ThreadReader
	// Runs stores thread run rows and feedback. Nil: the thread endpoints
	// answer UNAVAILABLE.
	Runs runevents.RunStore
	// Idempotency is not used any more: requests with an Idempotency-Key
	// store their key with their events, through ThreadLog's store
	// (runevents.IdempotentAppender), in one transaction.
	//
	// Deprecated: kept so that callers compile while httpapi is
	// refactored; to be removed.
	Idempotency runevents.IdempotencyStore
	// ThreadLog is the append choke point of thread events, over
	// RunEvents. Nil: ingest answers UNAVAILABLE.
	ThreadLog *eventlog.ThreadLog
}

// Server is the HTTP API. Create it with New; it is safe for concurrent use.
type Server struct {
	cfg     Config
	logger  *slog.Logger
	mux     *http.ServeMux
	metrics *metrics
	handler http.Handler
	streams *streamSet
	// perUser counts each user's open streams (StreamConfig.MaxPerUser).
	perUser *userStreams
	// runReads shares the run reads of simultaneous stream requests.
	runReads singleflight.Group
	// registered lists the routes in the order routes() registered them;
	// the OpenAPI test compares them with openapi.json.
	registered []registeredRoute
}

// registeredRoute is one pattern registered on the mux.
type registeredRoute struct {
	pattern string
	// auth is set for routes that act for an authenticated caller.
	auth bool
}

// New returns a Server with every route registered.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
		cfg.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Authenticate == nil {
		cfg.Authenticate = func(*http.Request) (string, error) { return LocalUser, nil }
	}
	cfg.Stream.setDefaults()
	if cfg.Definitions == nil {
		cfg.Definitions = engine.DefaultRegistry()
	}
	if cfg.Ready == nil {
		cfg.Ready = func(context.Context) error { return nil }
	}
	s := &Server{cfg: cfg, logger: cfg.Logger, mux: http.NewServeMux(), metrics: newMetrics(cfg.Registry), streams: newStreamSet(),
		perUser: &userStreams{max: cfg.Stream.MaxPerUser, open: make(map[string]int)}}
	s.routes()
	s.handler = s.instrument(http.HandlerFunc(s.route))
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// routes registers every endpoint.
func (s *Server) routes() {
	s.handle("GET /healthz", s.healthz)
	s.handle("GET /readyz", s.readyz)
	s.register("GET /metrics", promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{}), false)
	s.handle("GET /api/contracts", s.listContracts)
	s.handle("GET /api/contracts/{name}", s.getContract)
	s.handle("GET /api/openapi.json", s.getOpenAPI)

	s.handleAPI("POST /api/workflows", s.createWorkflow)
	s.handleAPI("GET /api/workflows", s.listWorkflows)
	s.handleAPI("GET /api/workflows/{workflow_id}", s.getWorkflow)
	s.handleAPI("POST /api/workflows/{workflow_id}/versions", s.addWorkflowVersion)
	s.handleAPI("POST /api/workflows/{workflow_id}/runs", s.createWorkflowRun)
	s.handleAPI("GET /api/workflows/runs", s.listWorkflowRuns)
	s.handleAPI("POST /api/workflows/runs/{run_id}/cancel", s.cancelWorkflowRun)
	s.handleAPI("POST /api/workflows/runs/{run_id}/resume", s.resumeWorkflowRun)
	s.handleAPI("GET /api/workflows/runs/{run_id}", s.getWorkflowRun)
	s.handleAPI("GET /api/workflows/runs/{run_id}/events", s.listWorkflowRunEvents)
	s.handleAPI("GET /api/workflows/runs/{run_id}/stream", s.streamWorkflowRun)
	s.handleAPI("GET /api/workflows/runs/{run_id}/artifacts/{artifact_id}", s.getWorkflowRunArtifact)

	s.threadRoutes()
}

// handlerFunc is an HTTP handler that returns its error instead of writing
// it, so every error goes through writeError.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// register is the one place that adds a route to the mux, so that every
// route is recorded in s.registered (and documented, see openapi.json).
func (s *Server) register(pattern string, h http.Handler, auth bool) {
	s.mux.Handle(pattern, h)
	s.registered = append(s.registered, registeredRoute{pattern: pattern, auth: auth})
}

func (s *Server) handle(pattern string, h handlerFunc) {
	s.register(pattern, s.errorsOf(h), false)
}

// handleAPI registers an endpoint that acts for an authenticated user.
func (s *Server) handleAPI(pattern string, h handlerFunc) {
	s.register(pattern, s.authenticate(s.errorsOf(h)), true)
}

// errorsOf adapts h to http.Handler, answering its error with writeError.
func (s *Server) errorsOf(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// route dispatches to the mux, answering unknown routes and wrong methods
// with the unified error body instead of the mux's plain text.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	// Handlers read the query with URL.Query, which skips what it cannot
	// parse: a malformed query string is refused here, for every route.
	if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
		s.writeError(w, r, runstream.Errorf(runstream.CodeInvalidArgument, "the query string is malformed: %v", err))
		return
	}
	h, pattern := s.mux.Handler(r)
	if pattern != "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	probe := httptest.NewRecorder()
	h.ServeHTTP(probe, r)
	if probe.Code == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", probe.Header().Get("Allow"))
		s.writeError(w, r, runstream.Errorf(runstream.CodeMethodNotAllowed, "method %s is not allowed on %s", r.Method, r.URL.Path))
		return
	}
	s.writeError(w, r, runstream.Errorf(runstream.CodeNotFound, "no route for %s %s", r.Method, r.URL.Path))
}
