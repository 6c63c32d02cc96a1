package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runstream/runstream/postgres"
)

// benchConfig is the configuration of "runstream bench".
type benchConfig struct {
	scenario    string
	store       string
	followers   int
	rate        float64
	events      int
	eventBytes  int
	batch       int
	concurrency int
	settle      time.Duration
	jsonOut     bool
	// The thread scenarios' (bench_thread.go).
	threads   int
	runs      int
	runFilter bool
	instances int
	// postgresSchema is the schema of a PostgreSQL store's tables; empty:
	// a new one for the run, dropped at its end (benchSchema).
	postgresSchema string
	// cpuProfile, when set, is where a CPU profile of the first server
	// during the production of a thread scenario goes (cpuSeconds long).
	cpuProfile string
	cpuSeconds int
	// trace, when set, is where an execution trace of the same stretch
	// goes (cpuSeconds long).
	trace string
	// serverExe runs the servers ("<serverExe> bench serve"); empty: this
	// executable. Another build's, to compare it with this one's.
	serverExe string
	// centrifugo, when set, is a Centrifugo executable that a thread
	// scenario loads instead of runstream, for a baseline
	// (bench_centrifugo.go).
	centrifugo string
	// stalled followers that never read are added in a second run of
	// thread-latency or thread-saturation (bench_stalled.go), over
	// sockets whose receive buffer is stalledRcvbuf bytes; stalledWait
	// after they connected they are checked for a cut.
	stalled       int
	stalledRcvbuf int
	stalledWait   time.Duration
	// cuts is how many times each follower of thread-latency or
	// thread-saturation drops its connection and resumes.
	cuts int
}

// bench runs one load scenario against a server it starts as a child
// process ("runstream bench serve"), on this machine, over loopback:
//
//	latency     F followers, events appended at R/s: append→delivered p50/p99
//	saturation  F followers, events appended as fast as possible in batches:
//	            delivered frames per second
//	replay      N stored events, then one follower from cursor 0: events/s
//	idle        F followers of a silent run: the server's resident memory
//
// and the scenarios of the thread path, whose producers POST to the
// server (thread-latency, thread-saturation, thread-ingest, thread-replay,
// thread-idle; see bench_thread.go).
func (m *Main) bench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "serve" {
		return m.benchServe(ctx, args[1:], stdout, stderr)
	}
	var cfg benchConfig
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&cfg.scenario, "scenario", "latency", "latency, saturation, replay, idle, thread-latency, thread-saturation, thread-ingest, thread-replay or thread-idle")
	fs.StringVar(&cfg.store, "store", "", `store URL of the server (default: SQLite, synchronous=FULL, in a temporary directory)`)
	fs.IntVar(&cfg.followers, "followers", 100, "number of followers")
	fs.Float64Var(&cfg.rate, "rate", 1000, "events per second (latency)")
	fs.IntVar(&cfg.events, "events", 10000, "number of events")
	fs.IntVar(&cfg.eventBytes, "event-bytes", 200, "size of each event's data in bytes")
	fs.IntVar(&cfg.batch, "batch", 100, "events per append (saturation, replay; thread scenarios: events per POST, default 1)")
	fs.IntVar(&cfg.concurrency, "concurrency", 16, "appends in flight at once in the server's producer (latency); POSTs in flight (thread scenarios)")
	fs.IntVar(&cfg.threads, "threads", 1, "threads the POSTs go to, round robin; followers are spread over them (thread scenarios)")
	fs.IntVar(&cfg.runs, "runs", 1, "runs per thread the POSTs go to, round robin (thread scenarios)")
	fs.BoolVar(&cfg.runFilter, "run-filter", false, "each follower follows one run of its thread (?run_id=) (thread scenarios)")
	fs.StringVar(&cfg.cpuProfile, "cpu-profile", "", "write a CPU profile of the (first) server while the events are produced (thread-replay: of the reading server while the replay runs) to this file (thread scenarios)")
	fs.IntVar(&cfg.cpuSeconds, "cpu-seconds", 5, "length of the --cpu-profile and the --trace")
	fs.StringVar(&cfg.trace, "trace", "", "write an execution trace of the (first) server, over the same stretch as --cpu-profile, to this file (go tool trace; thread scenarios)")
	fs.StringVar(&cfg.serverExe, "server-exe", "", "the runstream executable that runs the servers (default: this one), to compare builds")
	fs.StringVar(&cfg.centrifugo, "centrifugo", "", "a Centrifugo executable: the thread scenario loads it (memory engine) instead of runstream, as a baseline measured the same way (one run per thread)")
	fs.IntVar(&cfg.instances, "instances", 1, "servers on the store: POSTs go to the first, followers read from the last (thread scenarios; PostgreSQL)")
	fs.StringVar(&cfg.postgresSchema, "postgres-schema", "", "PostgreSQL schema of the servers' tables (default: a new one for the run, dropped at its end, so that every run starts from empty tables as SQLite's does)")
	fs.IntVar(&cfg.stalled, "stalled-followers", 0, "thread-latency, thread-saturation: run twice, the second time with this many more followers that never read their stream; report the POST latency of both and the cuts")
	fs.IntVar(&cfg.stalledRcvbuf, "stalled-rcvbuf", 4096, "socket receive buffer of each stalled follower, in bytes")
	fs.DurationVar(&cfg.stalledWait, "stalled-wait", 15*time.Second, "how long after they connected the stalled followers are checked for a cut (the server's write deadline, 10s, and a margin)")
	fs.IntVar(&cfg.cuts, "cuts", 0, "thread-latency, thread-saturation: each follower drops its connection this many times, evenly through its events, and resumes after the last it read (all at about the same moment); a gap or a duplicate fails the run")
	fs.DurationVar(&cfg.settle, "settle", 2*time.Second, "how long the idle followers stay connected before the server's memory is read (idle)")
	fs.BoolVar(&cfg.jsonOut, "json", false, "print the result as JSON")
	if err := m.parseFlags(fs, args, stderr, "runstream bench [flags]  |  runstream bench serve [flags]"); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if cfg.stalled < 0 || (cfg.stalled > 0 && cfg.scenario != "thread-latency" && cfg.scenario != "thread-saturation") {
		return fmt.Errorf("%w: --stalled-followers is a positive number, with --scenario thread-latency or thread-saturation", errUsage)
	}
	if cfg.cuts < 0 || (cfg.cuts > 0 && cfg.scenario != "thread-latency" && cfg.scenario != "thread-saturation") {
		return fmt.Errorf("%w: --cuts is a positive number, with --scenario thread-latency or thread-saturation", errUsage)
	}
	batchSet := false
	fs.Visit(func(f *flag.Flag) { batchSet = batchSet || f.Name == "batch" })
	if strings.HasPrefix(cfg.scenario, "thread-") && cfg.scenario != "thread-replay" && !batchSet {
		cfg.batch = 1
	}
	if cfg.centrifugo != "" {
		if err := checkCentrifugoConfig(cfg); err != nil {
			return err
		}
	}
	if cfg.store == "" {
		dir, err := os.MkdirTemp("", "runstream-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cfg.store = "sqlite:" + dir + "/bench.db"
	}
	serverStore := cfg.store
	if storeKind(cfg.store) == "postgres" { // --centrifugo refuses --store
		store, drop, err := benchSchema(ctx, cfg, stderr)
		if err != nil {
			return err
		}
		defer drop()
		serverStore = store
	}
	servers := make([]*benchServer, max(cfg.instances, 1))
	for i := range servers {
		start := func() (*benchServer, error) { return startBenchServer(ctx, cfg.serverExe, serverStore, stderr) }
		if cfg.centrifugo != "" {
			start = func() (*benchServer, error) { return startCentrifugo(ctx, cfg.centrifugo, stderr) }
		}
		srv, err := start()
		if err != nil {
			return err
		}
		defer srv.stop()
		servers[i] = srv
	}
	srv := servers[0]

	var (
		res benchResult
		err error
	)
	switch cfg.scenario {
	case "latency":
		res, err = benchLatency(ctx, srv, cfg)
	case "saturation":
		res, err = benchSaturation(ctx, srv, cfg)
	case "replay":
		res, err = benchReplay(ctx, srv, cfg)
	case "idle":
		res, err = benchIdle(ctx, srv, cfg)
	case "thread-latency", "thread-saturation":
		rate := cfg.rate
		if cfg.scenario == "thread-saturation" {
			rate = 0
		}
		if cfg.stalled > 0 {
			res, err = benchThreadStalled(ctx, servers, cfg, rate)
		} else {
			res, err = benchThread(ctx, servers, cfg, rate, cfg.followers, 0)
		}
	case "thread-ingest":
		res, err = benchThread(ctx, servers, cfg, 0, 0, 0)
	case "thread-replay":
		res, err = benchThreadReplay(ctx, servers, cfg)
	case "thread-idle":
		res, err = benchThreadIdle(ctx, servers, cfg)
	default:
		return fmt.Errorf("%w: unknown scenario %q", errUsage, cfg.scenario)
	}
	if err != nil {
		return fmt.Errorf("bench %s: %w", cfg.scenario, err)
	}
	res.Scenario, res.Store = cfg.scenario, redactURL(cfg.store)
	if srv.peer != "" {
		res.Store = srv.peer + " (memory engine)"
	}
	if strings.HasPrefix(cfg.scenario, "thread-") {
		res.Instances, res.Threads, res.Batch, res.InFlight, res.RunFilter = len(servers), max(cfg.threads, 1), cfg.batch, cfg.concurrency, cfg.runFilter
	}
	if res.Followers == 0 && cfg.scenario != "thread-ingest" {
		res.Followers = cfg.followers
	}
	if cfg.jsonOut {
		return json.NewEncoder(stdout).Encode(res)
	}
	fmt.Fprintln(stdout, res)
	return nil
}

// benchResult is what a scenario measured.
type benchResult struct {
	Scenario    string  `json:"scenario"`
	Store       string  `json:"store"`
	Followers   int     `json:"followers"`
	Events      int     `json:"events"`
	Delivered   int64   `json:"delivered"`
	Seconds     float64 `json:"seconds"`
	P50Millis   float64 `json:"p50_ms,omitempty"`
	P99Millis   float64 `json:"p99_ms,omitempty"`
	MaxMillis   float64 `json:"max_ms,omitempty"`
	PerSecond   float64 `json:"per_second,omitempty"`
	RSSMiB      float64 `json:"rss_mib,omitempty"`
	PeakMiB     float64 `json:"peak_rss_mib,omitempty"`
	BaselineMiB float64 `json:"baseline_rss_mib,omitempty"`
	// CollectedMiB is the RSS a second after a garbage collection (idle
	// scenarios, runstream only): what an idle server holds once the
	// runtime's periodic collection has run.
	CollectedMiB  float64 `json:"rss_after_gc_mib,omitempty"`
	HeapMiB       float64 `json:"heap_inuse_mib,omitempty"`
	StackMiB      float64 `json:"stack_inuse_mib,omitempty"`
	Goroutines    int     `json:"goroutines,omitempty"`
	AppendSeconds float64 `json:"append_seconds,omitempty"`
	// The thread scenarios': how the load was shaped, the rate the POSTs
	// reached, and the servers' CPU time while it ran.
	Instances        int     `json:"instances,omitempty"`
	Threads          int     `json:"threads,omitempty"`
	Batch            int     `json:"batch,omitempty"`
	InFlight         int     `json:"in_flight,omitempty"`
	RunFilter        bool    `json:"run_filter,omitempty"`
	PublishPerSecond float64 `json:"publish_per_second,omitempty"`
	ServerCPUSeconds float64 `json:"server_cpu_seconds,omitempty"`
	CPUMillisPer1000 float64 `json:"server_cpu_ms_per_1000,omitempty"`
	// The producers' POST latency (thread scenarios), from the request's
	// start to the end of its response.
	PostP50Millis float64 `json:"post_p50_ms,omitempty"`
	PostP99Millis float64 `json:"post_p99_ms,omitempty"`
	PostMaxMillis float64 `json:"post_max_ms,omitempty"`
	// PostMaxAtSeconds is when the slowest POST began, from the first's
	// start.
	PostMaxAtSeconds float64 `json:"post_max_at_s,omitempty"`
	// With --stalled-followers: the stalled followers, how many the
	// server cut, the run without them, and the ratio of the POST p99
	// with them to the one without.
	Stalled int `json:"stalled_followers,omitempty"`
	// StalledConnectedSeconds is when the stalled followers were all
	// connected, from the first POST's start (negative: before it).
	StalledConnectedSeconds float64      `json:"stalled_connected_s,omitempty"`
	StalledCut              int          `json:"stalled_cut,omitempty"`
	Without                 *benchResult `json:"without_stalled,omitempty"`
	PostP99Ratio            float64      `json:"post_p99_ratio,omitempty"`
	// Commits is the producing server's group commits while the POSTs
	// ran (thread scenarios, runstream on SQLite or PostgreSQL): how many
	// writes each commit carried, which sets what a write costs.
	Commits groupCommits `json:"commits,omitzero"`
	// With --cuts: the cuts per follower, the resumes made (followers ×
	// cuts), and the time from a cut to the resumed stream's headers.
	Cuts            int     `json:"cuts_per_follower,omitempty"`
	Resumes         int     `json:"resumes,omitempty"`
	ResumeP50Millis float64 `json:"resume_p50_ms,omitempty"`
	ResumeP99Millis float64 `json:"resume_p99_ms,omitempty"`
}

func (r benchResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  store=%s  followers=%d  events=%d  delivered=%d  in %.2fs", r.Scenario, r.Store, r.Followers, r.Events, r.Delivered, r.Seconds)
	if r.Instances > 0 {
		fmt.Fprintf(&b, "\n  instances=%d  threads=%d  batch=%d  in flight=%d  run filter=%v", r.Instances, r.Threads, r.Batch, r.InFlight, r.RunFilter)
	}
	if r.PublishPerSecond > 0 {
		fmt.Fprintf(&b, "\n  published: %.0f events per second (POSTs took %.2fs)", r.PublishPerSecond, r.AppendSeconds)
	}
	if r.ServerCPUSeconds > 0 {
		unit := "frames delivered"
		if r.Delivered == 0 {
			unit = "events published"
		}
		fmt.Fprintf(&b, "\n  server CPU: %.2fs, %.2f ms per 1,000 %s", r.ServerCPUSeconds, r.CPUMillisPer1000, unit)
	}
	if r.PostP99Millis > 0 {
		fmt.Fprintf(&b, "\n  POST latency: p50 %.2f ms  p99 %.2f ms  max %.2f ms (began %.1fs in)", r.PostP50Millis, r.PostP99Millis, r.PostMaxMillis, r.PostMaxAtSeconds)
	}
	if r.P99Millis > 0 {
		fmt.Fprintf(&b, "\n  append→delivered latency: p50 %.2f ms  p99 %.2f ms  max %.2f ms", r.P50Millis, r.P99Millis, r.MaxMillis)
	}
	if r.PerSecond > 0 {
		fmt.Fprintf(&b, "\n  throughput: %.0f per second", r.PerSecond)
	}
	if r.Commits.Count > 0 {
		fmt.Fprintf(&b, "\n  store: %d group commits, %.1f writes each", r.Commits.Count, r.Commits.Writes/float64(r.Commits.Count))
	}
	if r.RSSMiB > 0 && r.BaselineMiB == 0 {
		fmt.Fprintf(&b, "\n  server RSS at the end: %.1f MiB", r.RSSMiB)
	} else if r.RSSMiB > 0 {
		fmt.Fprintf(&b, "\n  server RSS: %.1f MiB (%.1f MiB before the followers, peak %.1f MiB while they connected)", r.RSSMiB, r.BaselineMiB, r.PeakMiB)
		if r.Goroutines > 0 {
			fmt.Fprintf(&b, "; Go heap in use %.1f MiB, stacks %.1f MiB, %d goroutines", r.HeapMiB, r.StackMiB, r.Goroutines)
		}
		if r.CollectedMiB > 0 {
			fmt.Fprintf(&b, "\n  server RSS after a collection (the runtime's periodic one, run now): %.1f MiB", r.CollectedMiB)
		}
	}
	if r.Cuts > 0 {
		fmt.Fprintf(&b, "\n  cuts: each follower cut %d times, %d resumes, every event delivered once in order; cut→resumed headers p50 %.2f ms  p99 %.2f ms",
			r.Cuts, r.Resumes, r.ResumeP50Millis, r.ResumeP99Millis)
	}
	if r.Without != nil {
		fmt.Fprintf(&b, "\n  stalled followers: %d (connected %.1fs before the first POST), cut by the server: %d", r.Stalled, -r.StalledConnectedSeconds, r.StalledCut)
		fmt.Fprintf(&b, "\n  POST p99 with them / without: %.2f ms / %.2f ms = %.2f (p50 %.2f / %.2f ms)",
			r.PostP99Millis, r.Without.PostP99Millis, r.PostP99Ratio, r.PostP50Millis, r.Without.PostP50Millis)
		without := r.Without.String()
		fmt.Fprintf(&b, "\n  the run without them:\n    %s", strings.ReplaceAll(without, "\n", "\n  "))
	}
	return b.String()
}

// benchServer is the child server process.
type benchServer struct {
	url  string
	cmd  *exec.Cmd
	stop func()
	// threads is its thread API, for the thread scenarios.
	threads threadAPI
	// peer names another server than runstream ("Centrifugo"), loaded
	// for a baseline; empty for runstream.
	peer string
}

// benchSchema gives the run's PostgreSQL tables a schema: cfg.postgresSchema,
// or a new one that drop drops (reporting a failure on stderr). It creates
// the schema and returns the store URL whose search_path names it, which
// every build's server takes (unlike a flag newer than it, for
// --server-exe). A database whose tables grew from run to run would slow
// every run down, unlike SQLite's new file.
func benchSchema(ctx context.Context, cfg benchConfig, stderr io.Writer) (store string, drop func(), err error) {
	schema, drop := cfg.postgresSchema, func() {}
	if schema == "" {
		schema = "runstream_bench_" + strings.ToLower(rand.Text()[:12])
		drop = func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := postgres.DropSchema(ctx, cfg.store, schema); err != nil {
				fmt.Fprintf(stderr, "runstream bench: drop the run's schema %s: %v\n", schema, err)
			}
		}
	}
	u, err := url.Parse(cfg.store)
	if err != nil {
		return "", nil, fmt.Errorf("%w: --store: the URL does not parse", errUsage)
	}
	if err := postgres.CreateSchema(ctx, cfg.store, schema); err != nil {
		return "", nil, fmt.Errorf("create the run's schema %s: %w", schema, err)
	}
	q := u.Query()
	q.Set("search_path", pgx.Identifier{schema}.Sanitize())
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
}

func startBenchServer(ctx context.Context, exe, store string, stderr io.Writer) (*benchServer, error) {
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(ctx, exe, "bench", "serve", "--store", store)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("start the server: %w", err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cancel()
		cmd.Wait()
		return nil, fmt.Errorf("the server did not start: %w", err)
	}
	url := strings.TrimSpace(line)
	return &benchServer{url: url, cmd: cmd, stop: func() { cancel(); cmd.Wait() }, threads: runstreamThreads{url}}, nil
}

func (s *benchServer) post(ctx context.Context, path string) ([]byte, error) {
	return s.call(ctx, "POST", path)
}

// call sends a request without a body to the server and returns the
// body of its 200 answer.
func (s *benchServer) call(ctx context.Context, method, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.url+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, body)
	}
	return body, err
}

func (s *benchServer) getJSON(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", s.url+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

func (s *benchServer) createRun(ctx context.Context) (string, error) {
	body, err := s.post(ctx, "/bench/runs")
	if err != nil {
		return "", err
	}
	var r struct{ RunID string }
	return r.RunID, json.Unmarshal(body, &r)
}

func (s *benchServer) produce(ctx context.Context, runID string, count int, rate float64, batch, size, concurrency int) error {
	_, err := s.post(ctx, fmt.Sprintf("/bench/runs/%s/produce?count=%d&rate=%g&batch=%d&bytes=%d&concurrency=%d&complete=1", runID, count, rate, batch, size, concurrency))
	return err
}

// openBenchStream opens an SSE stream of the server, with header's
// fields (header may be nil), and checks that it answered 200; the caller
// closes the body.
func openBenchStream(ctx context.Context, url string, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := benchClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("stream %s: %s", req.URL.Path, resp.Status)
	}
	return resp, nil
}

// idleMemory reads the server's memory while its followers idle: RSS,
// peak RSS, live heap and stacks, goroutines, and (runstream's server
// only) the RSS after a collection.
func (s *benchServer) idleMemory(ctx context.Context) (benchResult, error) {
	rss, err := s.memoryMiB("VmRSS")
	if err != nil {
		return benchResult{}, err
	}
	peak, err := s.memoryMiB("VmHWM")
	if err != nil {
		return benchResult{}, err
	}
	if s.peer != "" {
		// Only runstream's bench server tells its Go memory figures.
		return benchResult{RSSMiB: rss, PeakMiB: peak}, nil
	}
	var ms struct {
		HeapInuse  float64 `json:"heap_inuse"`
		StackInuse float64 `json:"stack_inuse"`
		Goroutines int     `json:"goroutines"`
	}
	if err := s.getJSON(ctx, "/bench/memstats", &ms); err != nil {
		return benchResult{}, err
	}
	// What the collection the runtime forces every two minutes leaves: it
	// sets the heap goal from the followers' live heap rather than from
	// the heap of their connecting, and the scavenger returns the rest.
	if _, err := s.post(ctx, "/bench/gc"); err != nil {
		return benchResult{}, err
	}
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
		return benchResult{}, ctx.Err()
	}
	collected, err := s.memoryMiB("VmRSS")
	if err != nil {
		return benchResult{}, err
	}
	return benchResult{RSSMiB: rss, PeakMiB: peak, HeapMiB: ms.HeapInuse / (1 << 20), StackMiB: ms.StackInuse / (1 << 20), Goroutines: ms.Goroutines,
		CollectedMiB: collected}, nil
}

// memoryMiB reads a memory figure of the server process from
// /proc/PID/status: VmRSS, its resident set size, or VmHWM, the peak of it.
func (s *benchServer) memoryMiB(field string) (float64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc status", field)
}

// follow opens a stream of runID after cursor and calls onFrame with each
// frame's data line until the terminal event. ready is closed once the
// response headers arrived.
func (s *benchServer) follow(ctx context.Context, runID string, after int64, ready func(), onFrame func(data []byte)) (int64, error) {
	resp, err := openBenchStream(ctx, fmt.Sprintf("%s/api/workflows/runs/%s/stream?after=%d", s.url, runID, after), nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	ready()
	// A light reader: the load generator shares the machine with the
	// server, so it only splits lines and looks at ids, event names and
	// data, and checks that ids arrive in order without gaps.
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var frames, lastID int64
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if err == io.EOF {
				return frames, nil
			}
			return frames, err
		}
		switch {
		case bytes.HasPrefix(line, []byte("id: ")):
			id, err := strconv.ParseInt(string(bytes.TrimSpace(line[4:])), 10, 64)
			if err != nil || (lastID != 0 && id != lastID+1) {
				return frames, fmt.Errorf("frame id %q after %d: out of order", bytes.TrimSpace(line), lastID)
			}
			lastID = id
			frames++
		case bytes.HasPrefix(line, []byte("data: ")):
			if onFrame != nil {
				onFrame(line[6:])
			}
		case bytes.HasPrefix(line, []byte("event: run.completed")):
			return frames, nil
		}
	}
}

var benchClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 10000, MaxConnsPerHost: 0, DisableCompression: true}}

// appendTime extracts the producer's timestamp from a delta frame.
func appendTime(data []byte) (time.Time, bool) {
	i := bytes.Index(data, []byte(`"delta":"`))
	if i < 0 {
		return time.Time{}, false
	}
	rest := data[i+len(`"delta":"`):]
	end := bytes.IndexByte(rest, ' ')
	if end < 0 {
		return time.Time{}, false
	}
	ns, err := strconv.ParseInt(string(rest[:end]), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}

// startFollowers opens n followers and waits until all are connected.
func startFollowers(ctx context.Context, srv *benchServer, runID string, n int, onFrame func(i int) func([]byte)) (wait func() (int64, error)) {
	var wg sync.WaitGroup
	var ready sync.WaitGroup
	var delivered atomic.Int64
	errs := make(chan error, n)
	ready.Add(n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			once := sync.OnceFunc(ready.Done)
			defer once()
			var cb func([]byte)
			if onFrame != nil {
				cb = onFrame(i)
			}
			frames, err := srv.follow(ctx, runID, 0, once, cb)
			delivered.Add(frames)
			if err != nil {
				errs <- err
			}
		}()
	}
	ready.Wait()
	return func() (int64, error) {
		wg.Wait()
		close(errs)
		return delivered.Load(), <-errs
	}
}

func benchLatency(ctx context.Context, srv *benchServer, cfg benchConfig) (benchResult, error) {
	runID, err := srv.createRun(ctx)
	if err != nil {
		return benchResult{}, err
	}
	lat := make([][]time.Duration, cfg.followers)
	wait := startFollowers(ctx, srv, runID, cfg.followers, func(i int) func([]byte) {
		lat[i] = make([]time.Duration, 0, cfg.events)
		return func(data []byte) {
			if at, ok := appendTime(data); ok {
				lat[i] = append(lat[i], time.Since(at))
			}
		}
	})
	start := time.Now()
	if err := srv.produce(ctx, runID, cfg.events, cfg.rate, 1, cfg.eventBytes, cfg.concurrency); err != nil {
		return benchResult{}, err
	}
	delivered, err := wait()
	if err != nil {
		return benchResult{}, err
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	if len(all) != cfg.events*cfg.followers {
		return benchResult{}, fmt.Errorf("measured %d deliveries, want %d", len(all), cfg.events*cfg.followers)
	}
	slices.Sort(all)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return benchResult{
		Events: cfg.events, Delivered: delivered, Seconds: time.Since(start).Seconds(),
		P50Millis: ms(all[len(all)/2]), P99Millis: ms(all[len(all)*99/100]), MaxMillis: ms(all[len(all)-1]),
	}, nil
}

func benchSaturation(ctx context.Context, srv *benchServer, cfg benchConfig) (benchResult, error) {
	runID, err := srv.createRun(ctx)
	if err != nil {
		return benchResult{}, err
	}
	wait := startFollowers(ctx, srv, runID, cfg.followers, nil)
	start := time.Now()
	if err := srv.produce(ctx, runID, cfg.events, 0, cfg.batch, cfg.eventBytes, 1); err != nil {
		return benchResult{}, err
	}
	appendDone := time.Since(start)
	delivered, err := wait()
	if err != nil {
		return benchResult{}, err
	}
	elapsed := time.Since(start)
	return benchResult{Events: cfg.events, Delivered: delivered, Seconds: elapsed.Seconds(),
		PerSecond: float64(delivered) / elapsed.Seconds(), AppendSeconds: appendDone.Seconds()}, nil
}

func benchReplay(ctx context.Context, srv *benchServer, cfg benchConfig) (benchResult, error) {
	runID, err := srv.createRun(ctx)
	if err != nil {
		return benchResult{}, err
	}
	if err := srv.produce(ctx, runID, cfg.events, 0, max(cfg.batch, 1000), cfg.eventBytes, 1); err != nil {
		return benchResult{}, err
	}
	start := time.Now()
	frames, err := srv.follow(ctx, runID, 0, func() {}, nil)
	if err != nil {
		return benchResult{}, err
	}
	elapsed := time.Since(start)
	return benchResult{Followers: 1, Events: cfg.events, Delivered: frames, Seconds: elapsed.Seconds(), PerSecond: float64(frames) / elapsed.Seconds()}, nil
}

func benchIdle(ctx context.Context, srv *benchServer, cfg benchConfig) (benchResult, error) {
	runID, err := srv.createRun(ctx)
	if err != nil {
		return benchResult{}, err
	}
	baseline, err := srv.memoryMiB("VmRSS")
	if err != nil {
		return benchResult{}, err
	}
	start := time.Now()
	wait := startFollowers(ctx, srv, runID, cfg.followers, nil)
	time.Sleep(cfg.settle) // let every stream settle into its idle wait
	res, err := srv.idleMemory(ctx)
	if err != nil {
		return benchResult{}, err
	}
	if err := srv.produce(ctx, runID, 0, 0, 1, 0, 1); err != nil { // completes the run, closing every stream
		return benchResult{}, err
	}
	delivered, err := wait()
	if err != nil {
		return benchResult{}, err
	}
	res.Delivered, res.Seconds, res.BaselineMiB = delivered, time.Since(start).Seconds(), baseline
	return res, nil
}
