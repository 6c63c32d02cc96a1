package langgraphsdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream/chunkpush"
)

// producer opens a chunkpush stream for the run on the server at base,
// with the control long-poll of controlWait (negative: none).
func producer(t *testing.T, base, threadID, runID string, controlWait time.Duration) *chunkpush.Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := chunkpush.Open(ctx, chunkpush.Config{
		URL: base, ThreadID: threadID, RunID: runID,
		MaxBatchChunks: 8, Linger: 5 * time.Millisecond,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 500 * time.Millisecond,
		ControlWait: controlWait,
	})
	if err != nil {
		t.Fatalf("open the producer: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

func push(t *testing.T, p *chunkpush.Stream, chunks []scriptChunk, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		idx, err := p.Push(context.Background(), chunks[i].Event, chunks[i].Data)
		if err != nil {
			t.Fatalf("push chunk %d: %v", i, err)
		}
		if idx != int64(i) {
			t.Fatalf("chunk %d got index %d", i, idx)
		}
	}
}

func endRun(t *testing.T, p *chunkpush.Stream, status string) chunkpush.Answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ans, err := p.End(ctx, status, nil)
	if err != nil {
		t.Fatalf("end the run %s: %v", status, err)
	}
	return ans
}

func ids(prefix string) (string, string) {
	n := time.Now().UnixNano()
	return fmt.Sprintf("%s-thread-%d", prefix, n), fmt.Sprintf("%s-run-%d", prefix, n)
}

// The SDK's joinStream from -1 sees every pushed chunk exactly once, in
// order, with its index as id, through a connection cut mid-stream (it
// reconnects to the Location with the last id it saw) and a SIGKILL of the
// server mid-run while the producer keeps pushing (a restart on the same
// store; the proxy answers 502 meanwhile, as nginx would). On PostgreSQL
// the producer pushes to instance A and the SDK joins on instance B. Then
// the run reads success, a cancel of it is 409, an unknown run is 404.
func TestSDKJoinAcrossCutAndRestart(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			harnessDir(t)
			store := storeArgs(t, backend)
			a := startServer(t, store)
			b := a
			if backend == "postgres" {
				b = startServer(t, store)
			}
			px := startProxy(t, b.Addr())
			api := px.base() + "/api"
			threadID, runID := ids("join")
			chunks, secret := script(threadID, runID, 5)
			n := len(chunks)
			n1, n2 := n/3, 2*n/3

			p := producer(t, a.Base(), threadID, runID, 0)
			push(t, p, chunks, 0, n1)
			h := runHarness(t, "join", api, threadID, runID, "-1")
			h.waitFor(fmt.Sprintf("chunk %d", n1-1), sawID(strconv.Itoa(n1-1)))
			push(t, p, chunks, n1, n2)
			h.waitFor(fmt.Sprintf("chunk %d", n1+1), sawID(strconv.Itoa(n1+1)))
			if px.cut() == 0 { // mid-burst: chunks up to n2-1 are on their way
				t.Fatal("the proxy had no connection to cut")
			}
			h.waitFor(fmt.Sprintf("chunk %d after the cut", n2-1), sawID(strconv.Itoa(n2-1)))

			a.Kill()
			b.Kill()
			push(t, p, chunks, n2, n) // queued: sent once the server is back
			px.waitBadGateway()       // the SDK retries its reconnect meanwhile
			a.Start()
			if b != a {
				b.Start()
			}
			if ans := endRun(t, p, chunkpush.StatusSuccess); ans.NextIndex != int64(n) || ans.Status != "success" {
				t.Fatalf("end answer %+v", ans)
			}
			lines := h.wait()
			checkExactlyOnce(t, lines, threadID, runID, chunks, secret, nil)
			checkReconnects(t, lines, threadID, runID)
			checkResumedMidStream(t, lines, n1+1)

			if got := sdkCall(t, "get", api, threadID, runID); got.Kind != "result" || !strings.Contains(string(got.Value), `"status":"success"`) {
				t.Fatalf("runs.get after the end: %+v", got)
			}
			if got := sdkCall(t, "cancel", api, threadID, runID, "0", "interrupt"); got.Kind != "error" || got.Status != 409 || !strings.Contains(got.Message, "not cancellable") {
				t.Fatalf("runs.cancel of a finished run: %+v", got)
			}
			if got := sdkCall(t, "get", api, threadID, "no-such-run"); got.Kind != "error" || got.Status != 404 {
				t.Fatalf("runs.get of an unknown run: %+v", got)
			}
			if got := sdkCall(t, "join", api, threadID, "no-such-run", "-1"); got.Kind != "error" || got.Status != 404 {
				t.Fatalf("joinStream of an unknown run: %+v", got)
			}

			// A finished run joined again from -1 replays everything,
			// filtered by the SDK's streamMode array.
			lines = runHarness(t, "join", api, threadID, runID, "-1", "values", "messages-tuple").wait()
			checkExactlyOnce(t, lines, threadID, runID, chunks, secret, func(event string) bool {
				return event == "values" || event == "messages"
			})
		})
	}
}

// A join stream ends by aborting its connection, never cleanly, when its
// lifetime (--max-stream-lifetime) expires and when the server shuts down
// gracefully (SIGTERM): the SDK reconnects with the last id each time and
// sees every chunk exactly once, then the end.
func TestSDKResumesAfterLifetimeAndShutdown(t *testing.T) {
	harnessDir(t)
	s := startServer(t, append(storeArgs(t, "sqlite"), "--max-stream-lifetime", "1s"))
	px := startProxy(t, s.Addr()) // as nginx in front: 502 while the server restarts
	api := px.base() + "/api"
	threadID, runID := ids("lifetime")
	chunks, secret := script(threadID, runID, 2)
	n := len(chunks)
	// With the control long-poll: the shutdown ends it at once (503), and
	// the producer polls the restarted server.
	p := producer(t, s.Base(), threadID, runID, 0)
	push(t, p, chunks, 0, n/3)
	h := runHarness(t, "join", api, threadID, runID, "-1")
	h.waitFor("a reconnect after the stream's lifetime", func(lines []line) bool {
		return sawID(strconv.Itoa(n/3-1))(lines) && countRequests(lines) >= 2
	})
	push(t, p, chunks, n/3, 2*n/3)
	h.waitFor(fmt.Sprintf("chunk %d", 2*n/3-1), sawID(strconv.Itoa(2*n/3-1)))
	began := time.Now()
	s.Terminate()
	t.Logf("graceful shutdown took %v", time.Since(began).Round(time.Millisecond))
	push(t, p, chunks, 2*n/3, n)
	s.Start()
	endRun(t, p, chunkpush.StatusSuccess)
	lines := h.wait()
	checkExactlyOnce(t, lines, threadID, runID, chunks, secret, nil)
	if joins := checkReconnects(t, lines, threadID, runID); joins < 3 {
		t.Fatalf("%d join requests answered 200, want at least 3 (start, after the lifetime, after the shutdown)", joins)
	}
}

// checkResumedMidStream checks what a cut of the first join's connection
// guarantees, whatever the scheduling of the reconnects: that connection
// (200) yielded chunks up to at least id from and broke without the end,
// and the SDK's next request resumed from a chunk id (at least from), not
// from the start; the end came on a later connection answered 200.
// checkReconnects checks that every request carried the last id yielded.
func checkResumedMidStream(t *testing.T, lines []line, from int) {
	t.Helper()
	type conn struct {
		lastEventID string
		status      int
		last        int // the greatest chunk id yielded, or -1
		end         bool
	}
	var conns []*conn
	for _, l := range lines {
		switch {
		case l.Kind == "request":
			conns = append(conns, &conn{lastEventID: deref(l.LastEventID), last: -1})
		case len(conns) == 0:
		case l.Kind == "response":
			conns[len(conns)-1].status = l.Status
		case l.Kind == "event" && l.Event == "end":
			conns[len(conns)-1].end = true
		case l.Kind == "event" && l.ID != nil:
			if id, err := strconv.Atoi(*l.ID); err == nil {
				conns[len(conns)-1].last = max(conns[len(conns)-1].last, id)
			}
		}
	}
	if len(conns) < 2 {
		t.Fatalf("%d join requests, want the first and a reconnect after the cut:\n%s", len(conns), dump(lines))
	}
	first, next := conns[0], conns[1]
	if first.status != 200 || first.last < from || first.end {
		t.Fatalf("the cut connection: status %d, last chunk id %d, end %t; want 200, chunks up to at least %d, no end:\n%s",
			first.status, first.last, first.end, from, dump(lines))
	}
	if id, err := strconv.Atoi(next.lastEventID); err != nil || id < from {
		t.Fatalf("the reconnect after the cut sent Last-Event-ID %q, want a chunk id >= %d (a resume, not a restart):\n%s", next.lastEventID, from, dump(lines))
	}
	ended := false
	for _, c := range conns[1:] {
		ended = ended || c.status == 200 && c.end
	}
	if !ended {
		t.Fatalf("no reconnect answered 200 carried the end:\n%s", dump(lines))
	}
}

func countRequests(lines []line) int {
	n := 0
	for _, l := range lines {
		if l.Kind == "request" {
			n++
		}
	}
	return n
}

// A producer that stops without an end (its process died) leaves no
// joiner hanging: once its lease (--chunk-lease) expires the sweeper ends
// the run with an error chunk and the end; the SDK yields them, runs.get
// reads error, and the producer, were it alive, is fenced.
func TestSDKSeesRunOfDeadProducerEnd(t *testing.T) {
	harnessDir(t)
	s := startServer(t, append(storeArgs(t, "sqlite"), "--chunk-lease", "2s"))
	api := s.Base() + "/api"
	threadID, runID := ids("lease")
	chunks, secret := script(threadID, runID, 1)
	p := producer(t, s.Base(), threadID, runID, -1)
	push(t, p, chunks, 0, 8)
	h := runHarness(t, "join", api, threadID, runID, "-1")
	h.waitFor("chunk 7", sawID("7"))
	p.Close() // dies: no more pushes, no heartbeat, no end
	lines := h.wait()
	want := append(chunks[:8:8], scriptChunk{Event: "error"}) // data checked below
	checkExactlyOnce(t, lines, threadID, runID, want, secret, nil)
	for _, l := range lines {
		if l.Kind == "event" && l.Event == "error" && !strings.Contains(string(l.Data), `"name":"LeaseExpiredError"`) {
			t.Fatalf("the sweeper's error chunk: %s", l.Data)
		}
	}
	if got := sdkCall(t, "get", api, threadID, runID); got.Kind != "result" || !strings.Contains(string(got.Value), `"status":"error"`) {
		t.Fatalf("runs.get after the sweep: %+v", got)
	}
	late, err := chunkpush.Open(context.Background(), chunkpush.Config{URL: s.Base(), ThreadID: threadID, RunID: runID, ControlWait: -1})
	if !errors.Is(err, chunkpush.ErrFenced) {
		if late != nil {
			late.Close()
		}
		t.Fatalf("the dead producer's epoch after the sweep: %v", err)
	}
}

// A cursor below what the run keeps (--max-chunks-per-run) gets
// DeerFlow's gap event, then a clean end: the SDK yields it and stops,
// and the chat reloads the thread's state. A cursor within what is kept
// resumes exactly.
func TestSDKGapBelowRetention(t *testing.T) {
	harnessDir(t)
	s := startServer(t, append(storeArgs(t, "sqlite"), "--max-chunks-per-run", "5"))
	api := s.Base() + "/api"
	threadID, runID := ids("gap")
	chunks, _ := script(threadID, runID, 1)
	n := len(chunks)
	p := producer(t, s.Base(), threadID, runID, -1)
	push(t, p, chunks, 0, n)
	endRun(t, p, chunkpush.StatusSuccess)

	lines := runHarness(t, "join", api, threadID, runID, "-1").wait()
	var events []line
	for _, l := range lines {
		if l.Kind == "event" {
			events = append(events, l)
		}
	}
	if len(events) != 2 || events[0].Event != "metadata" || events[1].Event != "gap" || lines[len(lines)-1].Kind != "done" {
		t.Fatalf("want metadata, gap, done:\n%s", dump(lines))
	}
	var gap map[string]any
	if err := json.Unmarshal(events[1].Data, &gap); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"code": "stream_replay_gap", "run_id": runID, "requested_event_id": "-1",
		"earliest_available_event_id": strconv.Itoa(n - 5), "latest_available_event_id": strconv.Itoa(n - 1),
		"recovery": "reload_durable_state"}
	if !reflect.DeepEqual(gap, want) {
		t.Fatalf("gap data %v, want %v", gap, want)
	}

	lines = runHarness(t, "join", api, threadID, runID, strconv.Itoa(n-3)).wait()
	var got []string
	for _, l := range lines {
		if l.Kind == "event" && l.Event != "metadata" && l.Event != "end" {
			got = append(got, deref(l.ID))
		}
	}
	if !reflect.DeepEqual(got, []string{strconv.Itoa(n - 2), strconv.Itoa(n - 1)}) || lines[len(lines)-2].Event != "end" {
		t.Fatalf("resume after %d within what is kept:\n%s", n-3, dump(lines))
	}
}

// The SDK cancels a running run: cancel(wait=1) blocks until the producer,
// which sees the request in its control long-poll, ends the run
// interrupted (204); the joiner gets the end; a second cancel is 409, and
// so are the join and the cancel of a run runstream only stores.
func TestSDKCancelRunningRun(t *testing.T) {
	harnessDir(t)
	s := startServer(t, storeArgs(t, "sqlite"))
	api := s.Base() + "/api"
	threadID, runID := ids("cancel")
	chunks, _ := script(threadID, runID, 1)
	p := producer(t, s.Base(), threadID, runID, 0)
	push(t, p, chunks, 0, 5)
	h := runHarness(t, "join", api, threadID, runID, "-1")
	h.waitFor("chunk 4", sawID("4"))

	if got := sdkCall(t, "get", api, threadID, runID); got.Kind != "result" || !strings.Contains(string(got.Value), `"status":"running"`) {
		t.Fatalf("runs.get of a running run: %+v", got)
	}
	canceller := runHarness(t, "cancel", api, threadID, runID, "1", "interrupt")
	select {
	case c := <-p.Cancels():
		if c.Action != "interrupt" {
			t.Fatalf("cancel %+v", c)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the producer saw no cancel; canceller:\n%s", dump(canceller.snapshot()))
	}
	push(t, p, chunks, 5, 6)
	endRun(t, p, chunkpush.StatusInterrupted)
	res := canceller.wait()
	if l := res[len(res)-1]; l.Kind != "result" || string(l.Value) != "null" {
		t.Fatalf("cancel(wait=1) answered:\n%s", dump(res))
	}
	var statuses []int
	for _, l := range res {
		if l.Kind == "response" {
			statuses = append(statuses, l.Status)
		}
	}
	if !reflect.DeepEqual(statuses, []int{204}) {
		t.Fatalf("cancel(wait=1) statuses %v, want [204]", statuses)
	}
	lines := h.wait()
	checkExactlyOnce(t, lines, threadID, runID, chunks[:6], -1, nil)
	if got := sdkCall(t, "get", api, threadID, runID); got.Kind != "result" || !strings.Contains(string(got.Value), `"status":"interrupted"`) {
		t.Fatalf("runs.get after the cancel: %+v", got)
	}
	if got := sdkCall(t, "cancel", api, threadID, runID, "0", "interrupt"); got.Kind != "error" || got.Status != 409 {
		t.Fatalf("a second cancel: %+v", got)
	}

	// A run runstream only stores (its row, written through the thread
	// API, no chunk stream): joining it is 409, cancelling it 409 as
	// DeerFlow answers a running run not active on its worker.
	req, err := http.NewRequest(http.MethodPut, s.Base()+"/api/threads/"+threadID+"/runs/stored-run", strings.NewReader(`{"status":"running"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("PUT the run row: %d", resp.StatusCode)
	}
	if got := sdkCall(t, "join", api, threadID, "stored-run", "-1"); got.Kind != "error" || got.Status != 409 {
		t.Fatalf("joinStream of a stored-only run: %+v", got)
	}
	if got := sdkCall(t, "cancel", api, threadID, "stored-run", "0", "interrupt"); got.Kind != "error" || got.Status != 409 || !strings.Contains(got.Message, "Run stored-run is not active on this worker and cannot be cancelled") {
		t.Fatalf("runs.cancel of a stored-only run: %+v", got)
	}
}

// checkExactlyOnce checks the events joinStream yielded: metadata first
// (with the run and thread ids), then each pushed chunk shown (all, or
// those show keeps) exactly once, in order, with its index as id and its
// data as pushed (the chunk at secret without the credential but with its
// reasoning), then end with null data, then the harness's done.
func checkExactlyOnce(t *testing.T, lines []line, threadID, runID string, chunks []scriptChunk, secret int, show func(string) bool) {
	t.Helper()
	var events []line
	for _, l := range lines {
		switch l.Kind {
		case "event":
			events = append(events, l)
		case "error", "garbage":
			t.Fatalf("harness: %+v\n%s", l, dump(lines))
		}
	}
	if lines[len(lines)-1].Kind != "done" {
		t.Fatalf("the harness did not finish cleanly:\n%s", dump(lines))
	}
	if len(events) < 2 || events[0].Event != "metadata" || events[len(events)-1].Event != "end" || string(events[len(events)-1].Data) != "null" {
		t.Fatalf("want metadata … end(null):\n%s", dump(lines))
	}
	var meta struct{ RunID, ThreadID string }
	if err := json.Unmarshal(events[0].Data, &struct {
		RunID    *string `json:"run_id"`
		ThreadID *string `json:"thread_id"`
	}{&meta.RunID, &meta.ThreadID}); err != nil || meta.RunID != runID || meta.ThreadID != threadID {
		t.Fatalf("metadata %s (%v)", events[0].Data, err)
	}
	var got []line
	for _, e := range events {
		if e.Event != "metadata" && e.Event != "end" {
			got = append(got, e)
		}
	}
	k := 0
	for i, c := range chunks {
		if show != nil && !show(c.Event) {
			continue
		}
		if k >= len(got) {
			t.Fatalf("chunk %d (%s) missing; got %d chunk events:\n%s", i, c.Event, len(got), dump(lines))
		}
		e := got[k]
		k++
		if e.ID == nil || *e.ID != strconv.Itoa(i) || e.Event != c.Event {
			t.Fatalf("event %d is %s id %v, want chunk %d (%s):\n%s", k-1, e.Event, deref(e.ID), i, c.Event, dump(lines))
		}
		if i == secret {
			text := string(e.Data)
			if strings.Contains(text, secretKey) || !strings.Contains(text, "Calling the task tool.") {
				t.Fatalf("chunk %d: the credential must go and the reasoning stay: %s", i, text)
			}
			continue
		}
		if c.Data == nil {
			continue // the caller checks it
		}
		want, _ := json.Marshal(c.Data)
		if !jsonEqual(t, e.Data, want) {
			t.Fatalf("chunk %d data:\n got %s\nwant %s", i, e.Data, want)
		}
	}
	if k != len(got) {
		t.Fatalf("%d chunk events, want %d (a duplicate or an extra):\n%s", len(got), k, dump(lines))
	}
}

// checkReconnects checks the SDK's join requests: the first from -1, each
// later one to the Location the server gave, with the last id the SDK
// yielded before it; every 200 answer is an event stream with that
// Location. It returns the number of 200 answers.
func checkReconnects(t *testing.T, lines []line, threadID, runID string) int {
	t.Helper()
	location := "/threads/" + threadID + "/runs/" + runID + "/stream"
	lastID, requests, ok := "-1", 0, 0
	for i, l := range lines {
		switch l.Kind {
		case "event":
			if l.ID != nil && l.Event != "end" {
				lastID = *l.ID
			}
		case "request":
			if !strings.Contains(l.URL, "/api"+location) {
				t.Fatalf("line %d: request to %s, want the join path %s", i, l.URL, location)
			}
			if deref(l.LastEventID) != lastID {
				t.Fatalf("line %d: request with Last-Event-ID %q, want %q (the last id yielded):\n%s", i, deref(l.LastEventID), lastID, dump(lines))
			}
			requests++
		case "response":
			if l.Status == 200 {
				ok++
				if deref(l.Location) != location || !strings.HasPrefix(deref(l.ContentType), "text/event-stream") {
					t.Fatalf("line %d: 200 with Location %q and Content-Type %q", i, deref(l.Location), deref(l.ContentType))
				}
			}
		}
	}
	t.Logf("%d join requests (%d answered 200, the others 502 while the server restarted)", requests, ok)
	return ok
}

func deref(s *string) string {
	if s == nil {
		return "<none>"
	}
	return *s
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}
