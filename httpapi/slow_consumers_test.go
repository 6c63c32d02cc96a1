package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream/streams"
	"github.com/runstream/runstream/workflow"
)

// slowFollowers is how many followers stop reading in
// TestSlowFollowersAreCutAndMemoryReturns: RUNSTREAM_SLOW_FOLLOWERS, 50
// by default.
func slowFollowers(t *testing.T) int {
	if v := os.Getenv("RUNSTREAM_SLOW_FOLLOWERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("RUNSTREAM_SLOW_FOLLOWERS=%q: want a positive integer", v)
		}
		return n
	}
	return 50
}

// heapInUse returns the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// Many followers that stop reading are cut (their write deadline passes):
// their subscriptions, goroutines and buffers are released, so the heap
// and the goroutines return to what they were before they came (within
// generous margins); an attentive follower meanwhile gets every event; a
// cut follower resumes with Last-Event-ID and misses nothing.
//
// It does not run in parallel: it counts the process's heap and goroutines.
func TestSlowFollowersAreCutAndMemoryReturns(t *testing.T) {
	env := newWorkflowEnv(t, StreamConfig{WriteTimeout: 200 * time.Millisecond})
	const n = 4000 // ~8 MB of frames, replayed to every follower
	message := strings.Repeat("x", 2000)
	for i := 0; i < n; i += 100 {
		var events []workflow.NewEvent
		for range 100 {
			events = append(events, workflow.NewEvent{Event: workflow.EventNodeProgress, NodeID: "n1", NodeRunID: "nr1",
				Data: json.RawMessage(fmt.Sprintf(`{"phase":"p","message":"%s"}`, message))})
		}
		if _, err := env.log.Append(t.Context(), workflow.AppendParams{RunID: env.run.ID, Events: events}); err != nil {
			t.Fatal(err)
		}
	}
	last := env.complete(t)
	heapBefore, goroutinesBefore := heapInUse(), runtime.NumGoroutine()

	slow := make([]*streamConn, slowFollowers(t))
	for i := range slow {
		slow[i] = env.open(t, "")
	}
	if got := env.followToEnd(t, 0); !equalSeqs(got, seqRange(1, last)) {
		t.Fatalf("the attentive follower got %d events, want 1..%d", len(got), last)
	}
	key := streams.WorkflowStreamKey(env.run.ID)
	deadline := time.Now().Add(60 * time.Second)
	for env.hub.Followed(key) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d followers that stopped reading are still subscribed after 60 s (write deadline 200 ms)", env.hub.Followed(key), len(slow))
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The first slow follower reads now: a prefix, then the cut; it
	// resumes from there and misses nothing.
	var lastSeen int64
	for {
		ev, err := slow[0].reader.Next()
		if err != nil {
			break
		}
		seq, _ := strconv.ParseInt(ev.ID, 10, 64)
		if seq != lastSeen+1 {
			t.Fatalf("slow follower: seq %d after %d", seq, lastSeen)
		}
		lastSeen = seq
	}
	if lastSeen >= last {
		t.Fatalf("the slow follower was never cut (saw all %d events)", last)
	}
	if got := env.followToEnd(t, lastSeen); !equalSeqs(got, seqRange(lastSeen+1, last)) {
		t.Fatalf("resume after the cut: %d events, want %d..%d", len(got), lastSeen+1, last)
	}

	for _, c := range slow {
		c.resp.Body.Close()
	}
	http.DefaultClient.CloseIdleConnections()
	// Memory and goroutines return to the baseline: the margins allow for
	// the test's own client connections winding down, not for a buffer
	// or a goroutine per follower that stays.
	deadline = time.Now().Add(30 * time.Second)
	for {
		heap, goroutines := heapInUse(), runtime.NumGoroutine()
		if heap <= heapBefore+16<<20 && goroutines <= goroutinesBefore+10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the cuts: heap %d MiB (before %d MiB), %d goroutines (before %d)",
				heap>>20, heapBefore>>20, goroutines, goroutinesBefore)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
