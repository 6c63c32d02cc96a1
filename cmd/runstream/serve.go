package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"time"

	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/engine/openaillm"
	"github.com/runstream/runstream/engine/sqlnode"
	"github.com/runstream/runstream/httpapi"
	"github.com/runstream/runstream/langgraph"
	"github.com/runstream/runstream/threadsvc"
	"github.com/runstream/runstream/tracing"
	"github.com/runstream/runstream/tracing/otelenv"
	"github.com/runstream/runstream/workflow"
)

// serveConfig is the configuration of "runstream serve".
type serveConfig struct {
	addr              string
	store             string
	runEvents         string // "" (run events in store) or jsonl:DIR
	sqliteSync        string
	postgresSchema    string
	logLevel          slog.Level
	logFormat         string
	maxBodyBytes      int64
	maxHeaderBytes    int
	readHeaderTimeout time.Duration
	bodyTimeout       time.Duration
	idleTimeout       time.Duration
	shutdownTimeout   time.Duration
	workers           int
	maxRunsPerUser    int // engine.Config.MaxRunsPerOwner; 0: no cap
	workerID          string
	leaseDuration     time.Duration
	// maxEventBytes, maxOutputBytes, maxRunOutputBytes and
	// maxArtifactBytes bound a workflow event's data, a node's output, the
	// outputs of a run's nodes together and an artifact's content.
	maxEventBytes, maxOutputBytes, maxRunOutputBytes, maxArtifactBytes int
	// maxStreamsPerUser bounds each user's open SSE streams; -1: no limit.
	maxStreamsPerUser int
	// streamWriteTimeout bounds each write to an SSE follower.
	streamWriteTimeout time.Duration
	// tracing: each request gets a server span (an exporter is set up).
	tracing bool
	// dataDir holds the server's files: artifacts under dataDir/artifacts.
	// Empty, or a memory: store, keeps artifacts in memory.
	dataDir string
	// sqlDatabases are the databases sql nodes may query, by name.
	sqlDatabases []sqlnode.Spec
	// openAIAPIKey is the openai llm provider's key, read from the
	// environment only (a flag would show in the process list).
	openAIAPIKey string
	// openAIKeyBases are the endpoints the openai key is sent to.
	openAIKeyBases []string
	// openBackend opens the store; nil means openBackend. It is
	// Main.openBackend, for tests.
	openBackend func(context.Context, serveConfig, *slog.Logger) (*backend, error)
	// onCommit is told of the store's group commits (metrics); set by
	// newApp.
	onCommit func(requests int)
	// httpAllow opens non-public hosts and networks to the http node.
	httpAllow engine.HTTPAllowList
	// secrets resolve {{ secrets.NAME }}: the environment's
	// RUNSTREAM_SECRET_NAME, then the secrets file's NAME.
	secrets     engine.ChainSecrets
	secretsFile string
	// sealKeyFile and sealKey (RUNSTREAM_SEAL_KEY) give the key that seals
	// stored resume tokens (see newSealer).
	sealKeyFile, sealKey string
	// auth holds the authentication and per-user limit flags.
	auth authFlags
	// contextWindows are the models' maximum contexts for the thread API's
	// context_usage: threadsvc.DefaultContextWindows and the
	// --context-window flags over it.
	contextWindows map[string]int64
	// The LangGraph run streams (package langgraph): a run's lease, how
	// long an ended run's chunks are kept, the chunks kept per run and the
	// largest chunk.
	chunkLease, chunkTTL time.Duration
	maxChunksPerRun      int64
	maxChunkBytes        int
}

// secretEnvPrefix prefixes the environment variables of secrets.
const secretEnvPrefix = "RUNSTREAM_SECRET_"

func (m *Main) serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := serveConfig{openBackend: m.openBackend}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:8780", "address to listen on")
	fs.StringVar(&cfg.store, "store", "sqlite:./runstream-data/runstream.db", "store URL: sqlite:PATH, postgres://… or memory:")
	fs.StringVar(&cfg.runEvents, "run-events", "", "where thread run events are kept: jsonl:DIR puts them in JSON Lines files under DIR (one process per directory), while workflows and thread run rows stay in --store (idempotency keys are written beside the events) (default: in --store)")
	fs.StringVar(&cfg.sqliteSync, "sqlite-synchronous", "FULL", "SQLite synchronous mode: FULL (survives power loss) or NORMAL (faster; survives a process crash)")
	fs.StringVar(&cfg.postgresSchema, "postgres-schema", "", "PostgreSQL schema for runstream's tables, created when missing (default: the server's search_path)")
	fs.TextVar(&cfg.logLevel, "log-level", slog.LevelInfo, "log level: DEBUG, INFO, WARN or ERROR")
	fs.StringVar(&cfg.logFormat, "log-format", "json", "log format: json or text")
	fs.Int64Var(&cfg.maxBodyBytes, "max-body-bytes", httpapi.DefaultMaxBodyBytes, "largest accepted request body in bytes")
	fs.IntVar(&cfg.maxHeaderBytes, "max-header-bytes", 64<<10, "largest accepted request header block in bytes")
	fs.DurationVar(&cfg.readHeaderTimeout, "read-header-timeout", 10*time.Second, "time allowed to read request headers")
	fs.DurationVar(&cfg.bodyTimeout, "body-timeout", httpapi.DefaultBodyTimeout, "time allowed to receive a request body after its headers; a slower body is answered 408 REQUEST_TIMEOUT and its connection closed")
	fs.DurationVar(&cfg.idleTimeout, "idle-timeout", 120*time.Second, "how long an idle keep-alive connection stays open")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a graceful shutdown waits for requests and workflow nodes to finish; nodes still running a quarter of it (at most 5s) before its end are interrupted, and the ones that act on nothing outside their run start again where it continues (docs/RELIABILITY.md)")
	fs.IntVar(&cfg.maxStreamsPerUser, "max-streams-per-user", httpapi.DefaultMaxStreamsPerUser, "most SSE streams one user may have open on this instance, the next answering 429 RATE_LIMITED; with no authentication every request is the one local user (-1: no limit)")
	fs.DurationVar(&cfg.streamWriteTimeout, "stream-write-timeout", 10*time.Second, "time an SSE follower has to take each write; a slower follower is cut (it resumes with Last-Event-ID)")
	fs.IntVar(&cfg.workers, "workers", engine.DefaultWorkers, "workflow runs this instance executes at once (0 disables the engine)")
	fs.IntVar(&cfg.maxRunsPerUser, "max-runs-per-user", 0, "most workflow runs of one user executing at once in the whole deployment: the cap counts the user's runs on every instance sharing the store, not per instance; the user's next runs stay queued until one ends, even with workers idle. 0: no cap (one user may use every worker; the runs of users executing fewer are claimed first all the same)")
	fs.IntVar(&cfg.maxEventBytes, "max-event-bytes", workflow.DefaultMaxEventBytes, "largest data of one workflow event in bytes; a node whose event would exceed it fails with WORKFLOW_NODE_LIMIT_EXCEEDED")
	fs.IntVar(&cfg.maxOutputBytes, "max-node-output-bytes", engine.DefaultMaxOutputBytes, "largest output (JSON) of one workflow node in bytes")
	fs.IntVar(&cfg.maxRunOutputBytes, "max-run-output-bytes", engine.DefaultMaxRunOutputBytes, "largest outputs (JSON) of one workflow run's nodes all together in bytes; at least --max-node-output-bytes")
	fs.IntVar(&cfg.maxArtifactBytes, "max-artifact-bytes", engine.DefaultMaxArtifactBytes, "largest content of one workflow artifact in bytes")
	fs.DurationVar(&cfg.leaseDuration, "lease-duration", engine.DefaultLeaseDuration, "how long a workflow run's claim lasts unless renewed (every third of it); another instance takes over a run whose lease expired")
	fs.StringVar(&cfg.workerID, "worker-id", engine.DefaultWorkerID(), "name of this instance in run leases; distinct per instance sharing a store")
	fs.StringVar(&cfg.dataDir, "data-dir", "./runstream-data", "directory of the server's files: workflow artifacts go under DIR/artifacts (a memory: store keeps them in memory)")
	fs.Func("context-window", "a model's maximum context in tokens, MODEL=TOKENS, for the context_usage of /api/threads/{id}/token-usage (a name also matches the models it prefixes); repeat for several; they add to and override the default table (docs/DEERFLOW.md)", func(s string) error {
		model, n, err := threadsvc.ParseContextWindow(s)
		if err != nil {
			return err
		}
		if cfg.contextWindows == nil {
			cfg.contextWindows = maps.Clone(threadsvc.DefaultContextWindows)
		}
		cfg.contextWindows[model] = n
		return nil
	})
	fs.Func("sql-database", "a database that sql nodes may query, NAME=sqlite:PATH (opened read-only) or NAME=postgres://…; repeat the flag for several", func(s string) error {
		spec, err := sqlnode.ParseSpec(s)
		if err != nil {
			return err
		}
		cfg.sqlDatabases = append(cfg.sqlDatabases, spec)
		return nil
	})
	fs.Func("http-node-allow", "hosts, addresses and CIDR networks (comma-separated) the http node may reach although they are not public (loopback, private, link-local…); none by default", func(s string) (err error) {
		cfg.httpAllow, err = engine.ParseHTTPAllowList(s)
		return err
	})
	fs.Func("openai-base-url", "an OpenAI-compatible endpoint (…/v1) the server's key (RUNSTREAM_OPENAI_API_KEY) is sent to; repeat for several; a definition naming another baseURL is sent no key (default: "+openaillm.DefaultBaseURL+")", func(s string) error {
		cfg.openAIKeyBases = append(cfg.openAIKeyBases, s)
		return nil
	})
	fs.StringVar(&cfg.secretsFile, "secrets-file", "", "a JSON object of secret names to values, for {{ secrets.NAME }} in http nodes (the environment's "+secretEnvPrefix+"NAME comes first)")
	fs.DurationVar(&cfg.chunkLease, "chunk-lease", langgraph.DefaultLease, "how long a LangGraph run stream stays active without a push from its producer; then it ends with an error chunk and status error")
	fs.DurationVar(&cfg.chunkTTL, "chunk-ttl", langgraph.DefaultChunkTTL, "how long the chunks of an ended LangGraph run stream are kept (a join after that gets the end at once)")
	fs.Int64Var(&cfg.maxChunksPerRun, "max-chunks-per-run", langgraph.DefaultMaxChunks, "chunks a LangGraph run stream keeps; past it the oldest go, and a join from below them gets a gap event")
	fs.IntVar(&cfg.maxChunkBytes, "max-chunk-bytes", langgraph.DefaultMaxChunkBytes, "largest data of one LangGraph stream chunk in bytes (at least 4 MiB: a full values state must fit; the request body limit, --max-body-bytes, bounds a whole push)")
	fs.StringVar(&cfg.sealKeyFile, "seal-key-file", "", "file holding the key (base64 of 32 bytes) that seals resume tokens in the store; the environment's "+sealKeyEnv+" may hold the key itself (default: DATA_DIR/"+sealKeyFileName+", created 0600 when missing; a memory: store uses a key of the process)")
	cfg.auth.add(fs)
	synopsis := "runstream serve [flags]\n\nTraces are exported with OpenTelemetry when OTEL_EXPORTER_OTLP_ENDPOINT or\nOTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (the OTEL_* variables, see docs/TRACING.md)."
	if err := m.parseFlags(fs, args, stderr, synopsis); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if cfg.logFormat != "json" && cfg.logFormat != "text" {
		return fmt.Errorf("%w: --log-format must be json or text, not %q", errUsage, cfg.logFormat)
	}
	if cfg.maxEventBytes < 1 || cfg.maxOutputBytes < 1 || cfg.maxRunOutputBytes < 1 || cfg.maxArtifactBytes < 1 {
		return fmt.Errorf("%w: --max-event-bytes, --max-node-output-bytes, --max-run-output-bytes and --max-artifact-bytes must be positive", errUsage)
	}
	if cfg.maxRunOutputBytes < cfg.maxOutputBytes {
		return fmt.Errorf("%w: --max-run-output-bytes (%d) is below --max-node-output-bytes (%d): one node's output could not fit", errUsage, cfg.maxRunOutputBytes, cfg.maxOutputBytes)
	}
	if cfg.streamWriteTimeout <= 0 {
		return fmt.Errorf("%w: --stream-write-timeout must be positive", errUsage)
	}
	if cfg.leaseDuration <= 0 {
		return fmt.Errorf("%w: --lease-duration must be positive", errUsage)
	}
	if cfg.chunkLease <= 0 || cfg.chunkTTL <= 0 || cfg.maxChunksPerRun < 1 || cfg.maxChunkBytes < langgraph.MinMaxChunkBytes || int64(cfg.maxChunkBytes) > cfg.maxBodyBytes {
		return fmt.Errorf("%w: --chunk-lease and --chunk-ttl must be positive, --max-chunks-per-run at least 1, --max-chunk-bytes at least %d and at most --max-body-bytes", errUsage, langgraph.MinMaxChunkBytes)
	}
	if cfg.workers < 0 {
		return fmt.Errorf("%w: --workers must not be negative", errUsage)
	}
	if cfg.maxRunsPerUser < 0 {
		return fmt.Errorf("%w: --max-runs-per-user must not be negative (0: no cap)", errUsage)
	}
	if cfg.maxStreamsPerUser < 1 && cfg.maxStreamsPerUser != -1 {
		return fmt.Errorf("%w: --max-streams-per-user must be at least 1, or -1 for no limit", errUsage)
	}
	if err := m.readNodeEnv(&cfg); err != nil {
		return err
	}
	cfg.sealKey = m.Getenv(sealKeyEnv)
	logger := newLogger(stderr, cfg.logFormat, cfg.logLevel)
	if cfg.chunkLease < langgraph.SafeLease {
		logger.Warn("--chunk-lease is shorter than twice a producer's renewal interval (chunkpush renews after 10 s of silence): an idle producer's run may be swept and fenced", "chunk_lease", cfg.chunkLease, "safe", langgraph.SafeLease)
	}
	if err := cfg.auth.build(cfg.addr, logger); err != nil {
		return err
	}
	tracer, err := otelenv.Setup(ctx, version, logger)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	// Last: the spans of the shutdown itself are flushed too.
	defer shutdownTracing(tracer, cfg.shutdownTimeout, logger)

	cfg.tracing = tracer.Exporting
	a, err := newApp(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer a.close()
	cfg.auth.reloadKeys(ctx, logger)
	logger.Info("store opened", "store", a.backend.name, "location", a.backend.location, "durability", a.backend.durability)
	if tracer.Exporting {
		logger.Info("tracing", "exporting", true, "protocol", tracer.Protocol)
	} else {
		logger.Debug("tracing", "exporting", false, "reason", tracer.Disabled)
	}

	requestCtx, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	srv := &http.Server{
		Handler:           a.api,
		ReadHeaderTimeout: cfg.readHeaderTimeout,
		IdleTimeout:       cfg.idleTimeout,
		MaxHeaderBytes:    cfg.maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		// Requests do not inherit the signal context: a SIGTERM must let
		// in-flight requests finish and answer truthfully (Shutdown waits
		// for them). They are cancelled only when the shutdown times out.
		BaseContext: func(net.Listener) context.Context { return requestCtx },
	}
	silent := newSilentConns()
	srv.ConnState = silent.track
	srv.RegisterOnShutdown(func() { silent.closeAfter(silentConnGrace(cfg.shutdownTimeout)) })
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.addr, err)
	}
	if err := cfg.auth.checkListener(ln.Addr()); err != nil {
		ln.Close()
		return err
	}
	url := "http://" + ln.Addr().String()
	fmt.Fprintf(stdout, "runstream %s listening on %s\n", version, url)
	fmt.Fprintf(stdout, "store: %s (%s)\n", a.backend.location, a.backend.durability)
	cfg.auth.printWarning(stdout)
	logger.Info("listening", "url", url)
	if m.onListen != nil {
		m.onListen(ln.Addr().String())
	}

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down", "timeout", cfg.shutdownTimeout)
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.shutdownTimeout)
	defer cancel()
	// Stop accepting and wait for in-flight requests (http.Server); end
	// every SSE stream with its last frames flushed, taken-over ones
	// included, so followers resume elsewhere (the API); stop the
	// engine's runners at a safe point, releasing their leases (the
	// engine; a.close closes the store only after). All three at once,
	// within the shutdown timeout.
	if a.langgraph != nil {
		a.langgraph.Shutdown() // its streams abort: the SDK reconnects
	}
	streamsDone := make(chan error, 1)
	go func() { streamsDone <- a.api.Shutdown(shutdownCtx) }()
	engineDone := make(chan error, 1)
	go func() { engineDone <- a.stopEngine(shutdownCtx) }()
	if err := errors.Join(srv.Shutdown(shutdownCtx), <-streamsDone, <-engineDone); err != nil {
		cancelRequests()
		srv.Close()
		return fmt.Errorf("graceful shutdown: %w", err)
	}
	logger.Info("stopped")
	return nil
}

// newLogger returns serve's logger: a line logged with the context of
// traced work names its trace_id and span_id (tracing.LogHandler).
func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "text" {
		return slog.New(tracing.LogHandler(slog.NewTextHandler(w, opts)))
	}
	return slog.New(tracing.LogHandler(slog.NewJSONHandler(w, opts)))
}

// shutdownTracing flushes the spans not yet exported, within timeout.
func shutdownTracing(t *otelenv.Tracing, timeout time.Duration, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		logger.Warn("tracing shutdown", "error", err)
	}
}

// readNodeEnv sets what the node types read from the environment: the
// openai provider's key, and the secrets of {{ secrets.NAME }} (the
// environment's RUNSTREAM_SECRET_NAME, then cfg.secretsFile).
func (m *Main) readNodeEnv(cfg *serveConfig) error {
	for _, name := range openaillm.APIKeyEnv {
		if cfg.openAIAPIKey = m.Getenv(name); cfg.openAIAPIKey != "" {
			break
		}
	}
	cfg.secrets = engine.ChainSecrets{engine.EnvSecrets{Prefix: secretEnvPrefix, Getenv: m.Getenv}}
	if cfg.secretsFile != "" {
		file, err := engine.ReadSecretsFile(cfg.secretsFile)
		if err != nil {
			return fmt.Errorf("%w: --secrets-file: %w", errUsage, err)
		}
		cfg.secrets = append(cfg.secrets, file)
	}
	return nil
}
