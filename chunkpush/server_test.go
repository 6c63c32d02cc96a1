package chunkpush_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runstream/runstream/chunkpush"
	"github.com/runstream/runstream/httpapi"
	"github.com/runstream/runstream/langgraph"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runchunks"
)

// realServer is runstream's push API (package langgraph over memory
// stores, mounted on httpapi as serve does) on a test listener. restart
// shuts the service down and serves the same stores with a new one, as a
// restarted instance would.
type realServer struct {
	url   string
	runs  *memory.RunStore
	store runchunks.Store
	cfg   langgraph.Config

	current atomic.Pointer[instance]
	// controlRequests counts every control long-poll request served.
	controlRequests atomic.Int64

	mu    sync.Mutex
	stops []func()
}

func newRealServer(t testing.TB, cfg langgraph.Config) *realServer {
	t.Helper()
	runs := memory.NewRunStore()
	s := &realServer{runs: runs, store: memory.NewChunkStore(runs), cfg: cfg}
	s.restart()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in := s.current.Load()
		if strings.HasSuffix(r.URL.Path, "/stream-control") {
			in.polls.Add(1)
			defer in.polls.Add(-1)
			s.controlRequests.Add(1)
		}
		in.h.ServeHTTP(w, r)
	}))
	s.url = srv.URL
	t.Cleanup(func() {
		s.mu.Lock()
		stops := s.stops
		s.mu.Unlock()
		for _, stop := range stops {
			stop()
		}
		srv.Close()
	})
	return s
}

// instance is one service's handler, with the control long-polls it
// serves now.
type instance struct {
	h     http.Handler
	polls atomic.Int64
}

// restart shuts down the service serving now, if any (its streams abort,
// its long-polls answer 503), serves the stores with a new one, and
// returns the old instance.
func (s *realServer) restart() *instance {
	hub := live.New(live.Config{Poll: langgraph.Poller(s.store, nil)})
	ctx, cancel := context.WithCancel(context.Background())
	go hub.Run(ctx)
	svc := langgraph.New(s.store, hub, s.cfg)
	api := httpapi.New(httpapi.Config{Authenticate: func(*http.Request) (string, error) { return "local", nil }}, nil, nil)
	svc.Mount(langgraph.HTTP{Mount: api.Mount, User: httpapi.User, WriteError: api.WriteError, Kit: httpapi.ThreadKit(), AcquireStream: api.AcquireStream})
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.stops); n > 0 {
		s.stops[n-1]() // the old service: Shutdown, then its hub
	}
	old := s.current.Swap(&instance{h: api})
	s.stops = append(s.stops, func() {
		svc.Shutdown()
		cancel()
	})
	return old
}

func (s *realServer) numbers(t testing.TB, run string) []int {
	t.Helper()
	chunks, err := s.store.ReadChunks(context.Background(), run, -1, 10_000, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int, len(chunks))
	for i, c := range chunks {
		var v struct{ N int }
		if c.Index != int64(i) || c.Event != "custom" || json.Unmarshal(c.Data, &v) != nil {
			t.Fatalf("chunk %d: %+v", i, c)
		}
		out[i] = v.N
	}
	return out
}

func realConfig(s *realServer, run string) chunkpush.Config {
	return chunkpush.Config{URL: s.url, ThreadID: "thread-1", RunID: run, Linger: time.Millisecond, MaxBatchChunks: 16, ControlWait: time.Minute}
}

// Against the real server: batches land contiguous and the end sets the
// run's status; a cancel request made on the cancel endpoint reaches the
// producer through the long-poll; a takeover with epoch 2 fences epoch 1.
// After a cancel reached the producer, the control long-poll waits again
// (cancel_seen) instead of answering the same pending cancel at once, in
// a loop, until the producer ends the run.
func TestDeliveredCancelDoesNotSpinThePoll(t *testing.T) {
	s := newRealServer(t, langgraph.Config{})
	p := open(t, realConfig(s, "run-s"))
	pushN(t, p, 0, 2)
	resp, err := http.Post(s.url+"/api/threads/thread-1/runs/run-s/cancel?action=interrupt", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case <-p.Cancels():
	case <-time.After(30 * time.Second):
		t.Fatal("no cancel from the long-poll")
	}
	before := s.controlRequests.Load()
	time.Sleep(500 * time.Millisecond) // the producer finishing its step
	if n := s.controlRequests.Load() - before; n > 2 {
		t.Errorf("%d control polls in the 500 ms after the cancel was delivered, want at most 2", n)
	}
	if ans := end(t, p, chunkpush.StatusInterrupted); ans.Status != "interrupted" {
		t.Fatalf("end answer %+v", ans)
	}
}

func TestRealServer(t *testing.T) {
	s := newRealServer(t, langgraph.Config{})
	p := open(t, realConfig(s, "run-a"))
	pushN(t, p, 0, 200)
	if ans := end(t, p, chunkpush.StatusSuccess); ans.Status != "success" || ans.NextIndex != 200 {
		t.Fatalf("end answer %+v", ans)
	}
	if got := s.numbers(t, "run-a"); !slices.Equal(got, seq(0, 200)) {
		t.Fatalf("stored %v", got)
	}

	p = open(t, realConfig(s, "run-b"))
	pushN(t, p, 0, 3)
	resp, err := http.Post(s.url+"/api/threads/thread-1/runs/run-b/cancel?action=interrupt", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: %d", resp.StatusCode)
	}
	select {
	case c := <-p.Cancels():
		if c.Action != "interrupt" {
			t.Fatalf("cancel %+v", c)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no cancel from the long-poll")
	}
	if ans := end(t, p, chunkpush.StatusInterrupted); ans.Status != "interrupted" {
		t.Fatalf("end answer %+v", ans)
	}

	first := open(t, realConfig(s, "run-c"))
	pushN(t, first, 0, 10)
	for deadline := time.Now().Add(30 * time.Second); first.Last().NextIndex < 10; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the 10 chunks were not acknowledged")
		}
	}
	cfg := realConfig(s, "run-c")
	cfg.Epoch = 2
	second := open(t, cfg)
	if next := second.NextIndex(); next != 10 {
		t.Fatalf("the takeover starts at %d, want 10", next)
	}
	pushN(t, first, 10, 11)
	if _, err := first.End(context.Background(), chunkpush.StatusSuccess, nil); !errors.Is(err, chunkpush.ErrFenced) {
		t.Fatalf("the stale worker's end: %v", err)
	}
	end(t, second, chunkpush.StatusSuccess)
	if run, err := s.store.GetRun(context.Background(), "run-c"); err != nil || run.Epoch != 2 || run.Status != "success" {
		t.Fatalf("run %+v, %v", run, err)
	}
}

// A control long-poll pending when the server shuts down ends at once
// (503 with Retry-After), and the producer polls again, on the restarted
// server, which hands it a cancel request made there. The poll's wait is
// an hour: had Shutdown left it pending, it would still be.
func TestControlPollAcrossShutdown(t *testing.T) {
	s := newRealServer(t, langgraph.Config{ControlMax: 2 * time.Hour})
	cfg := realConfig(s, "run-d")
	cfg.ControlWait = time.Hour
	p := open(t, cfg)
	pushN(t, p, 0, 3)
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal(what)
			}
		}
	}
	first := s.current.Load()
	waitFor("the producer's long-poll did not reach the server", func() bool { return first.polls.Load() > 0 })
	s.restart()
	waitFor("the long-poll pending at the shutdown did not end", func() bool { return first.polls.Load() == 0 })
	resp, err := http.Post(s.url+"/api/threads/thread-1/runs/run-d/cancel?action=rollback", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel on the restarted server: %d", resp.StatusCode)
	}
	select {
	case c := <-p.Cancels():
		if c.Action != "rollback" {
			t.Fatalf("cancel %+v", c)
		}
	case <-time.After(time.Minute):
		t.Fatal("the producer did not poll the restarted server")
	}
	if ans := end(t, p, chunkpush.StatusInterrupted); ans.Status != "interrupted" || ans.NextIndex != 3 {
		t.Fatalf("end answer %+v", ans)
	}
}

// An end with an error object: the server writes the error chunk itself,
// one past the producer's, and the producer's End succeeds.
func TestEndWithErrorOnTheServer(t *testing.T) {
	s := newRealServer(t, langgraph.Config{})
	p := open(t, realConfig(s, "run-e"))
	pushN(t, p, 0, 3)
	ans, err := p.End(context.Background(), chunkpush.StatusError, &chunkpush.RunError{Message: "boom", Name: "RuntimeError"})
	if err != nil || ans.Status != "error" || ans.NextIndex != 4 {
		t.Fatalf("End with an error: %+v, %v; want status error, next_index 4 (3 chunks and the server's error chunk), no error", ans, err)
	}
	if err := p.Err(); err != nil {
		t.Errorf("the stream's error after End: %v", err)
	}
}

// A chunk larger than the server takes is refused by Push, and the Stream
// goes on: before, Push queued it, the server's 413 ended the Stream, and
// every later chunk and the end were lost.
func TestTooLargeChunkIsRefusedByPush(t *testing.T) {
	s := newRealServer(t, langgraph.Config{})
	p := open(t, realConfig(s, "run-big"))
	big := json.RawMessage(`"` + strings.Repeat("x", chunkpush.DefaultMaxChunkBytes) + `"`)
	if _, err := p.Push(context.Background(), "values", big); !errors.Is(err, chunkpush.ErrChunkTooLarge) {
		t.Fatalf("Push of a %d-byte chunk: %v, want ErrChunkTooLarge", len(big), err)
	}
	pushN(t, p, 0, 2)
	if ans := end(t, p, chunkpush.StatusSuccess); ans.Status != "success" || ans.NextIndex != 2 {
		t.Fatalf("end after the refused chunk: %+v", ans)
	}
}

// The client's defaults are the server's limits: a chunk chunkpush lets
// through by default is one every server accepts, and a server's safe
// lease is twice the silence after which chunkpush renews its lease.
func TestDefaultsMatchTheServer(t *testing.T) {
	if chunkpush.DefaultMaxChunkBytes != langgraph.MinMaxChunkBytes {
		t.Errorf("chunkpush.DefaultMaxChunkBytes %d, the server's least limit langgraph.MinMaxChunkBytes %d", chunkpush.DefaultMaxChunkBytes, langgraph.MinMaxChunkBytes)
	}
	if langgraph.SafeLease != 2*chunkpush.DefaultHeartbeat {
		t.Errorf("langgraph.SafeLease %v, want twice chunkpush.DefaultHeartbeat %v", langgraph.SafeLease, chunkpush.DefaultHeartbeat)
	}
}
