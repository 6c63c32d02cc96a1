package producer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/httpapi"
	"github.com/runstream/runstream/journal"
	"github.com/runstream/runstream/producer"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/sqlite"
	"github.com/runstream/runstream/subagent"
	"github.com/runstream/runstream/threadsvc"
	"github.com/runstream/runstream/workspace"
)

var (
	_ journal.Sink       = (*producer.Writer)(nil)
	_ subagent.Appender  = (*producer.Writer)(nil)
	_ workspace.Appender = (*producer.Writer)(nil)
)

// faults decides what the server does with the next requests.
type faults struct {
	mu sync.Mutex
	// refuse answers 503 without handling the request.
	refuse int
	// loseAnswer handles the request (it commits) and answers 502.
	loseAnswer int
	// stall handles the request after the client gave up waiting.
	stall  time.Duration
	stalls int
	// requests counts what reached the server.
	requests int
	keys     map[string]int
}

func (f *faults) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests++
		if k := r.Header.Get("Idempotency-Key"); k != "" {
			f.keys[k]++
		}
		refuse, lose, stall := f.refuse > 0, f.loseAnswer > 0, f.stalls > 0
		switch {
		case refuse:
			f.refuse--
		case lose:
			f.loseAnswer--
		case stall:
			f.stalls--
		}
		d := f.stall
		f.mu.Unlock()
		switch {
		case refuse:
			http.Error(w, `{"code":"UNAVAILABLE","message":"try later"}`, http.StatusServiceUnavailable)
		case lose:
			h.ServeHTTP(httptest.NewRecorder(), r)
			http.Error(w, "bad gateway", http.StatusBadGateway)
		case stall:
			time.Sleep(d)
			h.ServeHTTP(w, r)
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// server is a real HTTP API over a SQLite database that the test stops and
// starts again on the same address.
type server struct {
	t      *testing.T
	path   string
	addr   string
	faults *faults

	db   *sqlite.DB
	http *http.Server
	done chan struct{}
}

func newServer(t *testing.T) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, path: filepath.Join(t.TempDir(), "runstream.db"), addr: ln.Addr().String(), faults: &faults{keys: map[string]int{}}}
	s.serve(ln)
	t.Cleanup(s.stop)
	return s
}

func (s *server) url() string { return "http://" + s.addr }

func (s *server) serve(ln net.Listener) {
	s.t.Helper()
	db, err := sqlite.Open(context.Background(), sqlite.Config{Path: s.path, Synchronous: "NORMAL"})
	if err != nil {
		s.t.Fatal(err)
	}
	validator, err := contracts.NewValidator()
	if err != nil {
		s.t.Fatal(err)
	}
	log := eventlog.NewThreadLog(db.RunEvents(), validator, nil, eventlog.ThreadLimits{})
	svc := threadsvc.New(db.RunEvents(), db.RunEvents(), db.Runs(), log, nil, threadsvc.Config{})
	api := httpapi.New(httpapi.Config{}, nil, svc)
	s.db, s.http, s.done = db, &http.Server{Handler: s.faults.wrap(api)}, make(chan struct{})
	go func(h *http.Server, done chan struct{}) {
		defer close(done)
		_ = h.Serve(ln)
	}(s.http, s.done)
}

func (s *server) stop() {
	if s.http == nil {
		return
	}
	_ = s.http.Close()
	<-s.done
	_ = s.db.Close()
	s.http = nil
}

func (s *server) start() {
	s.t.Helper()
	var ln net.Listener
	var err error
	for range 50 { // the port may linger for a moment after the close
		if ln, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		s.t.Fatal(err)
	}
	s.serve(ln)
}

// events reads a run's stored events.
func (s *server) events(runID string) []runevents.Record {
	s.t.Helper()
	recs, err := s.db.RunEvents().ListEvents(context.Background(), runevents.ListEventsParams{ThreadID: "t1", RunID: runID, Limit: 10000, Owner: runevents.AnyOwner})
	if err != nil {
		s.t.Fatal(err)
	}
	return recs
}

func event(run string, i int) runevents.NewEvent {
	return runevents.NewEvent{ThreadID: "t1", RunID: run, EventType: "middleware:guardrail", Category: runevents.CategoryMiddleware,
		Content:  json.RawMessage(fmt.Sprintf(`{"name":"%d","hook":"h","action":"a","changes":{}}`, i)),
		Metadata: json.RawMessage(`{}`), CreatedAt: time.Now().UTC()}
}

func fastConfig(url string) producer.Config {
	return producer.Config{URL: url, MaxBatchEvents: 7, Linger: 2 * time.Millisecond, MinBackoff: 2 * time.Millisecond,
		MaxBackoff: 40 * time.Millisecond, RequestTimeout: 300 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
}

// checkOnceInOrder fails unless the run holds events 0..n-1, each once, in
// order.
func checkOnceInOrder(t *testing.T, recs []runevents.Record, n int) {
	t.Helper()
	if len(recs) != n {
		t.Fatalf("%d events stored, want %d", len(recs), n)
	}
	for i, r := range recs {
		var c struct{ Name string }
		if err := json.Unmarshal(r.Content, &c); err != nil {
			t.Fatal(err)
		}
		if c.Name != fmt.Sprint(i) {
			t.Fatalf("event %d is %q: lost, duplicated or reordered", i, c.Name)
		}
	}
}

// TestNothingLostAcrossFailuresStallsAndRestart sends two runs' events
// while the server refuses requests, loses answers after committing, stalls
// past the client's timeout, and is stopped and started again.
func TestNothingLostAcrossFailuresStallsAndRestart(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	w, err := producer.New(fastConfig(srv.url()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const n = 120
	appendRange := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			for _, run := range []string{"ra", "rb"} {
				if err := w.Append(ctx, []runevents.NewEvent{event(run, i)}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	srv.faults.mu.Lock()
	srv.faults.refuse, srv.faults.loseAnswer = 3, 3
	srv.faults.mu.Unlock()
	appendRange(0, 30)
	waitFor(t, func() bool { m := w.Metrics(); return m.Sent >= 60 })

	srv.faults.mu.Lock()
	srv.faults.stall, srv.faults.stalls = 600*time.Millisecond, 2
	srv.faults.mu.Unlock()
	appendRange(30, 60)
	waitFor(t, func() bool { m := w.Metrics(); return m.Sent >= 120 })

	srv.stop()
	appendRange(60, 90) // queued while the server is down
	time.Sleep(100 * time.Millisecond)
	srv.start()
	appendRange(90, n)

	closeCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := w.Close(closeCtx); err != nil {
		t.Fatal(err)
	}
	checkOnceInOrder(t, srv.events("ra"), n)
	checkOnceInOrder(t, srv.events("rb"), n)
	m := w.Metrics()
	if m.Sent != 2*n || m.Dropped != 0 || m.Retried == 0 || m.Queued != 0 {
		t.Errorf("metrics = %+v", m)
	}
	srv.faults.mu.Lock()
	defer srv.faults.mu.Unlock()
	retriedKeys := 0
	for _, c := range srv.faults.keys {
		if c > 1 {
			retriedKeys++
		}
	}
	if retriedKeys == 0 {
		t.Error("no batch was retried under its key")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 20s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestBatchesByCountAndRun(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	cfg := fastConfig(srv.url())
	cfg.Linger = time.Hour // only full batches, a run change and Close send
	w, err := producer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var events []runevents.NewEvent
	for i := range 10 {
		events = append(events, event("ra", i))
	}
	events = append(events, event("rb", 0))
	if err := w.Append(t.Context(), events); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return w.Metrics().Sent == 10 })
	if m := w.Metrics(); m.Batches != 2 {
		t.Errorf("metrics = %+v, want batches of 7 and 3", m)
	}
	if err := w.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkOnceInOrder(t, srv.events("ra"), 10)
	checkOnceInOrder(t, srv.events("rb"), 1)
}

func TestBatchesByBytes(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	cfg := fastConfig(srv.url())
	cfg.MaxBatchEvents = 100
	one, _ := json.Marshal(event("ra", 0))
	cfg.MaxBatchBytes = 3 * len(one) // about two events a request
	w, err := producer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var events []runevents.NewEvent
	for i := range 9 {
		events = append(events, event("ra", i))
	}
	if err := w.Append(t.Context(), events); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if m := w.Metrics(); m.Batches < 3 {
		t.Errorf("metrics = %+v: batches not bounded by bytes", m)
	}
	checkOnceInOrder(t, srv.events("ra"), 9)
}

func TestFullQueue(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	srv.stop() // nothing answers
	cfg := fastConfig(srv.url())
	cfg.QueueEvents = 3
	cfg.ReportFull = true
	w, err := producer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(t.Context(), []runevents.NewEvent{event("rw", 0), event("rw", 1), event("rw", 2)}); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(t.Context(), []runevents.NewEvent{event("rw", 3)}); !errors.Is(err, producer.ErrQueueFull) {
		t.Fatalf("Append to a full queue = %v", err)
	}

	cfg.ReportFull = false
	blocking, err := producer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := blocking.Append(t.Context(), []runevents.NewEvent{event("ra", 0), event("ra", 1), event("ra", 2)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := blocking.Append(ctx, []runevents.NewEvent{event("ra", 3)}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blocked Append = %v", err)
	}
	srv.start()
	if err := blocking.Append(t.Context(), []runevents.NewEvent{event("ra", 3)}); err != nil {
		t.Fatalf("Append once the server is back = %v", err)
	}
	if err := blocking.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkOnceInOrder(t, srv.events("ra"), 4)

	// the first writer delivers what it queued before the refusal
	if err := w.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	checkOnceInOrder(t, srv.events("rw"), 3)
}

func TestCloseWithExpiredContextDrops(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	srv.stop()
	w, err := producer.New(fastConfig(srv.url()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(t.Context(), []runevents.NewEvent{event("ra", 0), event("ra", 1)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := w.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v", err)
	}
	if m := w.Metrics(); m.Dropped != 2 || m.Sent != 0 || m.Queued != 0 {
		t.Errorf("metrics = %+v", m)
	}
	if err := w.Append(t.Context(), []runevents.NewEvent{event("ra", 2)}); !errors.Is(err, producer.ErrClosed) {
		t.Errorf("Append after Close = %v", err)
	}
}

func TestRefusedBatchDropped(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	cfg := fastConfig(srv.url())
	cfg.Linger = time.Millisecond
	w, err := producer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	bad := event("ra", 1)
	bad.EventType = "not.catalogued"
	if err := w.Append(t.Context(), []runevents.NewEvent{event("ra", 0)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return w.Metrics().Sent == 1 })
	if err := w.Append(t.Context(), []runevents.NewEvent{bad}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return w.Metrics().Dropped == 1 })
	if err := w.Append(t.Context(), []runevents.NewEvent{event("ra", 1)}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(t.Context()); err == nil {
		t.Error("Close hid a dropped batch")
	}
	checkOnceInOrder(t, srv.events("ra"), 2)
	if m := w.Metrics(); m.Retried != 0 {
		t.Errorf("a refused batch was retried: %+v", m)
	}
}

func TestSingletonAndRunRow(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	w, err := producer.New(fastConfig(srv.url()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := w.Append(ctx, []runevents.NewEvent{event("ra", 0)}); err != nil {
		t.Fatal(err)
	}
	receipt := runevents.NewEvent{ThreadID: "t1", RunID: "ra", EventType: runevents.EventRunDelivery,
		Content: json.RawMessage(`{"presented":0,"paths":[],"by_tool":{}}`)}
	srv.faults.mu.Lock()
	srv.faults.loseAnswer = 1 // the first singleton commits, its answer is lost
	srv.faults.mu.Unlock()
	created, err := w.AppendIfAbsent(ctx, receipt)
	if err != nil {
		t.Fatal(err)
	}
	if !created {
		t.Error("the receipt's replayed answer lost created=true")
	}
	if created, err := w.AppendIfAbsent(ctx, receipt); err != nil || created {
		t.Fatalf("second receipt: %v, %v", created, err)
	}
	recs := srv.events("ra")
	if len(recs) != 2 || recs[0].EventType != "middleware:guardrail" || recs[1].EventType != runevents.EventRunDelivery {
		t.Fatalf("events = %v", recs)
	}
	row := runevents.ThreadRun{ThreadID: "t1", RunID: "ra", Status: runevents.RunSuccess, ModelName: "m",
		Metadata: json.RawMessage(`{"message_count":3}`), Usage: runevents.Usage{TotalTokens: 45, LLMCallCount: 2,
			ByModel: map[string]runevents.ModelUsage{"m": {TotalTokens: 45}}}}
	srv.faults.mu.Lock()
	srv.faults.refuse = 2
	srv.faults.mu.Unlock()
	if err := w.PutRun(ctx, row); err != nil {
		t.Fatal(err)
	}
	got, err := srv.db.Runs().GetRun(ctx, "t1", "ra", runevents.AnyOwner)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != runevents.RunSuccess || got.Usage.TotalTokens != 45 || !bytes.Contains(got.Metadata, []byte(`"message_count":3`)) {
		t.Errorf("run row = %+v", got)
	}
	// A finished run keeps its status: a late write is refused for good,
	// at once, not retried until the context ends.
	late, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	row.Status = runevents.RunRunning
	var apiErr *producer.APIError
	err = w.PutRun(late, row)
	if !errors.As(err, &apiErr) || apiErr.Code != "CONFLICT" || late.Err() != nil {
		t.Errorf("a late write over a finished row: %v (context: %v), want CONFLICT at once", err, late.Err())
	}
	if code := runstream.ErrorCodeOf(err); code != runstream.CodeConflict {
		t.Errorf("the refusal's code, as runstream reads it: %s, want CONFLICT", code)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRunRowDeerFlowFields: PutRun sends the DeerFlow run row fields, and
// a journal writing through the producer puts its message count on the
// row's message_count, not only into its metadata.
func TestRunRowDeerFlowFields(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	ctx := t.Context()
	w, err := producer.New(fastConfig(srv.url()))
	if err != nil {
		t.Fatal(err)
	}
	row := runevents.ThreadRun{ThreadID: "t1", RunID: "rd", Status: runevents.RunInterrupted, AssistantID: "lead_agent",
		Kwargs: json.RawMessage(`{"input":{"messages":[]}}`), MultitaskStrategy: "enqueue", MessageCount: 7, StopReason: "user_cancel"}
	if err := w.PutRun(ctx, row); err != nil {
		t.Fatal(err)
	}
	got, err := srv.db.Runs().GetRun(ctx, "t1", "rd", runevents.AnyOwner)
	if err != nil {
		t.Fatal(err)
	}
	if got.AssistantID != "lead_agent" || !bytes.Equal(got.Kwargs, row.Kwargs) || got.MultitaskStrategy != "enqueue" ||
		got.MessageCount != 7 || got.StopReason != "user_cancel" {
		t.Errorf("run row = %+v; want the DeerFlow fields sent", got)
	}

	j, err := journal.New(w, journal.Options{ThreadID: "t1", RunID: "rj"})
	if err != nil {
		t.Fatal(err)
	}
	j.ChatModelStart(ctx, journal.ChatModelStart{CallID: "c1", Prompts: [][]journal.Message{{{Type: "human", Content: journal.TextContent("Hi")}}}})
	j.LLMEnd(ctx, journal.LLMEnd{CallID: "c1", Generations: []*journal.Message{{Type: "ai", Content: journal.TextContent("Hello"),
		UsageMetadata: &journal.Usage{InputTokens: 3, OutputTokens: 2, TotalTokens: 5}}}})
	if err := j.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	base := runevents.ThreadRun{ThreadID: "t1", RunID: "rj", AssistantID: "lead_agent", MultitaskStrategy: "reject"}
	if err := j.Complete(ctx, base, runevents.RunSuccess); err != nil {
		t.Fatal(err)
	}
	got, err = srv.db.Runs().GetRun(ctx, "t1", "rj", runevents.AnyOwner)
	if err != nil {
		t.Fatal(err)
	}
	if got.MessageCount != 2 || got.AssistantID != "lead_agent" || got.Status != runevents.RunSuccess || got.Usage.TotalTokens != 5 {
		t.Errorf("journal's run row = %+v; want message_count 2 and assistant_id lead_agent", got)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// New refuses a URL that is not an absolute http(s) URL without echoing
// it: it may hold a password.
func TestBadURLNotEchoed(t *testing.T) {
	for _, u := range []string{"ftp://user:s3cret-pw@127.0.0.1:1", "user:s3cret-pw@127.0.0.1:1"} {
		w, err := producer.New(producer.Config{URL: u})
		if err == nil {
			w.Close(context.Background())
			t.Fatalf("%s was accepted", u)
		}
		if strings.Contains(err.Error(), "s3cret-pw") {
			t.Fatalf("the error echoes the password: %v", err)
		}
	}
}
