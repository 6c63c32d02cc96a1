package ssestream

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// A storm is over at the first tick that finds at least size take-overs
// since memory was last returned and none since the tick before; the
// count then starts afresh.
func TestStormWatchTick(t *testing.T) {
	t.Parallel()
	w := stormWatch{size: 3}
	steps := []struct {
		tookOver int
		over     bool
	}{
		{2, false}, // below size
		{0, false}, // quiet, still below size
		{1, false}, // size reached during this tick: not quiet yet
		{2, false}, // more arrive
		{0, true},  // a quiet tick after 5: over
		{0, false}, // nothing since
		{3, false},
		{0, true},
	}
	for i, s := range steps {
		for range s.tookOver {
			w.tookOver()
		}
		if got := w.tick(false); got != s.over {
			t.Fatalf("tick %d (after %d take-overs): over %v, want %v", i, s.tookOver, got, s.over)
		}
	}
	// The sweeper stops (no stream left): a storm counted so far is over,
	// even without a quiet tick; fewer than its size is not.
	w.tookOver()
	w.tookOver()
	if w.tick(true) {
		t.Error("tick with no stream left after 2 take-overs: over, want not (fewer than size)")
	}
	w.tookOver()
	if !w.tick(true) {
		t.Error("tick with no stream left after 3 take-overs: not over, want over")
	}
	if w.tookOver(); w.tick(false) {
		t.Error("a tick after the stop counted the storm again")
	}
}

// stormServer serves streams of a Set whose storms are 3 take-overs; it
// counts the Set's returns of memory instead of making them.
func stormServer(t *testing.T) (*Set, *httptest.Server, *atomic.Int64) {
	set := NewSet(Config{Heartbeat: time.Hour})
	returned := new(atomic.Int64)
	set.storm.size, set.returnMemory = 3, func() { returned.Add(1) }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := set.Serve(w, r, openSource{newStoredSource(0)}, 0, Options{}); err != nil {
			t.Error(err)
		}
	}))
	t.Cleanup(srv.Close)
	return set, srv, returned
}

// The sweeper returns memory after a storm whose streams all ended before
// a quiet tick: it stops then, with nothing left to watch.
func TestSweeperReturnsMemoryAfterAStormThatLeft(t *testing.T) {
	t.Parallel()
	set, srv, returned := stormServer(t)
	for range 3 {
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close() // the client leaves: the sweeper ends its stream
	}
	for deadline := time.Now().Add(10 * time.Second); returned.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("memory not returned 10 s after a storm's streams ended")
		}
	}
	set.mu.Lock()
	sweeping := set.sweeping
	set.mu.Unlock()
	if got := returned.Load(); got != 1 || sweeping {
		t.Errorf("memory returned %d times, sweeper running %v; want once, stopped", got, sweeping)
	}
	if err := set.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// The sweeper returns memory once after a storm of taken-over streams, and
// not after fewer than a storm's size.
func TestSweeperReturnsMemoryAfterAStorm(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		streams int
		want    int64
	}{{"storm", 3, 1}, {"fewer", 2, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			set, srv, returned := stormServer(t)
			for range tc.streams {
				resp, err := http.Get(srv.URL)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
			}
			// The sweeper's first tick sees the take-overs, its second
			// a quiet interval: a storm is over then.
			for deadline := time.Now().Add(10 * time.Second); tc.want > 0 && returned.Load() == 0; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("memory not returned 10 s after a storm")
				}
			}
			// Two more ticks: no second return, and none for fewer.
			time.Sleep(2*peerCheckInterval + peerCheckInterval/2)
			if got := returned.Load(); got != tc.want {
				t.Errorf("%d streams: memory returned %d times, want %d", tc.streams, got, tc.want)
			}
			if err := set.Shutdown(t.Context()); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
		})
	}
}
