package chunkpush_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
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
// stores, mounted on httpapi as serve does) on a test listener.
type realServer struct {
	url   string
	store runchunks.Store
}

func newRealServer(t testing.TB) *realServer {
	t.Helper()
	runs := memory.NewRunStore()
	store := memory.NewChunkStore(runs)
	hub := live.New(live.Config{Poll: langgraph.Poller(store, nil)})
	ctx, cancel := context.WithCancel(context.Background())
	go hub.Run(ctx)
	svc := langgraph.New(store, hub, langgraph.Config{})
	api := httpapi.New(httpapi.Config{Authenticate: func(*http.Request) (string, error) { return "local", nil }}, nil, nil)
	svc.Mount(langgraph.HTTP{Mount: api.Mount, User: httpapi.User, WriteError: api.WriteError, Runs: runs})
	srv := httptest.NewServer(api)
	t.Cleanup(func() {
		svc.Shutdown()
		srv.Close()
		cancel()
	})
	return &realServer{url: srv.URL, store: store}
}

func (s *realServer) numbers(t testing.TB, run string) []int {
	t.Helper()
	chunks, err := s.store.ReadChunks(context.Background(), run, -1, 10_000)
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
func TestRealServer(t *testing.T) {
	s := newRealServer(t)
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
