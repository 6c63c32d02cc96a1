package ssestream

import (
	"fmt"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// recorder is an Observer that records what it is told.
type recorder struct {
	mu     sync.Mutex
	calls  []string
	frames int
	bytes  int
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf(format, args...))
}

func (r *recorder) Opened(kind string)         { r.add("opened %s", kind) }
func (r *recorder) Closed(kind, reason string) { r.add("closed %s %s", kind, reason) }
func (r *recorder) Wrote(kind string, frames, bytes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frames += frames
	r.bytes += bytes
}
func (r *recorder) StoreRead(kind string, _ time.Duration, err error) {
	r.add("read %s %v", kind, err == nil)
}
func (r *recorder) CatchUp(kind, reason string) { r.add("catch-up %s %s", kind, reason) }

// TestObserverSeesAStream: a replayed stream is reported opened, caught
// up from the store page by page, its frames and bytes written, and closed
// done.
func TestObserverSeesAStream(t *testing.T) {
	t.Parallel()
	src := newStoredSource(5)
	rec := &recorder{}
	set := NewSet(Config{ReplayPage: 2, Observer: rec})
	w := httptest.NewRecorder()
	if err := set.Serve(w, httptest.NewRequestWithContext(t.Context(), "GET", "/", nil), src, 1, Options{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"opened test", "catch-up test start", "read test true", "read test true", "closed test done"}
	if !slices.Equal(rec.calls, want) {
		t.Errorf("calls = %q, want %q", rec.calls, want)
	}
	if rec.frames != 4 || rec.bytes != w.Body.Len() {
		t.Errorf("wrote %d frames and %d bytes, want 4 frames and the body's %d bytes", rec.frames, rec.bytes, w.Body.Len())
	}
}
