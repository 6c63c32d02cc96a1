package ssestream

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"
)

type requestValueKey struct{}

// A stream that took its connection over keeps nothing of its request's
// context once the handler returned: a value the request's context held
// is collected while the stream is still open.
func TestTakenOverStreamReleasesItsRequestContext(t *testing.T) {
	t.Parallel()
	src := openSource{newStoredSource(0)}
	set := NewSet(Config{Heartbeat: time.Hour})
	collected := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		value := new([1 << 10]byte)
		runtime.AddCleanup(value, func(ch chan struct{}) { close(ch) }, collected)
		r = r.WithContext(context.WithValue(r.Context(), requestValueKey{}, value))
		if err := set.Serve(w, r, src, 0, Options{}); err != nil {
			t.Error(err)
		}
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	deadline := time.After(10 * time.Second)
	for {
		runtime.GC()
		select {
		case <-collected:
			if err := set.Shutdown(t.Context()); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			return
		case <-deadline:
			t.Fatal("the request context's value is still reachable from the open stream")
		case <-time.After(20 * time.Millisecond):
		}
	}
}
