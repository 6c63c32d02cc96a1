package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/httpapi"
	"github.com/runstream/runstream/internal/apitest"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/sse"
	"github.com/runstream/runstream/streams"
	"github.com/runstream/runstream/threadsvc"
	"github.com/runstream/runstream/workflowsvc"
)

// threadInstance is one server of threads over a shared schema: its hub
// (whose periodic poll is too slow to matter), woken by its listener's
// thread notifications, its thread log publishing to that hub only, and
// the HTTP API.
type threadInstance struct {
	hub     *live.Hub
	log     *eventlog.ThreadLog
	threads *threadsvc.Service
	srv     *apitest.Server
}

func newThreadInstance(t *testing.T, db *DB, validator *contracts.Validator) *threadInstance {
	t.Helper()
	in := &threadInstance{}
	events := db.RunEvents()
	in.hub = live.New(live.Config{Poll: streams.StreamPoller(db.Workflows(), events), PollInterval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		in.hub.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-stopped
	})
	startListener(t, db.NewListener(func(string, int64) {}).OnThreadAppends(func(threadID string, seq int64) {
		in.hub.WakeSeq(streams.ThreadStreamKey(threadID), seq)
	}))
	in.log = eventlog.NewThreadLog(events, validator, in.hub, eventlog.ThreadLimits{})
	in.threads = threadsvc.New(events, events, db.Runs(), in.log, in.hub, threadsvc.Config{})
	api := httpapi.New(httpapi.Config{}, workflowsvc.New(db.Workflows(), nil, in.hub, workflowsvc.Config{}), in.threads)
	in.srv = apitest.Serve(t, api, api)
	return in
}

// TestTwoInstancesThreads: a follower of a thread on instance B gets the
// rows appended through A and through B, interleaved, each once and in
// seq order, at NOTIFY latency: B's hub polls only once an hour, so
// without the thread notifications nothing of A's would arrive.
func TestTwoInstancesThreads(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	validator, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	a := newThreadInstance(t, openDB(t, schema), validator)
	b := newThreadInstance(t, openDB(t, schema), validator)
	thread := uniqueID("t")
	row := func(i int) runevents.NewEvent {
		return runevents.NewEvent{ThreadID: thread, RunID: "r1", EventType: runevents.EventRunStart,
			Content: json.RawMessage(fmt.Sprintf(`{"chain":"c%d"}`, i)), Metadata: json.RawMessage(`{"caller":"lead_agent"}`)}
	}
	ctx := t.Context()
	if _, err := a.log.Append(ctx, httpapi.LocalUser, []runevents.NewEvent{row(0)}); err != nil {
		t.Fatal(err)
	}

	req, err := http.NewRequestWithContext(ctx, "GET", b.srv.URL+"/api/threads/"+thread+"/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: status %d", resp.StatusCode)
	}
	frames := make(chan int64, 256)
	go func() {
		defer close(frames)
		r := sse.NewReader(resp.Body)
		for {
			ev, err := r.Next()
			if err != nil {
				return
			}
			var rec runevents.Record
			if json.Unmarshal([]byte(ev.Data), &rec) != nil {
				return
			}
			frames <- rec.Seq
		}
	}()
	next := func() int64 {
		t.Helper()
		select {
		case seq, ok := <-frames:
			if !ok {
				t.Fatal("the stream ended")
			}
			return seq
		case <-time.After(10 * time.Second):
			t.Fatal("no frame in 10 s")
		}
		return 0
	}
	if got := next(); got != 1 {
		t.Fatalf("replay: seq %d, want 1", got)
	}
	// A's rows alone, then rows of both instances, in batches and at once.
	want := int64(2)
	for i := 1; i <= 20; i++ {
		in := a
		if i > 10 && i%2 == 0 {
			in = b
		}
		batch := []runevents.NewEvent{row(i)}
		if i%5 == 0 {
			batch = append(batch, row(i), row(i))
		}
		// A appends through its thread service, whose appends to the
		// caller's own thread check the owner in the append's statement
		// (PutBatchOwned); B through its log, without the check.
		if in == a {
			_, err = a.threads.Append(ctx, httpapi.LocalUser, thread, batch)
		} else {
			_, err = b.log.Append(ctx, httpapi.LocalUser, batch)
		}
		if err != nil {
			t.Fatal(err)
		}
		for range batch {
			if got := next(); got != want {
				t.Fatalf("after append %d: seq %d, want %d", i, got, want)
			}
			want++
		}
	}
}
