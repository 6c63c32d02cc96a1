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

// A stream's end cancels its context and runs the wake-up registered
// then, once; a wake-up registered after the end runs at once; one
// unregistered before the end does not run, and the stop of a replaced
// one leaves the one that replaced it.
func TestStreamEndRunsItsWakeUp(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	st := &stream{cancel: cancel}
	woken := 0
	stop := st.whenEnded(func() { woken++ })
	if !stop() {
		t.Fatal("stop before the end: false, want true (it unregistered the wake-up)")
	}
	stale := st.whenEnded(func() { t.Error("a replaced wake-up ran") })
	st.whenEnded(func() { woken++ })
	if stale() {
		t.Error("the stop of a replaced wake-up unregistered the one that replaced it")
	}
	st.end()
	st.end()
	if woken != 1 || ctx.Err() == nil {
		t.Fatalf("after end: woken %d times, context %v; want once, cancelled", woken, ctx.Err())
	}
	stop = st.whenEnded(func() { woken++ })
	if woken != 2 || stop() {
		t.Fatalf("registered after the end: woken %d times in all, stop %v; want at once, and nothing to stop", woken, stop())
	}
}
