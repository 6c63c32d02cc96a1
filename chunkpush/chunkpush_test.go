package chunkpush_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream/chunkpush"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func config(f *fakeServer, run string) chunkpush.Config {
	return chunkpush.Config{
		URL: f.srv.URL, ThreadID: "thread-1", RunID: run,
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		Linger: time.Millisecond, ControlWait: -1,
	}
}

func open(t *testing.T, cfg chunkpush.Config) *chunkpush.Stream {
	t.Helper()
	s, err := chunkpush.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// pushN pushes chunks custom {"n": from…to-1} and checks their indexes.
func pushN(t *testing.T, s *chunkpush.Stream, from, to int) {
	t.Helper()
	for n := from; n < to; n++ {
		idx, err := s.Push(context.Background(), "custom", map[string]int{"n": n})
		if err != nil {
			t.Fatalf("push %d: %v", n, err)
		}
		if idx != int64(n) {
			t.Fatalf("push %d got index %d", n, idx)
		}
	}
}

func seq(from, to int) []int {
	var out []int
	for n := from; n < to; n++ {
		out = append(out, n)
	}
	return out
}

func end(t *testing.T, s *chunkpush.Stream, status string) chunkpush.Answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ans, err := s.End(ctx, status, nil)
	if err != nil {
		t.Fatalf("end: %v", err)
	}
	return ans
}

// Chunks travel in batches no larger than MaxBatchChunks, with contiguous
// indexes from 0, and End stores the terminal status with the last ones.
func TestBatchesContiguousEnd(t *testing.T) {
	f := newFakeServer(t)
	cfg := config(f, "run-1")
	cfg.MaxBatchChunks = 16
	s := open(t, cfg)
	pushN(t, s, 0, 500)
	ans := end(t, s, chunkpush.StatusSuccess)
	r := f.run("run-1")
	if got := chunkNumbers(t, r.chunks); !slices.Equal(got, seq(0, 500)) {
		t.Fatalf("stored %v", got)
	}
	if !r.ended || r.status != "success" || ans.Status != "success" || ans.NextIndex != 500 {
		t.Fatalf("run ended=%v status=%q, answer %+v", r.ended, r.status, ans)
	}
	if f.maxBatch > 16 || f.pushes > 500 {
		t.Fatalf("max batch %d, %d pushes", f.maxBatch, f.pushes)
	}
	if _, err := s.Push(context.Background(), "custom", 1); !errors.Is(err, chunkpush.ErrClosed) {
		t.Fatalf("push after end: %v", err)
	}
}

// A large chunk (a values state of 2 MiB) travels alone, above MaxBatchBytes.
func TestLargeChunkAlone(t *testing.T) {
	f := newFakeServer(t)
	cfg := config(f, "run-big")
	cfg.MaxBatchBytes = 1 << 10
	s := open(t, cfg)
	big := make([]byte, 2<<20)
	for i := range big {
		big[i] = 'a'
	}
	if _, err := s.Push(context.Background(), "custom", map[string]any{"n": 0, "blob": string(big)}); err != nil {
		t.Fatal(err)
	}
	pushN(t, s, 1, 3)
	end(t, s, chunkpush.StatusSuccess)
	if got := chunkNumbers(t, f.run("run-big").chunks); !slices.Equal(got, seq(0, 3)) {
		t.Fatalf("stored %v", got)
	}
}

// 503 answers, and answers lost after the server stored the batch, are
// retried with the same indexes: every chunk is stored exactly once.
func TestRetriesAreIdempotent(t *testing.T) {
	f := newFakeServer(t)
	f.before = func(n int, w http.ResponseWriter, r *http.Request) bool {
		if n > 1 && n%4 == 0 {
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"code":"UNAVAILABLE"}`, http.StatusServiceUnavailable)
			return true
		}
		return false
	}
	f.dropAnswer = func(n int) bool { return n > 1 && n%3 == 0 }
	cfg := config(f, "run-2")
	cfg.MaxBatchChunks = 7
	cfg.MaxBackoff = 20 * time.Millisecond // caps Retry-After too
	s := open(t, cfg)
	pushN(t, s, 0, 300)
	end(t, s, chunkpush.StatusSuccess)
	r := f.run("run-2")
	if got := chunkNumbers(t, r.chunks); !slices.Equal(got, seq(0, 300)) {
		t.Fatalf("stored %v", got)
	}
	if !r.ended {
		t.Fatal("not ended")
	}
}

// When the server lost acknowledged chunks (409 with expected_index), the
// stream sends them again from what it keeps; without them it fails with
// ErrGap.
func TestGapResend(t *testing.T) {
	f := newFakeServer(t)
	s := open(t, config(f, "run-3"))
	pushN(t, s, 0, 50)
	f.waitFor("50 chunks", func() bool { return len(f.runs["run-3"].chunks) == 50 })
	f.loseTail("run-3", 20)
	pushN(t, s, 50, 60)
	end(t, s, chunkpush.StatusSuccess)
	if got := chunkNumbers(t, f.run("run-3").chunks); !slices.Equal(got, seq(0, 60)) {
		t.Fatalf("stored %v", got)
	}

	cfg := config(f, "run-4")
	cfg.RetainAcked = 5
	s = open(t, cfg)
	pushN(t, s, 0, 50)
	f.waitFor("50 chunks", func() bool { return len(f.runs["run-4"].chunks) == 50 })
	f.loseTail("run-4", 20)
	pushN(t, s, 50, 51)
	_, err := s.End(context.Background(), chunkpush.StatusSuccess, nil)
	if !errors.Is(err, chunkpush.ErrGap) {
		t.Fatalf("end after an unrecoverable gap: %v", err)
	}
}

// A gap met by the end's push: the lost chunks go again in batches within
// the limits, and the end only after the last of them. Before, the end
// went with the first batch of them, and the run ended short.
func TestGapResendBeforeTheEnd(t *testing.T) {
	f := newFakeServer(t)
	cfg := config(f, "run-g")
	cfg.MaxBatchChunks = 5
	s := open(t, cfg)
	pushN(t, s, 0, 30)
	f.waitFor("30 chunks", func() bool { return len(f.runs["run-g"].chunks) == 30 })
	f.loseTail("run-g", 20)
	if ans := end(t, s, chunkpush.StatusSuccess); ans.NextIndex != 30 {
		t.Fatalf("end answer %+v, want next_index 30", ans)
	}
	if got := chunkNumbers(t, f.run("run-g").chunks); !slices.Equal(got, seq(0, 30)) {
		t.Fatalf("stored %v", got)
	}
}

// A worker with a greater epoch takes the run over: the first worker's next
// push is fenced and it sends nothing more; the second continues at the
// run's next index.
func TestStaleEpochFenced(t *testing.T) {
	f := newFakeServer(t)
	first := open(t, config(f, "run-5"))
	pushN(t, first, 0, 10)
	f.waitFor("10 chunks", func() bool { return len(f.runs["run-5"].chunks) == 10 })

	cfg := config(f, "run-5")
	cfg.Epoch = 2
	second := open(t, cfg)
	if got := second.NextIndex(); got != 10 {
		t.Fatalf("takeover starts at %d, want 10", got)
	}
	if _, err := first.Push(context.Background(), "custom", map[string]int{"n": 99}); err != nil {
		t.Fatal(err) // queued; the fence shows on sending
	}
	_, err := first.End(context.Background(), chunkpush.StatusSuccess, nil)
	if !errors.Is(err, chunkpush.ErrFenced) {
		t.Fatalf("stale worker's end: %v", err)
	}
	if _, err := first.Push(context.Background(), "custom", 1); !errors.Is(err, chunkpush.ErrFenced) {
		t.Fatalf("push after fencing: %v", err)
	}
	for n := 10; n < 15; n++ {
		if _, err := second.Push(context.Background(), "custom", map[string]int{"n": n}); err != nil {
			t.Fatal(err)
		}
	}
	end(t, second, chunkpush.StatusSuccess)
	if got := chunkNumbers(t, f.run("run-5").chunks); !slices.Equal(got, seq(0, 15)) {
		t.Fatalf("stored %v", got)
	}
}

// A cancel request reaches the producer once through the control
// long-poll while it pushes nothing, and the run ends interrupted.
func TestCancelLongPoll(t *testing.T) {
	f := newFakeServer(t)
	cfg := config(f, "run-6")
	cfg.ControlWait = time.Minute
	s := open(t, cfg)
	pushN(t, s, 0, 3)
	f.waitFor("3 chunks", func() bool { return len(f.runs["run-6"].chunks) == 3 })
	f.requestCancel("run-6", "interrupt")
	select {
	case c := <-s.Cancels():
		if c.Action != "interrupt" || c.RequestedAt.IsZero() {
			t.Fatalf("cancel %+v", c)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no cancel from the long-poll")
	}
	ans := end(t, s, chunkpush.StatusInterrupted)
	if ans.Status != "interrupted" || f.run("run-6").status != "interrupted" {
		t.Fatalf("answer %+v", ans)
	}
	select {
	case c := <-s.Cancels():
		t.Fatalf("the cancel came twice: %+v", c)
	default:
	}
}

// Without the long-poll, a cancel request arrives in the next push answer.
// Against a server that answers a pending cancel at once whatever
// cancel_seen says (the fake, as servers before cancel_seen), the poll
// goes at the heartbeat's pace once it has the cancel, not in a loop.
func TestCancelPollPacedOnAServerWithoutCancelSeen(t *testing.T) {
	f := newFakeServer(t)
	cfg := config(f, "run-p")
	cfg.ControlWait = time.Minute
	s := open(t, cfg)
	f.requestCancel("run-p", "interrupt")
	select {
	case <-s.Cancels():
	case <-time.After(20 * time.Second):
		t.Fatal("no cancel from the long-poll")
	}
	f.mu.Lock()
	before := f.polls
	f.mu.Unlock()
	time.Sleep(500 * time.Millisecond)
	f.mu.Lock()
	n := f.polls - before
	f.mu.Unlock()
	if n > 2 {
		t.Errorf("%d control polls in the 500 ms after the cancel was delivered, want at most 2", n)
	}
	end(t, s, chunkpush.StatusInterrupted)
}

func TestCancelInPushAnswer(t *testing.T) {
	f := newFakeServer(t)
	s := open(t, config(f, "run-7"))
	f.requestCancel("run-7", "rollback")
	pushN(t, s, 0, 1)
	select {
	case c := <-s.Cancels():
		if c.Action != "rollback" {
			t.Fatalf("cancel %+v", c)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no cancel from the push answer")
	}
	end(t, s, chunkpush.StatusInterrupted)
}

// An idle stream renews the run's lease with empty pushes.
func TestHeartbeat(t *testing.T) {
	f := newFakeServer(t)
	cfg := config(f, "run-8")
	cfg.Heartbeat = 5 * time.Millisecond
	s := open(t, cfg)
	f.waitFor("two heartbeats after the opening push", func() bool { return f.empty >= 3 })
	end(t, s, chunkpush.StatusSuccess)
}

// A final answer (400) fails the stream: Push and End report it.
func TestFinalAnswerFails(t *testing.T) {
	f := newFakeServer(t)
	s := open(t, config(f, "run-9"))
	f.mu.Lock()
	f.before = func(n int, w http.ResponseWriter, r *http.Request) bool {
		writeJSON(w, http.StatusBadRequest, map[string]any{"code": "INVALID_ARGUMENT", "message": "chunk 0: data is not JSON"})
		return true
	}
	f.mu.Unlock()
	pushN(t, s, 0, 1)
	_, err := s.End(context.Background(), chunkpush.StatusError, &chunkpush.RunError{Message: "boom", Name: "RuntimeError"})
	var apiErr *chunkpush.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || apiErr.Code != "INVALID_ARGUMENT" {
		t.Fatalf("end: %v", err)
	}
	if _, err := s.Push(context.Background(), "custom", 1); !errors.As(err, &apiErr) {
		t.Fatalf("push after failure: %v", err)
	}
}

// Push blocks while MaxPending chunks wait for acknowledgement.
func TestBackPressure(t *testing.T) {
	f := newFakeServer(t)
	s := open(t, func() chunkpush.Config { c := config(f, "run-10"); c.MaxPending = 2; return c }())
	hold := make(chan struct{})
	f.mu.Lock()
	f.hold = hold
	f.mu.Unlock()
	pushN(t, s, 0, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.Push(ctx, "custom", map[string]int{"n": 2}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("push beyond MaxPending: %v", err)
	}
	close(hold)
	pushN(t, s, 2, 3)
	end(t, s, chunkpush.StatusSuccess)
	if got := chunkNumbers(t, f.run("run-10").chunks); !slices.Equal(got, seq(0, 3)) {
		t.Fatalf("stored %v", got)
	}
}

// Open refuses a config without a run or with a bad URL, and a run that
// ended; End refuses a status that is not terminal.
func TestInvalidUse(t *testing.T) {
	if _, err := chunkpush.Open(context.Background(), chunkpush.Config{URL: "127.0.0.1:1", ThreadID: "t", RunID: "r"}); err == nil {
		t.Fatal("a URL without scheme was accepted")
	}
	for _, u := range []string{"ftp://user:s3cret-pw@127.0.0.1:1", "user:s3cret-pw@127.0.0.1:1"} {
		_, err := chunkpush.Open(context.Background(), chunkpush.Config{URL: u, ThreadID: "t", RunID: "r"})
		if err == nil || strings.Contains(err.Error(), "s3cret-pw") {
			t.Fatalf("a URL with a password: %v", err)
		}
	}
	if _, err := chunkpush.Open(context.Background(), chunkpush.Config{URL: "http://127.0.0.1:1"}); err == nil {
		t.Fatal("no run was accepted")
	}
	f := newFakeServer(t)
	s := open(t, config(f, "run-11"))
	if _, err := s.End(context.Background(), "running", nil); err == nil {
		t.Fatal("a non-terminal end status was accepted")
	}
	end(t, s, chunkpush.StatusSuccess)
	if again, err := chunkpush.Open(context.Background(), config(f, "run-11")); !errors.Is(err, chunkpush.ErrEnded) {
		if again != nil {
			again.Close()
		}
		t.Fatalf("open of an ended run: %v", err)
	}
}
