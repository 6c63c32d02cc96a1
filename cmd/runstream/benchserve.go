package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/httpapi"
	"github.com/runstream/runstream/workflow"
)

// benchServe runs a server with the benchmark producer endpoints, for
// "runstream bench", which starts it as a child process so that its memory
// is measured apart from the load generator's:
//
//	POST /bench/runs                      create a run; {"runId": …}
//	POST /bench/runs/{run_id}/produce     append events; see produce
//	GET  /bench/memstats                  the Go runtime's memory figures
//	GET  /bench/heap, /bench/cpu          profiles (see heapProfile, cpuProfile)
//	GET  /bench/trace                     an execution trace (see executionTrace)
//	POST /bench/gc                        a garbage collection (see collect)
//
// The producer runs inside the server, as the workflow engine does, and
// writes through the same event log (validate, redact, append, publish).
func (m *Main) benchServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg serveConfig
	fs := flag.NewFlagSet("bench serve", flag.ContinueOnError)
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:0", "address to listen on")
	fs.StringVar(&cfg.store, "store", "memory:", "store URL")
	fs.StringVar(&cfg.sqliteSync, "sqlite-synchronous", "FULL", "SQLite synchronous mode")
	if err := m.parseFlags(fs, args, stderr, "runstream bench serve [flags]"); err != nil {
		return err
	}
	cfg.maxBodyBytes = httpapi.DefaultMaxBodyBytes
	cfg.maxStreamsPerUser = -1 // every follower of the benchmark is the one local user
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := newApp(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer a.close()
	p := &producer{app: a}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /bench/runs", p.createRun)
	mux.HandleFunc("POST /bench/runs/{run_id}/produce", p.produce)
	mux.HandleFunc("GET /bench/memstats", memStats)
	mux.HandleFunc("GET /bench/heap", heapProfile)
	mux.HandleFunc("GET /bench/cpu", cpuProfile)
	mux.HandleFunc("GET /bench/trace", executionTrace)
	mux.HandleFunc("POST /bench/gc", collect)
	mux.Handle("/", a.api)
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	fmt.Fprintf(stdout, "http://%s\n", ln.Addr())
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

type producer struct {
	app  *app
	runs atomic.Int64
}

func (p *producer) createRun(w http.ResponseWriter, r *http.Request) {
	id := fmt.Sprintf("bench_%d_%d", time.Now().UnixNano(), p.runs.Add(1))
	ctx := r.Context()
	wf, v, err := p.app.backend.workflows.CreateWorkflow(ctx, workflow.Workflow{ID: "wf_" + id, OwnerID: httpapi.LocalUser, Name: "bench"},
		workflow.Version{ID: "wv_" + id, Definition: json.RawMessage(`{"name":"bench","nodes":[]}`)})
	if err == nil {
		_, _, err = p.app.log.CreateRun(ctx, workflow.Run{ID: id, WorkflowID: wf.ID, VersionID: v.ID, OwnerID: httpapi.LocalUser, Input: json.RawMessage(`{}`)},
			[]workflow.NewEvent{{Event: workflow.EventRunCreated, Data: json.RawMessage(`{"version":1,"versionId":"` + v.ID + `"}`)}})
	}
	if err != nil {
		http.Error(w, runstream.ErrorMessage(err), httpapi.ErrorStatus(runstream.ErrorCodeOf(err)))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"runId":%q}`, id)
}

// produce appends count node.output.delta events to a run at rate events
// per second (0: as fast as possible) in batches of batch events, then
// run.completed when complete=1. Up to concurrency appends are in flight at
// once (default 1), as when several nodes of a run produce together: a
// store that group-commits then shares one commit among them. Each delta
// starts with the time its append began, in Unix nanoseconds, and is padded
// so the envelope's data has about bytes bytes.
func (p *producer) produce(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	count, _ := strconv.Atoi(q.Get("count"))
	rate, _ := strconv.ParseFloat(q.Get("rate"), 64)
	batch, _ := strconv.Atoi(q.Get("batch"))
	size, _ := strconv.Atoi(q.Get("bytes"))
	concurrency, _ := strconv.Atoi(q.Get("concurrency"))
	batch, concurrency = max(batch, 1), max(concurrency, 1)
	runID := r.PathValue("run_id")
	ctx := r.Context()
	start := time.Now()
	slots := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	for sent := 0; sent < count && failed.Load() == nil; {
		n := min(batch, count-sent)
		if rate > 0 {
			due := start.Add(time.Duration(float64(sent) / rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				time.Sleep(d)
			}
		}
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			now := strconv.FormatInt(time.Now().UnixNano(), 10)
			pad := strings.Repeat("x", max(size-len(`{"channel":"text","delta":""}`)-len(now)-1, 0))
			events := make([]workflow.NewEvent, n)
			for i := range events {
				events[i] = workflow.NewEvent{Event: workflow.EventNodeOutputDelta, NodeID: "writer", NodeRunID: "nr_1",
					Data: json.RawMessage(`{"channel":"text","delta":"` + now + " " + pad + `"}`)}
			}
			if _, err := p.app.log.Append(ctx, workflow.AppendParams{RunID: runID, Events: events}); err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
		sent += n
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		http.Error(w, runstream.ErrorMessage(*err), httpapi.ErrorStatus(runstream.ErrorCodeOf(*err)))
		return
	}
	if q.Get("complete") == "1" {
		if _, err := p.app.log.Append(ctx, workflow.AppendParams{RunID: runID, Events: []workflow.NewEvent{{
			Event: workflow.EventRunCompleted, Data: json.RawMessage(`{"output":null,"artifacts":[]}`),
		}}}); err != nil {
			http.Error(w, runstream.ErrorMessage(err), httpapi.ErrorStatus(runstream.ErrorCodeOf(err)))
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"appended":%d,"seconds":%.3f}`, count, time.Since(start).Seconds())
}

// memStats reports the Go runtime's memory figures, so the idle scenario
// can tell live heap and stacks from what the process has not returned to
// the system yet.
func memStats(w http.ResponseWriter, r *http.Request) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"heap_inuse":%d,"heap_idle":%d,"heap_released":%d,"stack_inuse":%d,"sys":%d,"gc_cycles":%d,"goroutines":%d}`,
		ms.HeapInuse, ms.HeapIdle, ms.HeapReleased, ms.StackInuse, ms.Sys, ms.NumGC, runtime.NumGoroutine())
}

// cpuProfile writes a CPU profile of the next ?seconds= seconds (default 5).
func cpuProfile(w http.ResponseWriter, r *http.Request) {
	record(w, r, pprof.StartCPUProfile, pprof.StopCPUProfile)
}

// executionTrace writes the runtime's execution trace of the next
// ?seconds= seconds (default 5): where goroutines waited for a processor,
// in system calls or on each other (go tool trace -pprof=sched).
func executionTrace(w http.ResponseWriter, r *http.Request) {
	record(w, r, trace.Start, trace.Stop)
}

// record runs start on w, waits ?seconds= seconds (default 5), and runs stop.
func record(w http.ResponseWriter, r *http.Request, start func(io.Writer) error, stop func()) {
	d, err := time.ParseDuration(r.URL.Query().Get("seconds") + "s")
	if err != nil || d <= 0 {
		d = 5 * time.Second
	}
	if err := start(w); err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	time.Sleep(d)
	stop()
}

// collect runs a garbage collection, as the runtime's own periodic one
// (every two minutes) does on an idle server: after it, the runtime's
// scavenger returns to the system what the collection found free and the
// new heap goal does not keep. The scavenger is paced: what it returned a
// second later varies from run to run.
func collect(w http.ResponseWriter, r *http.Request) {
	runtime.GC()
}

// heapProfile writes the heap profile; with ?gc=1 it collects garbage
// first, so that the in-use figures are the live heap of now rather than
// of the last collection.
func heapProfile(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("gc") == "1" {
		runtime.GC()
	}
	pprof.Lookup("heap").WriteTo(w, 0)
}
