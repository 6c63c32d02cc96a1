package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/httpapi"
	"github.com/runstream/runstream/internal/apitest"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/sse"
	"github.com/runstream/runstream/streams"
	"github.com/runstream/runstream/workflow"
	"github.com/runstream/runstream/workflowsvc"
)

// Timing of the two-instance test: the hubs poll every pollInterval, so
// that with NOTIFY gone a follower still gets each event within
// maxPollDelay of its commit.
const (
	pollInterval = 800 * time.Millisecond
	maxPollDelay = 1200 * time.Millisecond
)

// instance is one full server over the shared schema: the DB, a polling
// hub, the event log publishing to that hub only, and the HTTP API.
type instance struct {
	db  *DB
	hub *live.Hub
	log *eventlog.WorkflowLog
	srv *apitest.Server
}

func newInstance(t *testing.T, db *DB, validator *contracts.Validator) *instance {
	t.Helper()
	in := &instance{db: db}
	in.hub = live.New(live.Config{Poll: streams.Poller(db.Workflows()), PollInterval: pollInterval})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		in.hub.Run(ctx)
	}()
	in.log = eventlog.NewWorkflowLog(db.Workflows(), validator, in.hub, nil)
	t.Cleanup(func() {
		cancel()
		<-stopped
	})
	api := httpapi.New(httpapi.Config{}, workflowsvc.New(db.Workflows(), nil, in.hub, workflowsvc.Config{}), nil)
	in.srv = apitest.Serve(t, api, api)
	return in
}

// received is one frame a follower read, and when.
type received struct {
	env workflow.Envelope
	at  time.Time
}

// follow opens the SSE stream of a run on in and hands its frames over;
// the channel is closed when the stream ends (err says how).
func follow(t *testing.T, in *instance, runID string) (<-chan received, *error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", in.srv.URL+"/api/workflows/runs/"+runID+"/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: status %d", resp.StatusCode)
	}
	frames := make(chan received, 64)
	end := new(error)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(frames)
		r := sse.NewReader(resp.Body)
		for {
			ev, err := r.Next()
			if err != nil {
				*end = err
				return
			}
			var env workflow.Envelope
			if err := json.Unmarshal([]byte(ev.Data), &env); err != nil {
				*end = fmt.Errorf("frame data is not an envelope: %w", err)
				return
			}
			frames <- received{env: env, at: time.Now()}
		}
	}()
	t.Cleanup(func() {
		resp.Body.Close()
		<-done
	})
	return frames, end
}

// nextFrame returns the next frame of a follower.
func nextFrame(t *testing.T, frames <-chan received, end *error) received {
	t.Helper()
	select {
	case f, ok := <-frames:
		if !ok {
			t.Fatalf("stream ended: %v", *end)
		}
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("no frame in 10 s")
	}
	return received{}
}

// TestTwoInstances runs two servers on one schema. A follower on B's SSE
// stream gets what is appended through A, whose in-process hub does not
// reach B: (a) woken by B's listener (NOTIFY); (b) with B's listener
// connection killed and its reconnection refused, by B's hub poll alone,
// each event within maxPollDelay of its commit; (c) up to run.completed,
// after which B closes the stream.
func TestTwoInstances(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	validator, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	a := newInstance(t, openDB(t, schema), validator)
	logs := &logRecorder{}
	b := newInstance(t, openLoggedDB(t, schema, logs), validator)

	// B's listener wakes B's hub. Its connect seam refuses to reconnect
	// while blocked is set.
	var blocked atomic.Bool
	var refused atomic.Int32
	heardB := newHeard()
	listener := b.db.NewListener(func(runID string, seq int64) {
		heardB.onNotify(runID, seq)
		b.hub.Wake(streams.WorkflowStreamKey(runID))
	})
	dial := listener.connect
	listener.connect = func(ctx context.Context) (*pgx.Conn, error) {
		if blocked.Load() {
			refused.Add(1)
			return nil, errors.New("reconnection refused by the test")
		}
		return dial(ctx)
	}
	startListener(t, listener)

	ctx := t.Context()
	w, v, err := a.db.Workflows().CreateWorkflow(ctx, workflow.Workflow{ID: uniqueID("wf"), OwnerID: httpapi.LocalUser, Name: "two instances"},
		workflow.Version{ID: uniqueID("wv"), Definition: json.RawMessage(`{"name":"test","nodes":[]}`)})
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := a.log.CreateRun(ctx, workflow.Run{ID: uniqueID("run"), WorkflowID: w.ID, VersionID: v.ID, OwnerID: httpapi.LocalUser, Input: json.RawMessage(`{}`)},
		[]workflow.NewEvent{
			{Event: workflow.EventRunCreated, Data: json.RawMessage(`{"version":1,"versionId":"` + v.ID + `"}`)},
			{Event: workflow.EventRunQueued, Data: json.RawMessage(`{"queue":"default"}`)},
		})
	if err != nil {
		t.Fatal(err)
	}

	frames, end := follow(t, b, run.ID)
	var seqs []int64
	// expect reads the next frame, which must be the event after the last.
	expect := func(what string, event workflow.EventType) received {
		t.Helper()
		f := nextFrame(t, frames, end)
		seqs = append(seqs, f.env.Seq)
		if f.env.Seq != int64(len(seqs)) || f.env.Event != event || f.env.RunID != run.ID {
			t.Fatalf("%s: frame %s seq %d of run %s; want %s seq %d of %s (seqs so far %v)",
				what, f.env.Event, f.env.Seq, f.env.RunID, event, len(seqs), run.ID, seqs)
		}
		return f
	}
	expect("replay", workflow.EventRunCreated)
	expect("replay", workflow.EventRunQueued)

	progress := func(i int) int64 {
		t.Helper()
		envs, err := a.log.Append(ctx, workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{{
			Event: workflow.EventNodeProgress, NodeID: "n1", NodeRunID: "n1-r1",
			Data: json.RawMessage(fmt.Sprintf(`{"phase":"work","message":"step %d","percent":null}`, i)),
		}}})
		if err != nil {
			t.Fatal(err)
		}
		return envs[0].Seq
	}

	// (a) NOTIFY wakes B.
	for i := range 5 {
		seq := progress(i)
		expect("live through NOTIFY", workflow.EventNodeProgress)
		heardB.waitFor(t, run.ID, seq)
	}

	// (b) B's listener is cut off and cannot come back: B's poll alone.
	blocked.Store(true)
	pid := listener.BackendPID()
	execSQL(t, testURL(t), "SELECT pg_terminate_backend($1)", int64(pid))
	for deadline := time.Now().Add(10 * time.Second); listener.BackendPID() != 0 || refused.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the listener did not notice the loss of its connection")
		}
		time.Sleep(10 * time.Millisecond)
	}
	heardBefore := len(heardB.seqs(run.ID))
	for i := range 6 {
		// Appends land at different points of B's poll period.
		time.Sleep(time.Duration(i) * 130 * time.Millisecond)
		seq := progress(10 + i)
		committed := time.Now()
		f := expect("live through the poll", workflow.EventNodeProgress)
		if delay := f.at.Sub(committed); delay > maxPollDelay {
			t.Errorf("seq %d reached B %s after its commit, want at most %s (poll every %s)", seq, delay, maxPollDelay, pollInterval)
		}
	}
	if heard := heardB.seqs(run.ID); len(heard) != heardBefore {
		t.Errorf("B's listener heard %v while cut off", heard[heardBefore:])
	}

	// (c) The run completes; B sends run.completed and closes the stream.
	if _, err := a.log.Append(ctx, workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{{
		Event: workflow.EventRunCompleted, Data: json.RawMessage(`{"output":{"ok":true},"artifacts":[]}`),
	}}}); err != nil {
		t.Fatal(err)
	}
	expect("end", workflow.EventRunCompleted)
	if f, ok := <-frames; ok {
		t.Fatalf("frame %s seq %d after run.completed", f.env.Event, f.env.Seq)
	}
	if *end != io.EOF {
		t.Errorf("stream ended with %v, want io.EOF", *end)
	}
	if n := logs.count(slog.LevelWarn, "connection lost"); n != 1 {
		t.Errorf("%d warnings about the lost listener connection, want 1", n)
	}
}
