package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runstream/runstream/postgres"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/workflow"
)

// stormSize is the storm's followers and older events: 200 and 20,000 in
// CI; RUNSTREAM_STORM_FOLLOWERS and RUNSTREAM_STORM_EVENTS (1000 and
// 100000 for the full size).
func stormSize(t *testing.T) (followers, events int) {
	followers, events = 200, 20000
	for name, dst := range map[string]*int{"RUNSTREAM_STORM_FOLLOWERS": &followers, "RUNSTREAM_STORM_EVENTS": &events} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 2 {
				t.Fatalf("%s=%q: want an integer of at least 2", name, v)
			}
			*dst = n
		}
	}
	return followers, events
}

// TestStormOverHistory: a thread and a workflow run already hold many
// older events; two instances serve them from one PostgreSQL schema; the
// followers, half on each instance and half on each stream, all connect
// at once, most resuming near the head and one per stream from the very
// beginning, while both streams keep growing (appends through both
// instances for the thread, through the store for the run, which then
// completes). Every follower must receive exactly the events after its
// cursor, in order, to the end.
func TestStormOverHistory(t *testing.T) {
	url := os.Getenv("RUNSTREAM_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("RUNSTREAM_TEST_POSTGRES_URL is not set: the storm runs on two instances over PostgreSQL")
	}
	nFollowers, nEvents := stormSize(t)
	dir := t.TempDir()
	args := backendArgs(t, "postgres", dir)
	schema := args[len(args)-1]

	// The history, written through the store.
	ctx := context.Background()
	db, err := postgres.Open(ctx, postgres.Config{URL: url, Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	content := json.RawMessage(`{"chain":null,"pad":"` + strings.Repeat("h", 200) + `"}`)
	for done := 0; done < nEvents; done += 500 {
		var batch []runevents.NewEvent
		for range min(500, nEvents-done) {
			batch = append(batch, runevents.NewEvent{ThreadID: "storm", RunID: "r1", UserID: "local", EventType: runevents.EventRunStart,
				Category: runevents.CategoryTrace, Content: content, Metadata: json.RawMessage(`{"caller":"lead_agent"}`)})
		}
		if _, err := db.RunEvents().PutBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	wfs := db.Workflows()
	w, v, err := wfs.CreateWorkflow(ctx, workflow.Workflow{ID: "wf_storm", OwnerID: "local", Name: "storm"},
		workflow.Version{ID: "wv_storm", Definition: json.RawMessage(`{"name":"storm","nodes":[{"id":"n1","type":"delay","config":{"ms":1}}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := wfs.CreateRun(ctx, workflow.Run{ID: "run_storm", WorkflowID: w.ID, VersionID: v.ID, OwnerID: "local", Input: json.RawMessage(`{}`)},
		[]workflow.NewEvent{{Event: workflow.EventRunCreated, Data: json.RawMessage(`{"version":1}`)}, {Event: workflow.EventRunQueued, Data: json.RawMessage(`{"queue":"default"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	progress := func(n int) []workflow.NewEvent {
		out := make([]workflow.NewEvent, n)
		for i := range out {
			out[i] = workflow.NewEvent{Event: workflow.EventNodeProgress, NodeID: "n1", NodeRunID: "n1-r1", Data: json.RawMessage(`{"phase":"p","message":"older"}`)}
		}
		return out
	}
	for done := 2; done < nEvents; done += 500 {
		if _, err := wfs.Append(ctx, workflow.AppendParams{RunID: run.ID, Events: progress(min(500, nEvents-done))}); err != nil {
			t.Fatal(err)
		}
	}

	// Two instances; no engine, so the run is the test's to write.
	flags := append(args, "--workers", "0", "--max-streams-per-user", "-1")
	instances := []*server{startServer(t, dir, freePort(t), flags...), startServer(t, dir, freePort(t), flags...)}

	const growBatches, growSize = 10, 10
	threadEnd := int64(nEvents + growBatches*growSize)
	runEnd := int64(nEvents + growBatches*growSize + 1) // and run.completed
	type stormFollower struct {
		f      *follower
		cursor int64
		end    int64
	}
	followers := make([]stormFollower, nFollowers)
	followCtx, stop := context.WithCancel(ctx)
	defer stop()
	var fwg sync.WaitGroup
	start := time.Now()
	for i := range followers {
		srv := instances[i%2]
		onThread := i%4 < 2
		cursor := int64(nEvents - rand.IntN(min(1000, nEvents)))
		if i < 4 {
			cursor = 0 // one per stream and instance resumes from the very beginning
		}
		sf := stormFollower{cursor: cursor}
		if onThread {
			sf.f, sf.end = &follower{url: srv.Base() + "/api/threads/storm/stream"}, threadEnd
		} else {
			sf.f, sf.end = &follower{url: srv.Base() + "/api/workflows/runs/" + run.ID + "/stream"}, runEnd
		}
		if cursor > 0 {
			sf.f.frames = []frame{{id: strconv.FormatInt(cursor, 10)}} // resume point; dropped below
		}
		followers[i] = sf
		fwg.Go(func() { sf.f.runUntil(followCtx, sf.end) })
	}

	// Both streams keep growing while the followers reconnect.
	client := &http.Client{Timeout: 30 * time.Second}
	for b := range growBatches {
		var events []string
		for e := range growSize {
			events = append(events, fmt.Sprintf(`{"event_type":"run.start","content":{"chain":null,"grow":%d},"metadata":{"caller":"lead_agent"}}`, b*growSize+e))
		}
		resp, err := client.Post(instances[b%2].Base()+"/api/threads/storm/runs/r1/events", "application/json", strings.NewReader(`{"events":[`+join(events)+`]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("grow the thread: %d", resp.StatusCode)
		}
		if _, err := wfs.Append(ctx, workflow.AppendParams{RunID: run.ID, Events: progress(growSize)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := wfs.Append(ctx, workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{{Event: workflow.EventRunCompleted, Data: json.RawMessage(`{"output":null}`)}}}); err != nil {
		t.Fatal(err)
	}

	done := make(chan struct{})
	go func() { fwg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		stop()
		<-done
	}
	t.Logf("%d followers over %d older events: all done after %v", nFollowers, nEvents, time.Since(start).Round(time.Millisecond))
	for i, sf := range followers {
		frames := sf.f.frames
		if sf.cursor > 0 {
			frames = frames[1:]
		}
		want := sf.cursor + 1
		for _, fr := range frames {
			if fr.id != strconv.FormatInt(want, 10) {
				t.Fatalf("follower %d (%s, cursor %d): frame %s where %d was due", i, sf.f.url, sf.cursor, fr.id, want)
			}
			want++
		}
		if want-1 != sf.end {
			t.Errorf("follower %d (%s, cursor %d) ended at %d; want %d", i, sf.f.url, sf.cursor, want-1, sf.end)
		}
	}
}

// runUntil follows until it read the frame with id end, or ctx ends.
func (f *follower) runUntil(ctx context.Context, end int64) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if f.lastID() == strconv.FormatInt(end, 10) {
				cancel()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	f.run(ctx)
}
