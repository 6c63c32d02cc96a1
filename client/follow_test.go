package client

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

func TestFollowDelivery(t *testing.T) {
	t.Parallel()
	const hint = 10 * time.Millisecond
	running := &Run{ID: fakeRunID, Status: workflow.StatusRunning, LastSeq: 6}
	tests := []struct {
		name    string
		after   int64
		script  []http.HandlerFunc
		run     *Run
		wantSeq []int64
		// wantIDs are the Last-Event-ID headers of the stream requests.
		wantIDs []string
		// wantSynth: the last event is synthesised.
		wantSynth bool
	}{{
		name:    "resume after a clean close mid-stream",
		script:  []http.HandlerFunc{stream(hint, progress(1, 3)), stream(hint, progress(4, 5)+completed(6))},
		wantSeq: seqRange(1, 6),
		wantIDs: []string{"", "3"},
	}, {
		name:    "resume after a cut connection",
		script:  []http.HandlerFunc{streamCut(hint, progress(1, 2)), stream(hint, progress(3, 4)+completed(5))},
		wantSeq: seqRange(1, 5),
		wantIDs: []string{"", "2"},
	}, {
		name:    "resume after a refused connection",
		script:  []http.HandlerFunc{stream(hint, progress(1, 2)), refuse, stream(hint, completed(3))},
		wantSeq: seqRange(1, 3),
		wantIDs: []string{"", "2", "2"},
	}, {
		name:    "start after a seq",
		after:   4,
		script:  []http.HandlerFunc{stream(hint, progress(5, 5)+completed(6))},
		wantSeq: []int64{5, 6},
		wantIDs: []string{"4"},
	}, {
		name:    "a server replaying from the start: duplicates dropped",
		script:  []http.HandlerFunc{stream(hint, progress(1, 3)), stream(hint, progress(1, 5)+completed(6))},
		wantSeq: seqRange(1, 6),
		wantIDs: []string{"", "3"},
	}, {
		name:    "duplicate frames in one stream dropped",
		script:  []http.HandlerFunc{stream(hint, progress(1, 2)+progress(2, 2)+progress(1, 3)+completed(4))},
		wantSeq: seqRange(1, 4),
		wantIDs: []string{""},
	}, {
		name:    "heartbeat comments ignored",
		script:  []http.HandlerFunc{stream(hint, heartbeat+progress(1, 1)+heartbeat+heartbeat+progress(2, 2)+heartbeat+completed(3))},
		wantSeq: seqRange(1, 3),
		wantIDs: []string{""},
	}, {
		name:    "a gap: reconnect from the last seq",
		script:  []http.HandlerFunc{stream(hint, progress(1, 1)+progress(3, 3)), stream(hint, progress(2, 3)+completed(4))},
		wantSeq: seqRange(1, 4),
		wantIDs: []string{"", "1"},
	}, {
		name: "429 and 503 retried",
		script: []http.HandlerFunc{
			fail(http.StatusServiceUnavailable, runstream.CodeUnavailable),
			stream(hint, progress(1, 1)),
			fail(http.StatusTooManyRequests, runstream.CodeRateLimited),
			fail(http.StatusInternalServerError, runstream.CodeInternal),
			stream(hint, completed(2)),
		},
		wantSeq: seqRange(1, 2),
		wantIDs: []string{"", "", "1", "1", "1"},
	}, {
		name:    "stop after the terminal event of a stream left open",
		script:  []http.HandlerFunc{streamOpen(hint, progress(1, 2)+completed(3)+progress(4, 4))},
		wantSeq: seqRange(1, 3),
		wantIDs: []string{""},
	}, {
		name:      "a synthesised terminal event repeating the last seq",
		script:    []http.HandlerFunc{stream(hint, progress(1, 2)+frame(synthesised(2), true))},
		wantSeq:   []int64{1, 2, 2},
		wantIDs:   []string{""},
		wantSynth: true,
	}, {
		name:    "a stream closed at once on a run already over at After",
		after:   6,
		run:     &Run{ID: fakeRunID, Status: workflow.StatusCompleted, LastSeq: 6},
		script:  []http.HandlerFunc{stream(hint, "")},
		wantIDs: []string{"6"},
	}, {
		name:    "a stream closed at once on a running run is resumed",
		after:   6,
		script:  []http.HandlerFunc{stream(hint, ""), stream(hint, completed(7))},
		wantSeq: []int64{7},
		wantIDs: []string{"6", "6"},
	}}
	// A stream left open ends only if Follow closes it, else the bubble
	// deadlocks.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				srv := &fakeServer{script: tt.script, run: running}
				if tt.run != nil {
					srv.run = tt.run
				}
				c := newPipeClient(t, srv)
				seqs, envs, err := collect(c.Follow(t.Context(), fakeRunID, FollowOptions{After: tt.after}))
				if err != nil {
					t.Fatalf("Follow: %v", err)
				}
				if !slices.Equal(seqs, tt.wantSeq) {
					t.Errorf("seqs = %v, want %v", seqs, tt.wantSeq)
				}
				if ids := srv.lastEventIDs(); !slices.Equal(ids, tt.wantIDs) {
					t.Errorf("Last-Event-ID headers = %q, want %q", ids, tt.wantIDs)
				}
				for i, env := range envs {
					last := i == len(envs)-1
					if env.Event.Terminal() != last {
						t.Errorf("event %d (seq %d) is %s; only the last may be terminal", i, env.Seq, env.Event)
					}
					if IsSynthesised(env) != (last && tt.wantSynth) {
						t.Errorf("IsSynthesised(seq %d %s) = %v", env.Seq, env.Event, IsSynthesised(env))
					}
				}
			})
		})
	}
}

// synthesised returns a synthesised run.failed at seq, as the server sends
// it for a run that ended without a terminal event.
func synthesised(seq int64) workflow.Envelope {
	env := envelope(seq, workflow.EventRunFailed)
	env.Data = []byte(`{"synthesised":true,"finishedAt":"2026-08-26T10:00:01+00:00","error":{"code":"WORKFLOW_WORKER_LOST","message":"lost","retryable":true},"failedNodeId":null}`)
	return env
}

func TestFollowErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		after      int64
		maxRetries int
		script     []http.HandlerFunc
		wantSeq    []int64
		wantIDs    []string
		// wantStatus and wantCode describe the *APIError in the chain; 0
		// means none is expected.
		wantStatus int
		wantCode   runstream.ErrorCode
	}{{
		name:       "unknown run: 404 not retried",
		script:     []http.HandlerFunc{fail(http.StatusNotFound, runstream.CodeWorkflowRunNotFound), stream(0, completed(1))},
		wantIDs:    []string{""},
		wantStatus: http.StatusNotFound, wantCode: runstream.CodeWorkflowRunNotFound,
	}, {
		name:       "bad cursor: 400 not retried",
		after:      3,
		script:     []http.HandlerFunc{fail(http.StatusBadRequest, runstream.CodeWorkflowInvalidCursor), stream(0, completed(4))},
		wantIDs:    []string{"3"},
		wantStatus: http.StatusBadRequest, wantCode: runstream.CodeWorkflowInvalidCursor,
	}, {
		name:       "a 404 on reconnection ends after the events before it",
		script:     []http.HandlerFunc{stream(time.Millisecond, progress(1, 2)), fail(http.StatusNotFound, runstream.CodeWorkflowRunNotFound)},
		wantSeq:    seqRange(1, 2),
		wantIDs:    []string{"", "2"},
		wantStatus: http.StatusNotFound, wantCode: runstream.CodeWorkflowRunNotFound,
	}, {
		name:       "max retries spent",
		maxRetries: 2,
		script: []http.HandlerFunc{
			fail(http.StatusServiceUnavailable, runstream.CodeUnavailable),
			fail(http.StatusServiceUnavailable, runstream.CodeUnavailable),
			fail(http.StatusServiceUnavailable, runstream.CodeUnavailable),
			stream(0, completed(1)),
		},
		wantIDs:    []string{"", "", ""},
		wantStatus: http.StatusServiceUnavailable, wantCode: runstream.CodeUnavailable,
	}, {
		name:    "a malformed frame",
		script:  []http.HandlerFunc{stream(0, progress(1, 1)+"id: 2\nevent: node.progress\ndata: {not json\n\n"), stream(0, completed(2))},
		wantSeq: []int64{1},
		wantIDs: []string{""},
	}, {
		name: "a response that is not an event stream",
		script: []http.HandlerFunc{func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{}`))
		}},
		wantIDs: []string{""},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				srv := &fakeServer{script: tt.script, run: &Run{ID: fakeRunID, Status: workflow.StatusRunning}}
				c := newPipeClient(t, srv)
				// A bound on retries turns a wrongly retried error into a
				// failure instead of an endless loop.
				maxRetries := cmp.Or(tt.maxRetries, 5)
				seqs, _, err := collect(c.Follow(t.Context(), fakeRunID, FollowOptions{After: tt.after, MaxRetries: maxRetries}))
				if err == nil {
					t.Fatal("Follow ended without an error")
				}
				if !slices.Equal(seqs, tt.wantSeq) {
					t.Errorf("seqs = %v, want %v", seqs, tt.wantSeq)
				}
				if ids := srv.lastEventIDs(); !slices.Equal(ids, tt.wantIDs) {
					t.Errorf("Last-Event-ID headers = %q, want %q", ids, tt.wantIDs)
				}
				var apiErr *APIError
				switch {
				case tt.wantStatus == 0 && errors.As(err, &apiErr):
					t.Errorf("error %v holds an *APIError", err)
				case tt.wantStatus != 0 && !errors.As(err, &apiErr):
					t.Errorf("error %v holds no *APIError", err)
				case tt.wantStatus != 0 && (apiErr.Status != tt.wantStatus || apiErr.Code != tt.wantCode):
					t.Errorf("APIError = %d %s, want %d %s", apiErr.Status, apiErr.Code, tt.wantStatus, tt.wantCode)
				}
			})
		})
	}
}

func TestFollowBackoff(t *testing.T) {
	t.Parallel()
	none := stream(0, "")
	tests := []struct {
		name       string
		maxBackoff time.Duration
		script     []http.HandlerFunc
		// wantGaps are the times between stream requests (no jitter: each
		// delay is its ceiling).
		wantGaps []time.Duration
	}{{
		name:     "doubling from the retry hint",
		script:   []http.HandlerFunc{stream(500*time.Millisecond, ""), none, none, stream(0, completed(1))},
		wantGaps: []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second},
	}, {
		name: "default retry without a hint",
		script: []http.HandlerFunc{
			fail(http.StatusServiceUnavailable, runstream.CodeUnavailable),
			fail(http.StatusTooManyRequests, runstream.CodeRateLimited),
			stream(0, completed(1)),
		},
		wantGaps: []time.Duration{DefaultRetry, 2 * DefaultRetry},
	}, {
		name:       "capped by MaxBackoff",
		maxBackoff: 15 * time.Second,
		script:     []http.HandlerFunc{stream(10*time.Second, ""), none, none, stream(0, completed(1))},
		wantGaps:   []time.Duration{10 * time.Second, 15 * time.Second, 15 * time.Second},
	}, {
		name:     "capped by the default MaxBackoff",
		script:   []http.HandlerFunc{stream(20*time.Second, ""), none, none, stream(0, completed(1))},
		wantGaps: []time.Duration{20 * time.Second, DefaultMaxBackoff, DefaultMaxBackoff},
	}, {
		name: "reset after a connection that delivered events",
		script: []http.HandlerFunc{
			stream(time.Second, ""), none, stream(0, progress(1, 1)), none, stream(0, completed(2)),
		},
		wantGaps: []time.Duration{time.Second, 2 * time.Second, time.Second, 2 * time.Second},
	}, {
		name: "reset after a connection that delivered a heartbeat",
		script: []http.HandlerFunc{
			stream(time.Second, ""), none, stream(0, heartbeat), none, stream(0, completed(1)),
		},
		wantGaps: []time.Duration{time.Second, 2 * time.Second, time.Second, 2 * time.Second},
	}, {
		name: "duplicates are no progress",
		script: []http.HandlerFunc{
			stream(time.Second, progress(1, 1)), stream(0, progress(1, 1)), stream(0, progress(1, 1)), stream(0, completed(2)),
		},
		wantGaps: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second},
	}, {
		name:     "the latest hint is the base",
		script:   []http.HandlerFunc{stream(time.Second, ""), stream(4*time.Second, ""), stream(0, completed(1))},
		wantGaps: []time.Duration{time.Second, 8 * time.Second},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				srv := &fakeServer{script: tt.script, run: &Run{ID: fakeRunID, Status: workflow.StatusRunning}}
				c := newPipeClient(t, srv)
				if _, _, err := collect(c.Follow(t.Context(), fakeRunID, FollowOptions{MaxBackoff: tt.maxBackoff})); err != nil {
					t.Fatalf("Follow: %v", err)
				}
				if gaps := srv.gaps(); !slices.Equal(gaps, tt.wantGaps) {
					t.Errorf("gaps between connections = %v, want %v", gaps, tt.wantGaps)
				}
			})
		})
	}
}

func TestFollowJitter(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const n = 8
		script := []http.HandlerFunc{stream(time.Second, "")}
		for range n - 1 {
			script = append(script, stream(0, ""))
		}
		script = append(script, stream(0, completed(1)))
		srv := &fakeServer{script: script, run: &Run{ID: fakeRunID, Status: workflow.StatusRunning}}
		c := newPipeClient(t, srv)
		c.jitter = fullJitter
		if _, _, err := collect(c.Follow(t.Context(), fakeRunID, FollowOptions{MaxBackoff: 16 * time.Second})); err != nil {
			t.Fatalf("Follow: %v", err)
		}
		gaps := srv.gaps()
		if len(gaps) != n {
			t.Fatalf("%d reconnections, want %d", len(gaps), n)
		}
		atCeiling := 0
		for i, gap := range gaps {
			ceiling := min(time.Second<<i, 16*time.Second)
			if gap < 0 || gap > ceiling {
				t.Errorf("delay %d = %v, want within [0, %v]", i+1, gap, ceiling)
			}
			if gap == ceiling {
				atCeiling++
			}
		}
		if atCeiling == n {
			t.Errorf("every delay is its ceiling %v: no jitter", gaps)
		}
	})
}

func TestBackoffJitterBounds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		base, limit time.Duration
		n           int
		ceiling     time.Duration
	}{
		{base: 3 * time.Second, limit: 30 * time.Second, n: 1, ceiling: 3 * time.Second},
		{base: 3 * time.Second, limit: 30 * time.Second, n: 3, ceiling: 12 * time.Second},
		{base: 3 * time.Second, limit: 30 * time.Second, n: 5, ceiling: 30 * time.Second},
		{base: 3 * time.Second, limit: 30 * time.Second, n: 1000, ceiling: 30 * time.Second},
		{base: time.Minute, limit: 30 * time.Second, n: 1, ceiling: 30 * time.Second},
		{base: time.Hour, limit: 1<<63 - 1, n: 100, ceiling: 1<<63 - 1},
	}
	for _, tt := range tests {
		if got := backoff(tt.base, tt.limit, tt.n, func(d time.Duration) time.Duration { return d }); got != tt.ceiling {
			t.Errorf("ceiling of backoff(%v, %v, %d) = %v, want %v", tt.base, tt.limit, tt.n, got, tt.ceiling)
		}
		// Full jitter: uniform in [0, ceiling]. With 500 draws, missing
		// either outer quarter has probability (3/4)^500.
		lo, hi := tt.ceiling, time.Duration(0)
		for range 500 {
			d := backoff(tt.base, tt.limit, tt.n, fullJitter)
			if d < 0 || d > tt.ceiling {
				t.Fatalf("backoff(%v, %v, %d) = %v, outside [0, %v]", tt.base, tt.limit, tt.n, d, tt.ceiling)
			}
			lo, hi = min(lo, d), max(hi, d)
		}
		if lo > tt.ceiling/4 || hi < tt.ceiling/4*3 {
			t.Errorf("backoff(%v, %v, %d) drew only from [%v, %v] of [0, %v]", tt.base, tt.limit, tt.n, lo, hi, tt.ceiling)
		}
	}
}

func TestFollowCancel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		script  []http.HandlerFunc
		wantSeq []int64
		wantReq int
	}{{
		name:    "while reading an open stream",
		script:  []http.HandlerFunc{streamOpen(time.Second, progress(1, 2))},
		wantSeq: seqRange(1, 2),
		wantReq: 1,
	}, {
		name:    "while waiting to reconnect",
		script:  []http.HandlerFunc{stream(time.Hour, progress(1, 1))},
		wantSeq: []int64{1},
		wantReq: 1,
	}, {
		name: "while waiting for the response",
		script: []http.HandlerFunc{func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}},
		wantReq: 1,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				srv := &fakeServer{script: tt.script, run: &Run{ID: fakeRunID, Status: workflow.StatusRunning}}
				c := newPipeClient(t, srv)
				ctx, cancel := context.WithCancel(t.Context())
				type result struct {
					seqs []int64
					err  error
				}
				done := make(chan result, 1)
				go func() {
					seqs, _, err := collect(c.Follow(ctx, fakeRunID, FollowOptions{}))
					done <- result{seqs, err}
				}()
				time.Sleep(10 * time.Second) // within the first delay, capped at 30s
				cancel()
				synctest.Wait() // every goroutine is blocked or gone, at the same instant
				select {
				case res := <-done:
					if !errors.Is(res.err, context.Canceled) {
						t.Errorf("error = %v, want context.Canceled", res.err)
					}
					if !slices.Equal(res.seqs, tt.wantSeq) {
						t.Errorf("seqs = %v, want %v", res.seqs, tt.wantSeq)
					}
				default:
					t.Fatal("Follow did not return when its context was cancelled")
				}
				if n := len(srv.requests()); n != tt.wantReq {
					t.Errorf("%d stream requests, want %d", n, tt.wantReq)
				}
			})
		})
	}
}

func TestFollowCallerStops(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		srv := &fakeServer{script: []http.HandlerFunc{streamOpen(time.Second, progress(1, 5))}}
		c := newPipeClient(t, srv)
		var seqs []int64
		for env, err := range c.Follow(t.Context(), fakeRunID, FollowOptions{}) {
			if err != nil {
				t.Fatal(err)
			}
			seqs = append(seqs, env.Seq)
			if env.Seq == 2 {
				break
			}
		}
		if !slices.Equal(seqs, []int64{1, 2}) {
			t.Errorf("seqs = %v, want [1 2]", seqs)
		}
		// The open stream's handler ends only if Follow closed the body;
		// otherwise the bubble deadlocks.
		synctest.Wait()
		if n := len(srv.requests()); n != 1 {
			t.Errorf("%d stream requests, want 1", n)
		}
	})
}

// TestFollowOverHTTP runs Follow over a real connection that the server
// aborts mid-stream.
func TestFollowOverHTTP(t *testing.T) {
	t.Parallel()
	srv := &fakeServer{script: []http.HandlerFunc{
		streamCut(time.Millisecond, progress(1, 3)),
		stream(time.Millisecond, progress(4, 5)+completed(6)),
	}}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	c, err := New(hs.URL, WithHeader("Authorization", "Bearer t0ken"))
	if err != nil {
		t.Fatal(err)
	}
	seqs, _, err := collect(c.Follow(t.Context(), fakeRunID, FollowOptions{}))
	if err != nil {
		t.Fatalf("Follow: %v", err)
	}
	if want := seqRange(1, 6); !slices.Equal(seqs, want) {
		t.Errorf("seqs = %v, want %v", seqs, want)
	}
	reqs := srv.requests()
	if ids := srv.lastEventIDs(); !slices.Equal(ids, []string{"", "3"}) {
		t.Errorf("Last-Event-ID headers = %q, want [\"\" \"3\"]", ids)
	}
	for i, r := range reqs {
		if got := r.header.Get("Authorization"); got != "Bearer t0ken" {
			t.Errorf("request %d: Authorization = %q", i, got)
		}
		if got := r.header.Get("Accept"); got != "text/event-stream" {
			t.Errorf("request %d: Accept = %q", i, got)
		}
	}
}

func TestFollowArguments(t *testing.T) {
	t.Parallel()
	srv := &fakeServer{}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	c, err := New(hs.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		runID string
		after int64
	}{{runID: ""}, {runID: fakeRunID, after: -1}} {
		if _, _, err := collect(c.Follow(t.Context(), tt.runID, FollowOptions{After: tt.after})); err == nil {
			t.Errorf("Follow(%q, After %d) succeeded", tt.runID, tt.after)
		}
	}
	if n := len(srv.requests()); n != 0 {
		t.Errorf("%d requests for invalid arguments", n)
	}
}
