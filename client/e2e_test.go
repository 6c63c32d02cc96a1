package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/client"
	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/httpapi"
	"github.com/runstream/runstream/internal/apitest"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/streams"
	"github.com/runstream/runstream/workflow"
	"github.com/runstream/runstream/workflowsvc"
)

// realServer is the real HTTP API over a memory store, a live hub and the
// event log (as in httpapi's workflow stream tests), with one run of the
// local user. It records the Last-Event-ID of every stream request.
type realServer struct {
	log *eventlog.WorkflowLog
	srv *apitest.Server
	run workflow.Run

	mu      sync.Mutex
	resumes []string
}

func newRealServer(t *testing.T) *realServer {
	t.Helper()
	validator, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	store := memory.NewWorkflowStore()
	hub := live.New(live.Config{Poll: streams.Poller(store), PollInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	go hub.Run(ctx)
	rs := &realServer{log: eventlog.NewWorkflowLog(store, validator, hub, nil)}
	api := httpapi.New(httpapi.Config{Stream: httpapi.StreamConfig{Retry: 5 * time.Millisecond}}, workflowsvc.New(store, nil, hub, workflowsvc.Config{}), nil)
	t.Cleanup(cancel)
	rs.srv = apitest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") == "text/event-stream" {
			rs.mu.Lock()
			rs.resumes = append(rs.resumes, r.Header.Get("Last-Event-ID"))
			rs.mu.Unlock()
		}
		api.ServeHTTP(w, r)
	}), api)
	wf, v, err := store.CreateWorkflow(t.Context(), workflow.Workflow{ID: "wf_e2e", OwnerID: httpapi.LocalUser, Name: "e2e"},
		workflow.Version{ID: "wv_e2e", Definition: json.RawMessage(`{"name":"e2e","nodes":[]}`)})
	if err != nil {
		t.Fatal(err)
	}
	rs.run, _, err = rs.log.CreateRun(t.Context(), workflow.Run{ID: "run_e2e", WorkflowID: wf.ID, VersionID: v.ID, OwnerID: httpapi.LocalUser, Input: json.RawMessage(`{}`)},
		[]workflow.NewEvent{
			{Event: workflow.EventRunCreated, Data: json.RawMessage(`{"version":1,"versionId":"wv_e2e"}`)},
			{Event: workflow.EventRunQueued, Data: json.RawMessage(`{"queue":"default"}`)},
		})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func (rs *realServer) append(e workflow.NewEvent) (int64, error) {
	stored, err := rs.log.Append(context.Background(), workflow.AppendParams{RunID: rs.run.ID, Events: []workflow.NewEvent{e}})
	if err != nil {
		return 0, err
	}
	return stored[0].Seq, nil
}

func (rs *realServer) progress(i int) (int64, error) {
	return rs.append(workflow.NewEvent{Event: workflow.EventNodeProgress, NodeID: "n1", NodeRunID: "nr1",
		Data: json.RawMessage(fmt.Sprintf(`{"phase":"work","message":"step %d","percent":null}`, i))})
}

// TestFollowRealServer follows a run while events are appended, cuts every
// connection mid-stream, and checks the follower sees every event once.
func TestFollowRealServer(t *testing.T) {
	t.Parallel()
	rs := newRealServer(t)
	c, err := client.New(rs.srv.URL)
	if err != nil {
		t.Fatal(err)
	}

	const before, after = 40, 40 // progress events before and after the cut
	seen := make(chan int64, 2*(before+after))
	var seqs []int64
	var followErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for env, err := range c.Follow(t.Context(), rs.run.ID, client.FollowOptions{}) {
			if err != nil {
				followErr = err
				return
			}
			seqs = append(seqs, env.Seq)
			seen <- env.Seq
		}
	}()

	for i := range before {
		if _, err := rs.progress(i); err != nil {
			t.Fatal(err)
		}
	}
	// Cut once the follower is midway through the first part, while the
	// appends go on.
	for seq := range seen {
		if seq >= before/2 {
			break
		}
	}
	rs.srv.CloseClientConnections()
	for i := range after {
		if _, err := rs.progress(before + i); err != nil {
			t.Fatal(err)
		}
	}
	last, err := rs.append(workflow.NewEvent{Event: workflow.EventRunCompleted, Data: json.RawMessage(`{"output":{"ok":true},"artifacts":[]}`)})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Follow did not end after run.completed")
	}

	if followErr != nil {
		t.Fatalf("Follow: %v", followErr)
	}
	want := make([]int64, last)
	for i := range want {
		want[i] = int64(i + 1)
	}
	if !slices.Equal(seqs, want) {
		t.Errorf("seqs = %v, want 1..%d exactly once", seqs, last)
	}
	rs.mu.Lock()
	resumes := slices.Clone(rs.resumes)
	rs.mu.Unlock()
	if len(resumes) < 2 || resumes[0] != "" {
		t.Fatalf("Last-Event-ID of the stream requests = %q, want none first, then a resume", resumes)
	}
	for _, id := range resumes[1:] {
		if n, err := strconv.ParseInt(id, 10, 64); err != nil || n < before/2 || n >= last {
			t.Errorf("resumed with Last-Event-ID %q, want a seq from %d to %d", id, before/2, last-1)
		}
	}
}

func TestRealServerErrors(t *testing.T) {
	t.Parallel()
	rs := newRealServer(t)
	c, err := client.New(rs.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var apiErr *client.APIError
	_, _, err = first(c.Follow(t.Context(), "run_unknown", client.FollowOptions{MaxRetries: 1}))
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound || apiErr.Code != runstream.CodeWorkflowRunNotFound || apiErr.RequestID == "" {
		t.Errorf("Follow of an unknown run: %v, want a 404 WORKFLOW_RUN_NOT_FOUND with a request id", err)
	}
	if _, err := c.GetRun(t.Context(), "run_unknown"); !errors.As(err, &apiErr) || apiErr.Code != runstream.CodeWorkflowRunNotFound {
		t.Errorf("GetRun of an unknown run: %v", err)
	}
	if _, err := c.ListEvents(t.Context(), rs.run.ID, 0, 5000); !errors.As(err, &apiErr) || apiErr.Code != runstream.CodeInvalidArgument {
		t.Errorf("ListEvents with limit 5000: %v, want INVALID_ARGUMENT", err)
	}
}

func TestRealServerPages(t *testing.T) {
	t.Parallel()
	rs := newRealServer(t)
	c, err := client.New(rs.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1500 {
		if _, err := rs.progress(i); err != nil {
			t.Fatal(err)
		}
	}
	run, err := c.GetRun(t.Context(), rs.run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if run.ID != rs.run.ID || run.Status != workflow.StatusQueued || run.LastSeq != 1502 {
		t.Errorf("run = %s %s lastSeq %d, want %s queued 1502", run.ID, run.Status, run.LastSeq, rs.run.ID)
	}
	next := int64(11)
	for env, err := range c.Events(t.Context(), rs.run.ID, 10) {
		if err != nil {
			t.Fatal(err)
		}
		if env.Seq != next {
			t.Fatalf("seq %d, want %d", env.Seq, next)
		}
		next++
	}
	if next != 1503 {
		t.Errorf("Events ended after seq %d, want 1502", next-1)
	}
}

// first returns the first item of seq.
func first(seq iter.Seq2[workflow.Envelope, error]) (workflow.Envelope, bool, error) {
	for env, err := range seq {
		return env, true, err
	}
	return workflow.Envelope{}, false, nil
}
