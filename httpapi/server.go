package httpapi

import (
	"context"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/runstream/runstream"
	"github.com/runstream/runstream/health"
	"github.com/runstream/runstream/redact"
	"github.com/runstream/runstream/ssestream"
	"github.com/runstream/runstream/threadsvc"
	"github.com/runstream/runstream/web"
	"github.com/runstream/runstream/workflowsvc"
)

// Defaults of Config.
const (
	DefaultMaxBodyBytes = 8 << 20
	// DefaultBodyTimeout bounds the time to receive a request body.
	DefaultBodyTimeout = 30 * time.Second
)

// Config holds the optional parts of a Server.
type Config struct {
	// Logger receives access logs and errors. Defaults to a discarding
	// logger.
	Logger *slog.Logger
	// Registry collects the server's metrics and is served at /metrics.
	// Defaults to a new registry with the Go and process collectors.
	Registry *prometheus.Registry
	// Contracts holds the contract files served at /api/contracts/{name};
	// ContractNames lists those served. Empty: none.
	Contracts     fs.FS
	ContractNames []string
	// Ready reports the readiness of the server's parts by name (package
	// health) and an error naming those not ready. Defaults to ready.
	Ready func(ctx context.Context) (map[string]health.Status, error)
	// Durability describes the store's durability mode for /readyz.
	Durability string
	// Store names the store backend for /readyz (sqlite, postgres, memory).
	Store string
	// MaxBodyBytes limits every request body. Defaults to DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// BodyTimeout bounds the time from a request's headers to the end of
	// its body: a body still arriving then is answered 408
	// REQUEST_TIMEOUT and its connection closed. Defaults to
	// DefaultBodyTimeout.
	BodyTimeout time.Duration
	// Version is reported by /healthz.
	Version string
	// Authenticate returns the user a request acts for, or an error
	// (CodeUnauthenticated) to refuse it. Defaults to LocalUser for every
	// request: the "none" mode of one local user.
	Authenticate func(r *http.Request) (string, error)
	// Auth verifies bearer credentials and session cookies; when its
	// Credentials are set, Authenticate is not used.
	Auth AuthConfig
	// AppendRate bounds each user's thread event appends.
	AppendRate AppendRate
	// Tracing gives each request a server span (package tracing), named
	// after the route that served it, ended with its access log line (a
	// stream's when the stream ends). Whether spans go anywhere is the
	// installed tracer provider's business (package tracing/otelenv).
	Tracing bool
	// Stream bounds the SSE streams.
	Stream StreamConfig
}

// Server is the HTTP API. Create it with New; it is safe for concurrent use.
type Server struct {
	cfg       Config
	workflows *workflowsvc.Service
	// threads is nil on a server without the thread API, whose endpoints
	// then answer UNAVAILABLE.
	threads *threadsvc.Service

	logger  *slog.Logger
	mux     *http.ServeMux
	metrics *metrics
	handler http.Handler
	// streams serves the SSE streams, and counts each user's open ones
	// (StreamConfig.MaxPerUser).
	streams *ssestream.Set
	// authOutcomes and limitOutcomes count authentication and per-user
	// limit outcomes; appends holds the users' append buckets.
	authOutcomes, limitOutcomes *prometheus.CounterVec
	appends                     *userBuckets
	// registered lists the routes in the order routes() registered them;
	// the OpenAPI test compares them with openapi.json.
	registered []registeredRoute
	// mounted holds each registered pattern's handler, which Mount may
	// replace.
	mounted map[string]*mountPoint
}

// mountPoint is the mux's handler of one pattern: h, which Mount may
// replace before the server serves.
type mountPoint struct{ h http.Handler }

func (m *mountPoint) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.h.ServeHTTP(w, r) }

// registeredRoute is one pattern registered on the mux.
type registeredRoute struct {
	pattern string
	// auth is set for routes that act for an authenticated caller.
	auth bool
}

// New returns a Server with every route registered, answering the
// workflow endpoints with workflows and the thread endpoints with threads
// (nil: they answer UNAVAILABLE).
func New(cfg Config, workflows *workflowsvc.Service, threads *threadsvc.Service) *Server {
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
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	if cfg.Authenticate == nil {
		cfg.Authenticate = func(*http.Request) (string, error) { return LocalUser, nil }
	}
	if cfg.Ready == nil {
		cfg.Ready = func(context.Context) (map[string]health.Status, error) { return map[string]health.Status{}, nil }
	}
	s := &Server{cfg: cfg, workflows: workflows, threads: threads, logger: cfg.Logger, mux: http.NewServeMux(), metrics: newMetrics(cfg.Registry),
		streams: ssestream.NewSet(cfg.Stream)}
	s.authOutcomes, s.limitOutcomes = newAuthMetrics(cfg.Registry), newLimitMetrics(cfg.Registry)
	s.appends = newUserBuckets(cfg.AppendRate)
	s.routes()
	s.handler = s.instrument(s.cors(s.refuseURLCredentials(http.HandlerFunc(s.route))))
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
	s.sessionRoutes()

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

// AcquireStream counts a stream of user served by a mounted package (a
// LangGraph join) against the per-user limit of the server's own streams
// (StreamConfig.MaxPerUser): RATE_LIMITED when user has the most open,
// else a release to call once the stream ended.
func (s *Server) AcquireStream(user string) (release func(), err error) {
	return s.streams.Acquire(user)
}

// Mount registers h at pattern as an endpoint acting for an authenticated
// caller (User reads it): the HTTP surface of another package, such as
// langgraph's. A pattern the server registered itself is answered by h
// instead (langgraph serves the runs it streams and answers the others
// as the thread API would). Call it before the server serves.
func (s *Server) Mount(pattern string, h http.Handler) {
	if m, ok := s.mounted[pattern]; ok {
		m.h = s.authenticate(h)
		return
	}
	s.register(pattern, s.authenticate(h), true)
}

// WriteError answers err with the unified error body, as every route does.
func (s *Server) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	s.writeError(w, r, err)
}

// handlerFunc is an HTTP handler that returns its error instead of writing
// it, so every error goes through writeError.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// register is the one place that adds a route to the mux, so that every
// route is recorded in s.registered (and documented, see openapi.json).
func (s *Server) register(pattern string, h http.Handler, auth bool) {
	m := &mountPoint{h: h}
	if s.mounted == nil {
		s.mounted = make(map[string]*mountPoint)
	}
	s.mounted[pattern] = m
	s.mux.Handle(pattern, m)
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
		s.writeError(w, r, runstream.Errorf(runstream.CodeInvalidArgument, "the query string is malformed: %s", redact.Quote(err.Error())))
		return
	}
	h, pattern := s.mux.Handler(r)
	if pattern != "" && r.URL.Path != canonicalPath(r.URL.Path) {
		// The mux would redirect a path out of canonical form ("//",
		// "/./", "/../") to its route, and the redirect's Location would
		// give the path back.
		s.writeError(w, r, runstream.Errorf(runstream.CodeNotFound, "no route for %s %s", redact.Quote(r.Method), redact.Quote(r.URL.Path)))
		return
	}
	if pattern != "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	probe := &probeWriter{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if probe.status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", probe.header.Get("Allow"))
		s.writeError(w, r, runstream.Errorf(runstream.CodeMethodNotAllowed, "method %s is not allowed on %s", redact.Quote(r.Method), redact.Quote(r.URL.Path)))
		return
	}
	// The web UI answers the GETs of its pages (index.html for its
	// client-side routes) and files. It is not part of the API, so it is
	// neither registered nor documented.
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && web.Serves(r.URL.Path) {
		webUI.ServeHTTP(w, r)
		return
	}
	s.writeError(w, r, runstream.Errorf(runstream.CodeNotFound, "no route for %s %s", redact.Quote(r.Method), redact.Quote(r.URL.Path)))
}

// canonicalPath is p as net/http's mux routes it: cleaned, its trailing
// slash kept.
func canonicalPath(p string) string {
	if p == "" {
		return "/"
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean
}

// webUI serves the browser UI (package web).
var webUI = web.Handler()

// probeWriter records the status and headers the mux's fallback handler
// answers with, and drops its body: route tells a wrong method (405, with
// its Allow header) from an unknown path by them.
type probeWriter struct {
	header http.Header
	status int
}

func (p *probeWriter) Header() http.Header { return p.header }

func (p *probeWriter) WriteHeader(status int) {
	if p.status == 0 {
		p.status = status
	}
}

func (p *probeWriter) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	return len(b), nil
}
