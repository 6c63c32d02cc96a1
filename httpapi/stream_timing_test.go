package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/workflow"
)

// syncRecorder is a ResponseWriter whose output the test can read while the
// handler writes.
type syncRecorder struct {
	mu     sync.Mutex
	header http.Header
	body   bytes.Buffer
}

func newSyncRecorder() *syncRecorder { return &syncRecorder{header: http.Header{}} }

func (r *syncRecorder) Header() http.Header { return r.header }
func (r *syncRecorder) WriteHeader(int)     {}
func (r *syncRecorder) Flush()              {}
func (r *syncRecorder) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.body.Write(b)
}

func (r *syncRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.body.String()
}

// bubbleEnv is a workflow server without network or poll loop, for tests
// inside a synctest bubble.
func bubbleEnv(t *testing.T, stream StreamConfig) (*Server, *eventlog.WorkflowLog, workflow.Run) {
	store := memory.NewWorkflowStore()
	hub := live.New(live.Config{})
	log := eventlog.NewWorkflowLog(store, testValidator, hub, nil)
	env := &workflowEnv{store: store, hub: hub, log: log}
	run := env.createRun(t, "run_bubble")
	return New(Config{Stream: stream}, readOnlyWorkflows(store, hub), nil), log, run
}

func TestStreamHeartbeatAfterSilence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api, log, run := bubbleEnv(t, StreamConfig{})
		ctx, cancel := context.WithCancel(t.Context())
		rec := newSyncRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			api.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, "GET", "/api/workflows/runs/"+run.ID+"/stream", nil))
		}()
		heartbeats := func() int { return strings.Count(rec.String(), ": heartbeat\n") }

		synctest.Wait()
		if !strings.Contains(rec.String(), "id: 2\n") || heartbeats() != 0 {
			t.Fatalf("after replay:\n%s", rec.String())
		}
		time.Sleep(15*time.Second - time.Millisecond)
		synctest.Wait()
		if n := heartbeats(); n != 0 {
			t.Fatalf("heartbeat before 15 s of silence (%d)", n)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if n := heartbeats(); n != 1 {
			t.Fatalf("%d heartbeats after 15 s of silence, want 1", n)
		}
		// A frame at 25 s restarts the silence: the next heartbeat is at 40 s.
		time.Sleep(10 * time.Second)
		if _, err := log.Append(ctx, workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{{
			Event: workflow.EventNodeProgress, NodeID: "n1", NodeRunID: "nr1", Data: json.RawMessage(`{"phase":"p","message":"m"}`),
		}}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(15*time.Second - time.Millisecond)
		synctest.Wait()
		if n := heartbeats(); n != 1 || !strings.Contains(rec.String(), "id: 3\n") {
			t.Fatalf("heartbeats = %d before 15 s after the last frame:\n%s", n, rec.String())
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if n := heartbeats(); n != 2 {
			t.Fatalf("heartbeats = %d, want 2", n)
		}
		cancel()
		<-done
	})
}

func TestStreamClosesAtMaxLifetime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api, _, run := bubbleEnv(t, StreamConfig{MaxLifetime: time.Minute})
		done := make(chan struct{})
		go func() {
			defer close(done)
			api.ServeHTTP(newSyncRecorder(), httptest.NewRequestWithContext(t.Context(), "GET", "/api/workflows/runs/"+run.ID+"/stream", nil))
		}()
		time.Sleep(time.Minute - time.Millisecond)
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("stream closed before its lifetime")
		default:
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("stream still open after its lifetime")
		}
	})
}

// TestSlowFollowerIsCut: a follower that stops reading is cut (its write
// deadline passes) while the producer and the other followers go on; a cut
// follower resumes with Last-Event-ID and misses nothing. The readers here
// resume whenever they are cut, as real clients do: under the race detector
// even an attentive reader may fall behind the 200 ms deadline.
func TestSlowFollowerIsCut(t *testing.T) {
	t.Parallel()
	env := newWorkflowEnv(t, StreamConfig{WriteTimeout: 200 * time.Millisecond})
	slow := env.open(t, "")
	fast := make(chan []int64, 1)
	go func() { fast <- env.followToEnd(t, 0) }()

	const n = 20000 // ~40 MB of frames: more than the socket buffers hold
	message := strings.Repeat("x", 2000)
	for i := 0; i < n; i++ {
		if _, err := env.log.Append(t.Context(), workflow.AppendParams{RunID: env.run.ID, Events: []workflow.NewEvent{{
			Event: workflow.EventNodeProgress, NodeID: "n1", NodeRunID: "nr1",
			Data: json.RawMessage(fmt.Sprintf(`{"phase":"p","message":"%s"}`, message)),
		}}}); err != nil {
			t.Fatal(err)
		}
	}
	last := env.complete(t)
	if got := <-fast; !equalSeqs(got, seqRange(1, last)) {
		t.Fatalf("the attentive follower got %d events, want 1..%d", len(got), last)
	}

	// The slow follower reads now: a prefix, then the cut.
	var lastSeen int64
	for {
		ev, err := slow.reader.Next()
		if err != nil {
			break // the server closed the connection: EOF or a reset
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
}

// followToEnd follows the run from cursor to its terminal event,
// reconnecting with Last-Event-ID whenever the server cuts the stream, and
// returns the seqs received, in order. A reconnection refused because the
// user has the most streams open (RATE_LIMITED, while the server has yet
// to cut followers that stopped reading) is tried again after a pause,
// until a minute has passed: how soon the server cuts them depends on the
// machine, not on what is tested.
func (env *workflowEnv) followToEnd(t *testing.T, cursor int64) []int64 {
	var seqs []int64
	deadline := time.Now().Add(time.Minute)
	for connections := 0; connections < 1000 && time.Now().Before(deadline); {
		c := env.open(t, "", "Last-Event-ID", strconv.FormatInt(cursor, 10))
		if c.resp.StatusCode == http.StatusTooManyRequests {
			c.resp.Body.Close()
			time.Sleep(20 * time.Millisecond)
			continue
		}
		connections++
		for {
			ev, err := c.reader.Next()
			if err != nil {
				break
			}
			seq, _ := strconv.ParseInt(ev.ID, 10, 64)
			if seq != cursor+1 {
				t.Errorf("seq %d after %d", seq, cursor)
				return seqs
			}
			seqs, cursor = append(seqs, seq), seq
			if ev.Type() == string(workflow.EventRunCompleted) {
				c.resp.Body.Close()
				return seqs
			}
		}
		c.resp.Body.Close()
	}
	t.Errorf("no terminal event after 1000 connections or a minute")
	return seqs
}
