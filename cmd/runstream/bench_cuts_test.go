package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestBenchCutsFlag(t *testing.T) {
	for _, args := range [][]string{
		{"--scenario", "thread-latency", "--cuts", "-1"},
		{"--scenario", "thread-ingest", "--cuts", "2"},
		{"--scenario", "thread-replay", "--cuts", "2"},
	} {
		m := &Main{Getenv: func(string) string { return "" }}
		err := m.bench(context.Background(), args, io.Discard, io.Discard)
		if !errors.Is(err, errUsage) {
			t.Errorf("bench %v: %v, want a usage error (before any server starts)", args, err)
		}
	}
}

// TestFollowThreadResumesAfterItsCursor: a resumed follower sends its
// cursor as Last-Event-ID, reads what follows it, and fails on a server
// that sends the cursor's own event again.
func TestFollowThreadResumesAfterItsCursor(t *testing.T) {
	var repeat bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		from, _ := strconv.Atoi(r.Header.Get("Last-Event-ID"))
		if r.URL.Query().Has("after") {
			t.Errorf("cursor sent as ?after=, want Last-Event-ID")
		}
		if repeat {
			from--
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for id := from + 1; id <= from+3; id++ {
			fmt.Fprintf(w, "id: %d\nevent: x\ndata: {\"n\":%d}\n\n", id, id)
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	frames, last, err := followThread(ctx, srv.URL, "th", "", 5, 3, func() {}, nil)
	if err != nil || frames != 3 || last != 8 {
		t.Fatalf("follow from 5: %d frames up to %d, %v; want 3 up to 8", frames, last, err)
	}
	repeat = true
	if _, _, err := followThread(ctx, srv.URL, "th", "", 5, 3, func() {}, nil); err == nil || !strings.Contains(err.Error(), "repeated") {
		t.Errorf("follow from 5 of a server that sends 5 again: %v, want an error", err)
	}
}

// TestBenchThreadCuts runs thread-latency with cuts against a bench server
// in this process: every follower resumes twice and still reads every
// event once, in order.
func TestBenchThreadCuts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	servers, served := serveBench(t, ctx, "memory:")

	const followers, events, cuts = 4, 300, 2
	cfg := benchConfig{events: events, eventBytes: 200, batch: 1, concurrency: 4, threads: 1, runs: 1, cuts: cuts}
	res, err := benchThread(ctx, servers, cfg, 2000, followers, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Delivered != followers*events {
		t.Errorf("delivered %d frames, want %d", res.Delivered, followers*events)
	}
	if res.Cuts != cuts || res.Resumes != followers*cuts {
		t.Errorf("%d cuts, %d resumes; want %d and %d", res.Cuts, res.Resumes, cuts, followers*cuts)
	}
	if res.ResumeP99Millis <= 0 || !strings.Contains(res.String(), "resumes") {
		t.Errorf("resume latency %v ms not measured or reported:\n%s", res.ResumeP99Millis, res)
	}
	cancel()
	if err := <-served; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("bench serve: %v", err)
	}
}

// serveBench runs "bench serve" on the store at storeURL in this process
// until ctx ends, and returns it as the benchmark's one server (its process,
// whose CPU and memory the scenarios read, is this one) and the channel
// that gets benchServe's error once it returned.
func serveBench(t *testing.T, ctx context.Context, storeURL string) ([]*benchServer, <-chan error) {
	t.Helper()
	out, in := io.Pipe()
	served := make(chan error, 1)
	go func() {
		m := &Main{Getenv: func(string) string { return "" }}
		served <- m.benchServe(ctx, []string{"--store", storeURL}, in, io.Discard)
		in.Close()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("bench serve: %v (%v)", err, <-served)
	}
	go io.Copy(io.Discard, out)
	base := strings.TrimSpace(line)
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	return []*benchServer{{url: base, cmd: &exec.Cmd{Process: self}, threads: runstreamThreads{url: base}}}, served
}

// TestBenchThreadIdle runs thread-idle against a bench server in this
// process: it reports the server's memory as its followers idle, and
// again after a collection.
func TestBenchThreadIdle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	servers, served := serveBench(t, ctx, "memory:")
	res, err := benchThreadIdle(ctx, servers, benchConfig{followers: 20, settle: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.RSSMiB <= 0 || res.CollectedMiB <= 0 || res.Goroutines <= 0 {
		t.Errorf("RSS %.1f MiB, after a collection %.1f MiB, %d goroutines: want them measured", res.RSSMiB, res.CollectedMiB, res.Goroutines)
	}
	if !strings.Contains(res.String(), "after a collection") {
		t.Errorf("the figure after a collection is not reported:\n%s", res)
	}
	cancel()
	if err := <-served; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("bench serve: %v", err)
	}
}
