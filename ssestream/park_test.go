package ssestream

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream/live"
)

// followerGoroutines counts the goroutines running or waiting in a
// follower's method.
func followerGoroutines() int {
	buf := make([]byte, 1<<20)
	n := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "ssestream.(*follower).") {
			n++
		}
	}
	return n
}

// readUntil reads lines from r until one contains want.
func readUntil(t *testing.T, r *bufio.Reader, want string) {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream before %q: %v", want, err)
		}
		if strings.Contains(line, want) {
			return
		}
	}
}

// openStream serves a stream with no stored event over HTTP (so that it
// takes its connection over), with the given heartbeat, and returns its
// source, its set and the body, read past the retry hint.
func openStream(t *testing.T, heartbeat time.Duration) (openSource, *Set, *bufio.Reader) {
	t.Helper()
	src := openSource{newStoredSource(0)}
	set := NewSet(Config{Heartbeat: heartbeat})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := set.Serve(w, r, src, 0, Options{}); err != nil {
			t.Error(err)
		}
	}))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	body := bufio.NewReader(resp.Body)
	readUntil(t, body, "retry:")
	return src, set, body
}

// An idle stream that took its connection over waits without a goroutine
// (it parks) after its catch-up and after each heartbeat, and still gets
// its live events and heartbeats, and ends at shutdown. Not parallel: it
// counts the goroutines of the package's followers.
func TestIdleStreamParks(t *testing.T) {
	src, set, body := openStream(t, 300*time.Millisecond)
	waitUntil(t, "the caught-up stream to park", func() bool { return followerGoroutines() == 0 })

	src.hub.Publish("k", []live.Event{{Seq: 1, Frame: []byte("id: 1\ndata: live\n\n")}})
	readUntil(t, body, "data: live")
	readUntil(t, body, ": heartbeat")
	waitUntil(t, "the stream to park after its heartbeat", func() bool { return followerGoroutines() == 0 })
	readUntil(t, body, ": heartbeat") // woken by its heartbeat timer while parked

	if err := set.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if n := src.hub.Followed("k"); n != 0 {
		t.Errorf("%d subscriptions after shutdown", n)
	}
}

// A stream whose events come more often than Heartbeat does not park: its
// heartbeat timer finds a write each time it fires, which is not silence.
// Not parallel, as TestIdleStreamParks.
func TestBusyStreamDoesNotPark(t *testing.T) {
	src, set, body := openStream(t, time.Second)
	src.hub.Publish("k", []live.Event{{Seq: 1, Frame: []byte("id: 1\ndata: live 1\n\n")}})
	readUntil(t, body, "data: live 1")

	// An event every 200 ms for 2.5 s: the heartbeat timer fires twice and
	// finds a write each time.
	for seq := int64(2); seq <= 13; seq++ {
		deadline := time.Now().Add(200 * time.Millisecond)
		for time.Now().Before(deadline) {
			if n := followerGoroutines(); n != 1 {
				t.Fatalf("a stream with an event every 200 ms has %d goroutines in its follower, want 1 (it parked)", n)
			}
			time.Sleep(5 * time.Millisecond)
		}
		src.hub.Publish("k", []live.Event{{Seq: seq, Frame: []byte("id: " + strconv.FormatInt(seq, 10) + "\ndata: live\n\n")}})
		readUntil(t, body, "data: live")
	}
	if err := set.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}
