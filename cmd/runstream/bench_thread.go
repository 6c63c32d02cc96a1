package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The thread scenarios of "runstream bench" take the path of an agent
// product: producers POST events to /api/threads/{t}/runs/{r}/events from
// the load generator, and followers read /api/threads/{t}/stream.
//
//	thread-latency     F followers; events POSTed at R/s, C requests in
//	                   flight: achieved publish rate, delivered frames/s,
//	                   append→delivery p50/p99, server CPU per 1,000 frames
//	thread-saturation  the same with events POSTed as fast as possible
//	thread-ingest      thread-saturation without followers: events/s stored
//	thread-replay      N stored events, then one follower from cursor 0
//	thread-idle        F followers of a silent thread: the server's RSS
//
// Events go round robin to --threads threads and, within a thread, to
// --runs runs; followers are spread over the threads, and with
// --run-filter each follows one run (?run_id=). With --instances 2 the
// followers read from a second server on the same store (PostgreSQL).
// With --cuts N, thread-latency and thread-saturation followers each drop
// their connection N times and resume from the last event they read, all
// at about the same moment (a reconnection storm); the ids they read must
// still increase and their count match, so a gap or a duplicate fails
// the run. With --stalled-followers N, thread-latency and thread-saturation run
// twice, the second time with N followers that never read
// (bench_stalled.go): the POST latency of both runs, their p99 ratio and
// the stalled followers the server cut.

// threadEventType is the type of the benchmark's events: a trace row
// whose content carries the time its POST began.
const threadEventType = "run.start"

// threadPlan is where the events of a thread scenario go.
type threadPlan struct {
	prefix    string // of the thread ids, unique per invocation
	threads   int
	runs      int
	runFilter bool
}

func (p threadPlan) thread(i int) string { return fmt.Sprintf("%s_%d", p.prefix, i) }
func (p threadPlan) run(i int) string    { return fmt.Sprintf("r%d", i) }

// target returns the thread and run of the k-th POST.
func (p threadPlan) target(k int) (thread, run int) { return k % p.threads, (k / p.threads) % p.runs }

// follows returns the thread of follower i and its run filter (-1: none).
func (p threadPlan) follows(i int) (thread, run int) {
	thread = i % p.threads
	if !p.runFilter {
		return thread, -1
	}
	return thread, (i / p.threads) % p.runs
}

// expected returns how many events follower i receives when posts POSTs
// of batch events each are made.
func (p threadPlan) expected(i, posts, batch, events int) int {
	thread, run := p.follows(i)
	n := 0
	for k := range posts {
		t, r := p.target(k)
		if t == thread && (run < 0 || r == run) {
			n += min(batch, events-k*batch)
		}
	}
	return n
}

// threadEventsBody renders a POST body of n events whose content holds
// the time now and is padded to about size bytes with the metadata.
func threadEventsBody(n, size int, now time.Time) []byte {
	ns := strconv.FormatInt(now.UnixNano(), 10)
	pad := benchPad(size, ns)
	var b bytes.Buffer
	b.WriteString(`{"events":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"event_type":"` + threadEventType + `","content":{"chain":"` + ns + " " + pad + `"},"metadata":{"caller":"bench"}}`)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// postThreadEvents POSTs body to a run of a thread on the server at url.
func postThreadEvents(ctx context.Context, url, thread, run string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/api/threads/"+thread+"/runs/"+run+"/events", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := benchClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("POST events: %s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// threadAPI is what a thread scenario does with the server it loads:
// runstream's thread API (runstreamThreads), or Centrifugo's, for a
// baseline measured by the same load generator in the same run
// (bench_centrifugo.go).
type threadAPI interface {
	// post publishes n events of about size bytes, stamped with at, to a
	// run of a thread, in one request.
	post(ctx context.Context, thread, run string, n, size int, at time.Time) error
	// follow reads the stream of a thread (of one run when run is not
	// empty) after cursor until it has want events, calling onFrame with
	// each event's data; ready is called once the stream is open. Cursor
	// 0 is the thread's first event. It returns the events read and the
	// cursor of the last (after, when none), from which a follower whose
	// connection ended resumes; each event's cursor must be greater than
	// the one before, so a resumed follower that reads every event once
	// reads exactly the events after its cursor.
	follow(ctx context.Context, thread, run string, after int64, want int, ready func(), onFrame func(data []byte)) (frames, last int64, err error)
}

// runstreamThreads is the thread API of the runstream server at url.
type runstreamThreads struct{ url string }

func (r runstreamThreads) post(ctx context.Context, thread, run string, n, size int, at time.Time) error {
	return postThreadEvents(ctx, r.url, thread, run, threadEventsBody(n, size, at))
}

func (r runstreamThreads) follow(ctx context.Context, thread, run string, after int64, want int, ready func(), onFrame func(data []byte)) (frames, last int64, err error) {
	return followThread(ctx, r.url, thread, run, after, want, ready, onFrame)
}

// seedThreads writes one event to each run of each thread, so that the
// threads exist before their followers open them; each thread's seeds
// are its seqs 1 to runs.
func seedThreads(ctx context.Context, api threadAPI, p threadPlan) error {
	for t := range p.threads {
		for r := range p.runs {
			if err := api.post(ctx, p.thread(t), p.run(r), 1, 0, time.Unix(0, 0)); err != nil {
				return err
			}
		}
	}
	return nil
}

// produceThreadEvents POSTs events events in POSTs of batch events at
// rate events per second (0: as fast as possible), with up to inFlight
// requests at once, to the threads and runs of p. It returns each POST's
// latency, from the start of its request to the end of its response, and
// when it started, from the start of the first.
func produceThreadEvents(ctx context.Context, api threadAPI, p threadPlan, events, batch, size int, rate float64, inFlight int) (lat, began []time.Duration, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slots := make(chan struct{}, max(inFlight, 1))
	var (
		wg     sync.WaitGroup
		failed atomic.Pointer[error]
	)
	batch = max(batch, 1)
	lat = make([]time.Duration, (events+batch-1)/batch)
	began = make([]time.Duration, len(lat))
	start := time.Now()
	for k, sent := 0, 0; sent < events && failed.Load() == nil; k++ {
		n := min(batch, events-sent)
		if rate > 0 {
			if d := time.Until(start.Add(time.Duration(float64(sent) / rate * float64(time.Second)))); d > 0 {
				time.Sleep(d)
			}
		}
		slots <- struct{}{}
		thread, run := p.target(k)
		wg.Go(func() {
			defer func() { <-slots }()
			at := time.Now()
			began[k] = at.Sub(start)
			if err := api.post(ctx, p.thread(thread), p.run(run), n, size, at); err != nil {
				if failed.CompareAndSwap(nil, &err) {
					cancel()
				}
			}
			lat[k] = time.Since(at)
		})
		sent += n
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return nil, nil, *err
	}
	return lat, began, nil
}

// followThread reads the stream of a thread (of one run when run is not
// empty) after cursor until it has want frames, calling onFrame with each
// frame's data line; ready is called once the headers arrived. A cursor
// other than 0 is sent as Last-Event-ID, as a browser's EventSource
// resumes. Frame ids must increase from the cursor on; it returns the
// frames read and the id of the last.
func followThread(ctx context.Context, url, thread, run string, after int64, want int, ready func(), onFrame func(data []byte)) (frames, last int64, err error) {
	target := fmt.Sprintf("%s/api/threads/%s/stream", url, thread)
	if run != "" {
		target += "?run_id=" + run
	}
	header := http.Header{}
	if after > 0 {
		header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	}
	resp, err := openBenchStream(ctx, target, header)
	if err != nil {
		return 0, after, err
	}
	defer resp.Body.Close()
	ready()
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	last = after
	for frames < int64(want) {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return frames, last, fmt.Errorf("thread stream ended after %d of %d frames: %w", frames, want, err)
		}
		switch {
		case bytes.HasPrefix(line, []byte("id: ")):
			id, err := strconv.ParseInt(string(bytes.TrimSpace(line[4:])), 10, 64)
			if err != nil || id <= last {
				return frames, last, fmt.Errorf("frame id %q after %d: out of order or repeated", bytes.TrimSpace(line), last)
			}
			last = id
		case bytes.HasPrefix(line, []byte("data: ")):
			frames++
			if onFrame != nil {
				onFrame(line[6:])
			}
		}
	}
	return frames, last, nil
}

// chainTime extracts the producer's timestamp from a thread frame's data.
func chainTime(data []byte) (time.Time, bool) {
	i := bytes.Index(data, []byte(`"chain":"`))
	if i < 0 {
		return time.Time{}, false
	}
	rest := data[i+len(`"chain":"`):]
	end := bytes.IndexByte(rest, ' ')
	if end < 0 {
		return time.Time{}, false
	}
	ns, err := strconv.ParseInt(string(rest[:end]), 10, 64)
	if err != nil || ns == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}

// processCPU returns the CPU time (user and system) the process pid has
// used, from /proc/PID/stat, in clock ticks of 10 ms.
func processCPU(pid int) (time.Duration, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(utime+stime) * tick, nil
}

// serversCPU sums the CPU time of the servers.
func serversCPU(servers []*benchServer) (time.Duration, error) {
	var total time.Duration
	for _, s := range servers {
		cpu, err := processCPU(s.cmd.Process.Pid)
		if err != nil {
			return 0, err
		}
		total += cpu
	}
	return total, nil
}

// benchThread runs thread-latency, thread-saturation and thread-ingest:
// servers[0] takes the POSTs, the last server the followers, and stalled
// followers that never read (bench_stalled.go).
func benchThread(ctx context.Context, servers []*benchServer, cfg benchConfig, rate float64, followers, stalled int) (benchResult, error) {
	p := threadPlan{prefix: fmt.Sprintf("bt%d", time.Now().UnixNano()), threads: max(cfg.threads, 1), runs: max(cfg.runs, 1), runFilter: cfg.runFilter}
	producer, reader := servers[0], servers[len(servers)-1]
	if err := seedThreads(ctx, producer.threads, p); err != nil {
		return benchResult{}, err
	}
	batch := max(cfg.batch, 1)
	posts := (cfg.events + batch - 1) / batch

	lat := make([][]time.Duration, followers)
	resumes := make([][]time.Duration, followers) // from a cut to the new stream's headers
	var (
		wg, ready sync.WaitGroup
		delivered atomic.Int64
		errs      = make(chan error, followers)
	)
	ready.Add(followers)
	for i := range followers {
		thread, run := p.follows(i)
		runID := ""
		if run >= 0 {
			runID = p.run(run)
		}
		want := p.expected(i, posts, batch, cfg.events)
		lat[i] = make([]time.Duration, 0, want)
		wg.Go(func() {
			once := sync.OnceFunc(ready.Done)
			defer once()
			onFrame := func(data []byte) {
				if at, ok := chainTime(data); ok {
					lat[i] = append(lat[i], time.Since(at))
				}
			}
			// With --cuts, the follower drops its connection after each
			// (cuts+1)-th of its events and resumes after the last it read:
			// every follower of a thread reads the same events at about
			// the same time, so they all reconnect at once.
			after := int64(p.runs)
			for part := range cfg.cuts + 1 {
				n := want*(part+1)/(cfg.cuts+1) - want*part/(cfg.cuts+1)
				open := once
				if part > 0 {
					cut := time.Now()
					open = func() { resumes[i] = append(resumes[i], time.Since(cut)) }
				}
				frames, last, err := reader.threads.follow(ctx, p.thread(thread), runID, after, n, open, onFrame)
				delivered.Add(frames)
				if err != nil {
					errs <- err
					return
				}
				after = last
			}
		})
	}
	ready.Wait()
	var (
		stalledFollowers []*stalledFollower
		stalledAt        time.Time
	)
	if stalled > 0 {
		var err error
		if stalledFollowers, err = openStalled(ctx, reader.url, p, stalled, cfg.stalledRcvbuf, int64(p.runs)); err != nil {
			return benchResult{}, err
		}
		defer closeStalled(stalledFollowers)
		stalledAt = time.Now()
	}

	commits0, err := producer.groupCommits(ctx)
	if err != nil {
		return benchResult{}, err
	}
	cpu0, err := serversCPU(servers)
	if err != nil {
		return benchResult{}, err
	}
	profiled := make(chan error, 1)
	go func() { profiled <- producer.profile(ctx, cfg) }()
	start := time.Now()
	postLat, postBegan, err := produceThreadEvents(ctx, producer.threads, p, cfg.events, batch, cfg.eventBytes, rate, cfg.concurrency)
	if err != nil {
		return benchResult{}, err
	}
	published := time.Since(start)
	if err := <-profiled; err != nil {
		return benchResult{}, err
	}
	commits1, err := producer.groupCommits(ctx)
	if err != nil {
		return benchResult{}, err
	}
	// Every frame is on its way once the last POST is answered: give the
	// followers a bounded time to read them.
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		return benchResult{}, fmt.Errorf("%d frames delivered 60 s after the last POST, want every event to every follower", delivered.Load())
	}
	elapsed := time.Since(start)
	cpu1, err := serversCPU(servers)
	if err != nil {
		return benchResult{}, err
	}
	close(errs)
	if err := <-errs; err != nil {
		return benchResult{}, err
	}
	rss := 0.0
	for _, s := range servers {
		mib, err := s.memoryMiB("VmRSS")
		if err != nil {
			return benchResult{}, err
		}
		rss += mib
	}

	res := benchResult{
		Events: cfg.events, Followers: followers, Delivered: delivered.Load(), Seconds: elapsed.Seconds(),
		AppendSeconds: published.Seconds(), PublishPerSecond: float64(cfg.events) / published.Seconds(),
		ServerCPUSeconds: (cpu1 - cpu0).Seconds(), RSSMiB: rss,
		Commits: commits1.sub(commits0),
	}
	if len(postLat) > 0 {
		res.PostMaxAtSeconds = postBegan[slowest(postLat)].Seconds()
	}
	res.PostP50Millis, res.PostP99Millis, res.PostMaxMillis = latencyMillis(postLat)
	if stalled > 0 {
		res.StalledConnectedSeconds = stalledAt.Sub(start).Seconds()
		// The server cuts a stalled follower once a write to it missed
		// the write deadline; give it until stalledWait after they
		// connected, then read what each has left: a cut one ends.
		time.Sleep(time.Until(stalledAt.Add(cfg.stalledWait)))
		res.Stalled = stalled
		if res.StalledCut, err = countCut(stalledFollowers, 2*time.Second); err != nil {
			return benchResult{}, fmt.Errorf("stalled followers: %w", err)
		}
	}
	if followers > 0 {
		res.PerSecond = float64(res.Delivered) / elapsed.Seconds()
		res.CPUMillisPer1000 = (cpu1 - cpu0).Seconds() * 1000 / (float64(res.Delivered) / 1000)
		var all []time.Duration
		for _, l := range lat {
			all = append(all, l...)
		}
		if int64(len(all)) != res.Delivered {
			return benchResult{}, fmt.Errorf("measured %d deliveries of %d frames", len(all), res.Delivered)
		}
		res.P50Millis, res.P99Millis, res.MaxMillis = latencyMillis(all)
		if cfg.cuts > 0 {
			var waits []time.Duration
			for _, r := range resumes {
				waits = append(waits, r...)
			}
			res.Cuts, res.Resumes = cfg.cuts, len(waits)
			res.ResumeP50Millis, res.ResumeP99Millis, _ = latencyMillis(waits)
		}
	} else {
		res.PerSecond = res.PublishPerSecond
		res.CPUMillisPer1000 = (cpu1 - cpu0).Seconds() * 1000 / (float64(cfg.events) / 1000)
	}
	return res, nil
}

// benchThreadReplay stores events events in one thread, then reads them
// with one follower from cursor 0.
func benchThreadReplay(ctx context.Context, servers []*benchServer, cfg benchConfig) (benchResult, error) {
	p := threadPlan{prefix: fmt.Sprintf("br%d", time.Now().UnixNano()), threads: 1, runs: 1}
	producer, reader := servers[0], servers[len(servers)-1]
	if _, _, err := produceThreadEvents(ctx, producer.threads, p, cfg.events, max(cfg.batch, 100), cfg.eventBytes, 0, 4); err != nil {
		return benchResult{}, err
	}
	cpu0, err := serversCPU(servers)
	if err != nil {
		return benchResult{}, err
	}
	profiled := make(chan error, 1)
	go func() { profiled <- reader.profile(ctx, cfg) }()
	start := time.Now()
	frames, _, err := reader.threads.follow(ctx, p.thread(0), "", 0, cfg.events, func() {}, nil)
	if err != nil {
		return benchResult{}, err
	}
	elapsed := time.Since(start)
	if err := <-profiled; err != nil {
		return benchResult{}, err
	}
	cpu1, err := serversCPU(servers)
	if err != nil {
		return benchResult{}, err
	}
	return benchResult{Followers: 1, Events: cfg.events, Delivered: frames, Seconds: elapsed.Seconds(), PerSecond: float64(frames) / elapsed.Seconds(),
		ServerCPUSeconds: (cpu1 - cpu0).Seconds(), CPUMillisPer1000: (cpu1 - cpu0).Seconds() * 1000 / (float64(frames) / 1000)}, nil
}

// benchThreadIdle connects followers to one silent thread and reads the
// server's memory once they settled.
func benchThreadIdle(ctx context.Context, servers []*benchServer, cfg benchConfig) (benchResult, error) {
	p := threadPlan{prefix: fmt.Sprintf("bi%d", time.Now().UnixNano()), threads: 1, runs: 1}
	producer, reader := servers[0], servers[len(servers)-1]
	if err := seedThreads(ctx, producer.threads, p); err != nil {
		return benchResult{}, err
	}
	baseline, err := reader.memoryMiB("VmRSS")
	if err != nil {
		return benchResult{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	var wg, ready sync.WaitGroup
	ready.Add(cfg.followers)
	errs := make(chan error, cfg.followers)
	for range cfg.followers {
		wg.Go(func() {
			once := sync.OnceFunc(ready.Done)
			defer once()
			// One frame that never comes: the follower waits until cancelled.
			if _, _, err := reader.threads.follow(ctx, p.thread(0), "", 1, 1, once, nil); err != nil && ctx.Err() == nil {
				errs <- err
			}
		})
	}
	ready.Wait()
	time.Sleep(cfg.settle)
	res, err := reader.idleMemory(ctx)
	if err != nil {
		return benchResult{}, err
	}
	cancel()
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return benchResult{}, err
	}
	res.Seconds, res.BaselineMiB = time.Since(start).Seconds(), baseline
	return res, nil
}

// profile records what cfg asks of the server while the load runs: a CPU
// profile (--cpu-profile) and an execution trace (--trace), each
// cfg.cpuSeconds long.
func (s *benchServer) profile(ctx context.Context, cfg benchConfig) error {
	var wg sync.WaitGroup
	var cpuErr, traceErr error
	if cfg.cpuProfile != "" {
		wg.Go(func() { cpuErr = s.fetchProfile(ctx, "cpu", cfg.cpuProfile, cfg.cpuSeconds) })
	}
	if cfg.trace != "" {
		wg.Go(func() { traceErr = s.fetchProfile(ctx, "trace", cfg.trace, cfg.cpuSeconds) })
	}
	wg.Wait()
	return errors.Join(cpuErr, traceErr)
}

// fetchProfile writes what GET /bench/{kind} records over the next seconds
// seconds of the server to path.
func (s *benchServer) fetchProfile(ctx context.Context, kind, path string, seconds int) error {
	req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/bench/%s?seconds=%d", s.url, kind, seconds), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET /bench/%s: %w", kind, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /bench/%s: %s", kind, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("GET /bench/%s: %w", kind, err)
	}
	return f.Close()
}

// groupCommits is what the store's runstream_store_group_commit_size
// histogram counted: group transactions, and the writes they carried.
type groupCommits struct {
	Count  int64   `json:"count"`
	Writes float64 `json:"writes"`
}

// sub returns the commits of g that were not yet in before.
func (g groupCommits) sub(before groupCommits) groupCommits {
	return groupCommits{Count: g.Count - before.Count, Writes: g.Writes - before.Writes}
}

// groupCommits reads the server's group commits so far from its /metrics;
// zero for a server of another kind (Centrifugo) or a store that does not
// group writes (memory, JSONL).
func (s *benchServer) groupCommits(ctx context.Context) (groupCommits, error) {
	if s.peer != "" {
		return groupCommits{}, nil
	}
	metrics, err := s.call(ctx, "GET", "/metrics")
	if err != nil {
		return groupCommits{}, err
	}
	return parseGroupCommits(bytes.NewReader(metrics))
}

// parseGroupCommits sums, over its labels, the count and sum of the
// group commit histogram in a Prometheus text exposition.
func parseGroupCommits(r io.Reader) (groupCommits, error) {
	const name = "runstream_store_group_commit_size"
	var g groupCommits
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		series, value, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		metric, _, _ := strings.Cut(series, "{")
		if metric != name+"_count" && metric != name+"_sum" {
			continue
		}
		f, err := strconv.ParseFloat(value, 64) // the format writes counts as floats too
		if err != nil {
			return groupCommits{}, fmt.Errorf("metrics: %s: %w", metric, err)
		}
		if metric == name+"_count" {
			g.Count += int64(f)
		} else {
			g.Writes += f
		}
	}
	return g, sc.Err()
}
