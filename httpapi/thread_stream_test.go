package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/internal/apitest"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/sse"
	"github.com/runstream/runstream/streams"
)

// threadStreamConn is an open thread stream.
type threadStreamConn struct {
	resp   *http.Response
	reader *sse.Reader
}

func (env *threadEnv) openStream(t *testing.T, srv *apitest.Server, query string, header ...string) *threadStreamConn {
	t.Helper()
	resp := apitest.Get(t, srv.URL+"/api/threads/t1/stream"+query, header...)
	if resp.StatusCode != 200 {
		t.Fatalf("stream status %d", resp.StatusCode)
	}
	return &threadStreamConn{resp: resp, reader: sse.NewReader(resp.Body)}
}

// next reads the next frame and checks that it is a record whose seq is
// its id and whose type is its event.
func (c *threadStreamConn) next(t *testing.T) runevents.Record {
	t.Helper()
	ev, err := c.reader.Next()
	if err != nil {
		t.Fatalf("read frame: %v", err)
	}
	var rec runevents.Record
	if err := json.Unmarshal([]byte(ev.Data), &rec); err != nil {
		t.Fatalf("frame data is not a record: %v\n%s", err, ev.Data)
	}
	if !ev.HasID || ev.ID != strconv.FormatInt(rec.Seq, 10) || ev.Type() != string(rec.EventType) {
		t.Fatalf("frame id %q event %q for record seq %d type %s", ev.ID, ev.Type(), rec.Seq, rec.EventType)
	}
	return rec
}

func (c *threadStreamConn) seqs(t *testing.T, n int) []int64 {
	t.Helper()
	var out []int64
	for range n {
		out = append(out, c.next(t).Seq)
	}
	return out
}

func newStreamEnv(t *testing.T, b threadBackend, stream StreamConfig) (*threadEnv, *apitest.Server) {
	t.Helper()
	env := newThreadEnvOn(t, b, func(c *envConfig) { c.Stream = stream })
	return env, apitest.Serve(t, env.api, env.api)
}

func (env *threadEnv) appendAs(t *testing.T, user string, events ...runevents.NewEvent) []runevents.Record {
	t.Helper()
	for i := range events {
		events[i].ThreadID = "t1"
	}
	recs, err := env.log.Append(context.Background(), user, events)
	if err != nil {
		t.Error(err)
	}
	return recs
}

func validStart(run string) runevents.NewEvent {
	return row(run, runevents.EventRunStart, "", `{"chain":null}`, `{"caller":"lead_agent"}`)
}

func validAI(run string) runevents.NewEvent {
	e := aiRow(run, "x")
	e.Category = ""
	return e
}

func TestThreadStreamReplayThenLive(t *testing.T) {
	forEachThreadBackend(t, testThreadStreamReplayThenLive)
}

func testThreadStreamReplayThenLive(t *testing.T, b threadBackend) {
	t.Parallel()
	env, srv := newStreamEnv(t, b, StreamConfig{ReplayPage: 3})
	env.appendAs(t, "alice", validStart("r1"), validAI("r1"), validStart("r2"))
	env.appendAs(t, "bob", validStart("r1")) // seq 4: not alice's
	env.appendAs(t, "alice", validAI("r2"), validStart("r3"), validAI("r3"), validStart("r4"))
	for _, tc := range []struct {
		name   string
		query  string
		header []string
		want   []int64
	}{
		{"from zero", "", nil, []int64{1, 2, 3, 5, 6, 7, 8}},
		{"after", "?after=3", nil, []int64{5, 6, 7, 8}},
		{"Last-Event-ID beats after", "?after=1", []string{"Last-Event-ID", "6"}, []int64{7, 8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := env.openStream(t, srv, tc.query, tc.header...)
			if got := c.seqs(t, len(tc.want)); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("replay %v, want %v", got, tc.want)
			}
			if ct := c.resp.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
	c := env.openStream(t, srv, "?after=8")
	go func() {
		env.appendAs(t, "bob", validStart("r5"))
		env.appendAs(t, "alice", validStart("r5"), validAI("r5"))
	}()
	rec := c.next(t)
	if rec.Seq != 10 || rec.UserID != "alice" || rec.RunID != "r5" {
		t.Errorf("first live record %+v, want alice's seq 10", rec)
	}
	if got := c.next(t).Seq; got != 11 {
		t.Errorf("second live seq %d, want 11", got)
	}
}

// TestThreadStreamBeforeTheFirstWrite: a chat subscribes to a thread
// before the agent's first write. An unknown thread's stream opens and
// delivers the first row; another user's thread opens the same way and
// shows none of the owner's rows, only the caller's.
func TestThreadStreamBeforeTheFirstWrite(t *testing.T) {
	forEachThreadBackend(t, testThreadStreamBeforeTheFirstWrite)
}

func testThreadStreamBeforeTheFirstWrite(t *testing.T, b threadBackend) {
	t.Parallel()
	env, srv := newStreamEnv(t, b, StreamConfig{ReplayPage: 2})
	c := env.openStream(t, srv, "")
	if ct := c.resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("unknown thread: Content-Type %q", ct)
	}
	go env.appendAs(t, "alice", validStart("r1"), validAI("r1"))
	if got := c.seqs(t, 2); fmt.Sprint(got) != "[1 2]" {
		t.Errorf("unknown thread: first rows %v, want [1 2]", got)
	}
	foreign := env.openStream(t, srv, "", testUserHeader, "bob")
	go func() {
		env.appendAs(t, "alice", validStart("r2"))
		env.appendAs(t, "bob", validStart("r9"))
	}()
	if rec := foreign.next(t); rec.UserID != "bob" || rec.Seq != 4 {
		t.Errorf("bob's stream of alice's thread shows %+v, want only bob's seq 4", rec)
	}
}

func TestThreadStreamFilters(t *testing.T) { forEachThreadBackend(t, testThreadStreamFilters) }

func testThreadStreamFilters(t *testing.T, b threadBackend) {
	t.Parallel()
	for _, tc := range []struct {
		query  string
		replay []int64
		keep   func(run string, category runevents.Category) bool
	}{
		{"?run_id=r2", []int64{3, 4}, func(run string, _ runevents.Category) bool { return run == "r2" }},
		{"?category=message", []int64{2, 4, 5}, func(_ string, c runevents.Category) bool { return c == runevents.CategoryMessage }},
		{"?category=trace&run_id=r1", []int64{1}, func(run string, c runevents.Category) bool { return run == "r1" && c == runevents.CategoryTrace }},
	} {
		t.Run(tc.query, func(t *testing.T) {
			t.Parallel()
			env, srv := newStreamEnv(t, b, StreamConfig{ReplayPage: 2})
			env.appendAs(t, "alice", validStart("r1"), validAI("r1"), validStart("r2"), validAI("r2"), validAI("r1"))
			c := env.openStream(t, srv, tc.query)
			if got := c.seqs(t, len(tc.replay)); fmt.Sprint(got) != fmt.Sprint(tc.replay) {
				t.Fatalf("replay %v, want %v", got, tc.replay)
			}
			// Live: rows of every run and category, seqs 6 on; the stream
			// shows exactly the matching ones.
			var live [][]runevents.NewEvent
			var want []int64
			seq := int64(6)
			for b := range 4 {
				batch := []runevents.NewEvent{validStart("r1"), validAI("r2"), validAI("r1"), validStart("r2")}
				if b == 3 {
					batch = []runevents.NewEvent{validStart("r1"), validStart("r2"), validAI("r1"), validAI("r2")}
				}
				for _, e := range batch {
					category := runevents.CategoryTrace
					if e.EventType == runevents.EventLLMAIResponse {
						category = runevents.CategoryMessage
					}
					if tc.keep(e.RunID, category) {
						want = append(want, seq)
					}
					seq++
				}
				live = append(live, batch)
			}
			go func() {
				for _, batch := range live {
					env.appendAs(t, "alice", batch...)
				}
			}()
			if got := c.seqs(t, len(want)); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("live %v, want %v", got, want)
			}
		})
	}
}

func TestThreadStreamRefusals(t *testing.T) { forEachThreadBackend(t, testThreadStreamRefusals) }

func testThreadStreamRefusals(t *testing.T, b threadBackend) {
	t.Parallel()
	env := newThreadEnvOn(t, b)
	env.appendAs(t, "alice", validStart("r1"))
	for _, tc := range []struct {
		name, target string
		header       []string
		status       int
		code         runstream.ErrorCode
	}{
		{"bad thread id", "/api/threads/t!/stream", nil, 422, runstream.CodeValidationFailed},
		{"bad run id", "/api/threads/t1/stream?run_id=a/b", nil, 422, runstream.CodeValidationFailed},
		{"unknown category", "/api/threads/t1/stream?category=chatter", nil, 422, runstream.CodeValidationFailed},
		{"two categories", "/api/threads/t1/stream?category=trace&category=message", nil, 422, runstream.CodeValidationFailed},
		{"bad cursor", "/api/threads/t1/stream?after=-1", nil, 422, runstream.CodeValidationFailed},
		{"bad Last-Event-ID", "/api/threads/t1/stream", []string{"Last-Event-ID", "01"}, 422, runstream.CodeValidationFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := env.do(t, "GET", tc.target, "", tc.header...)
			wantError(t, rec, tc.status, tc.code)
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q: stream bytes were sent", ct)
			}
		})
	}
	env = newThreadEnvOn(t, b, func(c *envConfig) { c.Hub = nil })
	wantError(t, env.do(t, "GET", "/api/threads/t1/stream", ""), 503, runstream.CodeUnavailable)
}

// TestThreadStreamEndsOnlyAtMaxLifetime: a thread has no terminal event;
// the stream stays open with heartbeats until its lifetime runs out.
func TestThreadStreamEndsOnlyAtMaxLifetime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		env := newThreadEnv(t, func(c *envConfig) { c.Stream = StreamConfig{MaxLifetime: time.Hour} })
		env.appendAs(t, "alice", validStart("r1"), validAI("r1"))
		rec := newSyncRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			env.api.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), "GET", "/api/threads/t1/stream", nil))
		}()
		synctest.Wait()
		if !strings.Contains(rec.String(), "id: 2\n") {
			t.Fatalf("after replay:\n%s", rec.String())
		}
		time.Sleep(time.Hour - time.Second)
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("the stream ended before its lifetime")
		default:
		}
		if n := strings.Count(rec.String(), ": heartbeat\n"); n < 200 {
			t.Errorf("%d heartbeats in an hour, want one per 15 s of silence", n)
		}
		env.appendAs(t, "alice", validStart("r2"))
		synctest.Wait()
		if !strings.Contains(rec.String(), "id: 3\n") {
			t.Errorf("live record not delivered")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("the stream outlived its lifetime")
		}
	})
}

// countingThreadReader counts the page reads of a thread's rows (the
// thread checks read one row; pages read more) and tells the thread's
// head, as every SQL backend does.
type countingThreadReader struct {
	threads interface {
		runevents.ThreadReader
		runevents.ThreadHead
	}
	pages atomic.Int64
}

func (c *countingThreadReader) ListThreadEvents(ctx context.Context, p runevents.ListThreadEventsParams) ([]runevents.Record, error) {
	if p.Limit > 1 {
		c.pages.Add(1)
	}
	return c.threads.ListThreadEvents(ctx, p)
}

func (c *countingThreadReader) LastThreadSeq(ctx context.Context, threadID string) (int64, error) {
	return c.threads.LastThreadSeq(ctx, threadID)
}

// TestThreadFollowersAtTheHeadReadNoStore: followers at the head of a
// thread, filtered or not, take every live row from the hub; the rows of
// other runs and categories, which leave gaps in a view's seqs, cost no
// store read.
func TestThreadFollowersAtTheHeadReadNoStore(t *testing.T) {
	t.Parallel()
	reader := &countingThreadReader{}
	env := newThreadEnv(t, func(c *envConfig) {
		reader.threads = c.RunEvents.(*memory.RunEventStore)
		c.Threads = reader
		c.Stream = StreamConfig{ReplayPage: 10}
	})
	srv := apitest.Serve(t, env.api, env.api)
	env.appendAs(t, "alice", validStart("r1"), validStart("r2"))
	views := map[string]*threadStreamConn{}
	for _, q := range []string{"", "?run_id=r2", "?category=message", "?run_id=r1&category=message"} {
		views[q] = env.openStream(t, srv, q)
	}
	views[""].seqs(t, 2)
	views["?run_id=r2"].seqs(t, 1)
	// Each follower reads its view once when it opens.
	for deadline := time.Now().Add(10 * time.Second); reader.pages.Load() < int64(len(views)); {
		if time.Now().After(deadline) {
			t.Fatalf("%d page reads for %d opening followers", reader.pages.Load(), len(views))
		}
		time.Sleep(time.Millisecond)
	}
	opened := reader.pages.Load()

	want := map[string][]int64{}
	seq := int64(3)
	for i := range 30 {
		e := validStart("r1")
		switch i % 3 {
		case 1:
			e = validAI("r1")
		case 2:
			e = validAI("r2")
		}
		env.appendAs(t, "alice", e)
		want[""] = append(want[""], seq)
		if e.RunID == "r2" {
			want["?run_id=r2"] = append(want["?run_id=r2"], seq)
		}
		if e.EventType == runevents.EventLLMAIResponse {
			want["?category=message"] = append(want["?category=message"], seq)
			if e.RunID == "r1" {
				want["?run_id=r1&category=message"] = append(want["?run_id=r1&category=message"], seq)
			}
		}
		seq++
	}
	for q, c := range views {
		if got := c.seqs(t, len(want[q])); fmt.Sprint(got) != fmt.Sprint(want[q]) {
			t.Errorf("view %q got %v, want %v", q, got, want[q])
		}
	}
	if n := reader.pages.Load() - opened; n != 0 {
		t.Errorf("30 live rows made %d page reads of the store, want 0", n)
	}
}

// TestThreadViewsUnderConcurrentAppendsAndCuts: with concurrent POSTs,
// which publish out of order (memory) or a group commit at once (SQLite,
// PostgreSQL), and followers whose subscriptions hold 8 events (so they
// fall behind and are cut), every view still gets exactly its rows, once
// and in order.
func TestThreadViewsUnderConcurrentAppendsAndCuts(t *testing.T) {
	forEachThreadBackend(t, testThreadViewsUnderConcurrentAppendsAndCuts)
}

func testThreadViewsUnderConcurrentAppendsAndCuts(t *testing.T, b threadBackend) {
	t.Parallel()
	stores := b.Open(t)
	hub := live.New(live.Config{BufferEvents: 8, Poll: streams.StreamPoller(nil, stores.Events), PollInterval: 20 * time.Millisecond})
	go hub.Run(t.Context()) // until the test ends
	log := eventlog.NewThreadLog(stores.Events, testValidator, hub, eventlog.ThreadLimits{})
	env := newThreadEnv(t, func(c *envConfig) { c.RunEvents, c.Runs, c.Hub, c.ThreadLog = stores.Events, stores.Runs, hub, log })
	env.log = log
	srv := apitest.Serve(t, env.api, env.api)
	env.appendAs(t, "alice", validStart("r0"))

	views := []string{"", "?run_id=r1", "?category=message", "?run_id=r0&category=trace"}
	conns := map[string]*threadStreamConn{}
	for _, q := range views {
		conns[q] = env.openStream(t, srv, q)
	}
	const appenders, each = 8, 40
	var wg sync.WaitGroup
	for a := range appenders {
		wg.Go(func() {
			for i := range each {
				event := startJSON
				if i%3 == 0 {
					event = aiJSON
				}
				path := fmt.Sprintf("/api/threads/t1/runs/r%d/events", (a+i)%2)
				if rec := env.do(t, "POST", path, batch(event)); rec.Code != http.StatusCreated {
					t.Errorf("POST %s: %d %s", path, rec.Code, rec.Body)
				}
			}
		})
	}
	wg.Wait()
	rows, err := stores.Events.ListThreadEvents(t.Context(), runevents.ListThreadEventsParams{ThreadID: "t1", Owner: runevents.AnyOwner, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1+appenders*each {
		t.Fatalf("%d rows stored, want %d", len(rows), 1+appenders*each)
	}
	for _, q := range views {
		var want []int64
		for _, rec := range rows {
			if (q == "") || (q == "?run_id=r1" && rec.RunID == "r1") ||
				(q == "?category=message" && rec.Category == runevents.CategoryMessage) ||
				(q == "?run_id=r0&category=trace" && rec.RunID == "r0" && rec.Category == runevents.CategoryTrace) {
				want = append(want, rec.Seq)
			}
		}
		if got := conns[q].seqs(t, len(want)); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("view %q got %v, want %v", q, got, want)
		}
	}
}
