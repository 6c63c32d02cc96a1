package ssestream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/sse"
)

// storedSource is a dense stream of n stored events, the last terminal,
// with no live events: the follower replays it and ends.
type storedSource struct {
	hub        *live.Hub
	frames     [][]byte
	subscribed atomic.Int32
}

func newStoredSource(n int) *storedSource {
	src := &storedSource{hub: live.New(live.Config{})}
	for seq := 1; seq <= n; seq++ {
		src.frames = append(src.frames, fmt.Appendf(nil, "id: %d\nevent: e\ndata: {\"seq\":%d}\n\n", seq, seq))
	}
	return src
}

func (s *storedSource) Subscribe(cursor int64) *live.Subscription {
	s.subscribed.Add(1)
	return s.hub.Subscribe("k", cursor)
}

func (s *storedSource) Shows(live.Event) bool { return true }

func (s *storedSource) Dense() bool { return true }

func (s *storedSource) Kind() string { return "test" }

func (s *storedSource) ReadAfter(_ context.Context, buf []byte, after int64, limit int) ([]byte, int, int64, bool, error) {
	n, last := 0, after
	for seq := after + 1; seq <= int64(len(s.frames)) && n < limit; seq++ {
		buf = append(buf, s.frames[seq-1]...)
		n, last = n+1, seq
	}
	return buf, n, last, n > 0 && last == int64(len(s.frames)), nil
}

func (s *storedSource) End(_ context.Context, cursor int64) ([]byte, bool, bool, error) {
	return nil, cursor >= int64(len(s.frames)), false, nil
}

// want is what a follower from cursor writes: the retry hint, then every
// frame after cursor.
func (s *storedSource) want(t *testing.T, cursor int, retry time.Duration) string {
	t.Helper()
	b, err := sse.AppendRetry(nil, retry)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range s.frames[cursor:] {
		b = append(b, f...)
	}
	return string(b)
}

func TestServeReplaysToTheTerminalEvent(t *testing.T) {
	t.Parallel()
	src := newStoredSource(5)
	set := NewSet(Config{ReplayPage: 2})
	rec := httptest.NewRecorder()
	var limited []error
	err := set.Serve(rec, httptest.NewRequestWithContext(t.Context(), "GET", "/", nil), src, 1, Options{
		User: "u", Limited: func(err error) { limited = append(limited, err) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/event-stream" || rec.Header().Get("Cache-Control") != "no-cache" {
		t.Errorf("%d %v, want 200 with the SSE headers", rec.Code, rec.Header())
	}
	if got, want := rec.Body.String(), src.want(t, 1, 3*time.Second); got != want {
		t.Errorf("body:\n%s\nwant:\n%s", got, want)
	}
	if len(limited) != 1 || limited[0] != nil {
		t.Errorf("Limited called with %v, want one nil", limited)
	}
	if n := src.hub.Followed("k"); n != 0 {
		t.Errorf("%d subscriptions after the stream ended", n)
	}
}

func TestServeTakesTheConnectionOver(t *testing.T) {
	t.Parallel()
	src := newStoredSource(3)
	set := NewSet(Config{})
	finished := make(chan int64, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := set.Serve(w, r, src, 0, Options{Detach: func(*http.Request) func(int, int64) {
			return func(status int, bytes int64) {
				if status != http.StatusOK {
					t.Errorf("finished with status %d", status)
				}
				finished <- bytes
			}
		}})
		if err != nil {
			t.Error(err)
		}
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body) // fails on broken chunking or a missing last chunk
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Close || len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
		t.Errorf("Connection close = %v, Transfer-Encoding = %v; want a chunked body and the connection closed after it", resp.Close, resp.TransferEncoding)
	}
	if want := src.want(t, 0, 3*time.Second); string(body) != want {
		t.Errorf("body:\n%s\nwant:\n%s", body, want)
	}
	select {
	case n := <-finished:
		if n != int64(len(body)) {
			t.Errorf("finished with %d bytes, the client read %d", n, len(body))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the taken-over stream never finished")
	}
}

func TestServeRefusesBeyondTheUsersLimit(t *testing.T) {
	t.Parallel()
	set := NewSet(Config{MaxPerUser: 1})
	release, err := set.perUser.acquire("u")
	if err != nil {
		t.Fatal(err)
	}
	src := newStoredSource(1)
	rec := httptest.NewRecorder()
	var limited error
	err = set.Serve(rec, httptest.NewRequestWithContext(t.Context(), "GET", "/", nil), src, 0, Options{User: "u", Limited: func(err error) { limited = err }})
	var re *runstream.Error
	if !errors.As(err, &re) || re.Code != runstream.CodeRateLimited || re.Details["limit"] != 1 || limited != err {
		t.Fatalf("Serve: %v (Limited %v), want RATE_LIMITED with limit 1", err, limited)
	}
	if rec.Header().Get("Retry-After") != "3" || rec.Header().Get("Content-Type") != "" || rec.Body.Len() != 0 || src.subscribed.Load() != 0 {
		t.Errorf("refused stream: headers %v, body %q, %d subscriptions; want Retry-After 3 and nothing else", rec.Header(), rec.Body, src.subscribed.Load())
	}
	// Another user has a place; the user's is free once released (twice
	// does nothing).
	if _, err := set.perUser.acquire("v"); err != nil {
		t.Errorf("another user: %v", err)
	}
	release()
	release()
	if _, err := set.perUser.acquire("u"); err != nil {
		t.Errorf("after release: %v", err)
	}
	if _, err := set.perUser.acquire("u"); err == nil {
		t.Error("a second release freed a second place")
	}
}

func TestServeHEAD(t *testing.T) {
	t.Parallel()
	set := NewSet(Config{MaxPerUser: 1})
	src := newStoredSource(1)
	rec := httptest.NewRecorder()
	if err := set.Serve(rec, httptest.NewRequestWithContext(t.Context(), "HEAD", "/", nil), src, 0, Options{User: "u"}); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/event-stream" || rec.Body.Len() != 0 || src.subscribed.Load() != 0 {
		t.Errorf("HEAD: %d %v %q, %d subscriptions", rec.Code, rec.Header(), rec.Body, src.subscribed.Load())
	}
	if _, err := set.perUser.acquire("u"); err != nil {
		t.Errorf("HEAD kept its place: %v", err)
	}
}

func TestServeAfterShutdown(t *testing.T) {
	t.Parallel()
	set := NewSet(Config{Retry: 1500 * time.Millisecond})
	if err := set.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	src := newStoredSource(1)
	rec := httptest.NewRecorder()
	err := set.Serve(rec, httptest.NewRequestWithContext(t.Context(), "GET", "/", nil), src, 0, Options{})
	var re *runstream.Error
	if !errors.As(err, &re) || re.Code != runstream.CodeUnavailable {
		t.Fatalf("Serve after Shutdown: %v, want UNAVAILABLE", err)
	}
	if rec.Header().Get("Retry-After") != "2" || rec.Body.Len() != 0 || src.subscribed.Load() != 0 || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("refused stream: headers %v, body %q, %d subscriptions", rec.Header(), rec.Body, src.subscribed.Load())
	}
}
