package crashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runstream/runstream/workflow"
)

// crashWorkflow is a run of two nodes: the first long enough to be killed
// in, reporting progress, with a second attempt for the one the crash
// interrupts (node.failed WORKFLOW_WORKER_LOST, willRetry); the second
// node after it.
const crashWorkflow = `{"name":"crash","nodes":[
	{"id":"first","type":"delay","retry":{"maxAttempts":2,"backoffMs":100},"config":{"ms":1500,"progressEveryMs":250}},
	{"id":"second","type":"delay","needs":["first"],"config":{"ms":200}}],"output":"nodes.second.output"}`

// leaseDuration is the lease of the crash test's servers: a run whose
// server was killed is taken over once it expires. The restarted server's
// runner renews it every third of it, each try abandoned after a sixth,
// and stops its run when two tries in a row failed (engine's fence). With
// a 2 s lease two store calls slower than 300 ms did that under CI's load
// (the race detector, every package's tests at once), and the run's
// retried attempt counted as lost: 5 s leaves the store 800 ms a call.
const leaseDuration = "5s"

// TestCrashWorkflowRun kills the server with SIGKILL while workflow runs
// are in their first node, restarts it, and waits: after the lease
// expires the restarted instance takes the runs over, and each finishes
// once: one run.completed, each node completed once, seqs 1..N, and the
// follower's transcript (resumed across the crash) equal to the stored
// events.
func TestCrashWorkflowRun(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			for i := range iterations(t) {
				t.Run(fmt.Sprintf("iteration-%d", i+1), func(t *testing.T) { crashWorkflowRun(t, backend) })
			}
		})
	}
}

func crashWorkflowRun(t *testing.T, backend string) {
	dir := t.TempDir()
	args := append(backendArgs(t, backend, dir), "--workers", "4", "--lease-duration", leaseDuration, "--max-streams-per-user", "-1")
	addr := freePort(t)
	srv := startServer(t, dir, addr, args...)
	base := srv.Base()

	var wf struct{ WorkflowID string }
	postJSON(t, base+"/api/workflows", crashWorkflow, &wf)
	const runs = 3
	ids := make([]string, runs)
	followers := make([]*follower, runs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var fwg sync.WaitGroup
	for i := range ids {
		var run struct{ RunID string }
		postJSON(t, base+"/api/workflows/"+wf.WorkflowID+"/runs", `{"input":{}}`, &run)
		ids[i] = run.RunID
		followers[i] = &follower{url: base + "/api/workflows/runs/" + run.RunID + "/stream"}
		fwg.Go(func() { followers[i].run(ctx) })
	}
	// Kill once every run is in its first node.
	deadline := time.Now().Add(60 * time.Second)
	for i, f := range followers {
		for !f.saw(string(workflow.EventNodeProgress)) {
			if time.Now().After(deadline) {
				t.Fatalf("run %s did not start its first node:\n%s", ids[i], srv.Log())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	srv.Kill()
	srv = startServer(t, dir, addr, args...)

	deadline = time.Now().Add(90 * time.Second)
	for i, f := range followers {
		for !f.saw(string(workflow.EventRunCompleted)) && !f.saw(string(workflow.EventRunFailed)) && !f.saw(string(workflow.EventRunCancelled)) {
			if time.Now().After(deadline) {
				t.Fatalf("run %s did not end after the takeover; its events %v\n%s", ids[i], f.events(), srv.Log())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Let anything a second runner would write arrive before the checks.
	time.Sleep(500 * time.Millisecond)
	cancel()
	fwg.Wait()
	for i, id := range ids {
		rows := runEvents(t, base, id)
		var types []string
		for j, row := range rows {
			if seq := int64(row["seq"].(float64)); seq != int64(j+1) {
				t.Fatalf("run %s event %d has seq %d; want 1..N", id, j, seq)
			}
			types = append(types, row["event"].(string))
		}
		for _, want := range []struct {
			event string
			node  string
		}{{"run.completed", ""}, {"node.completed", "first"}, {"node.completed", "second"}, {"node.failed", "first"}} {
			n := 0
			for _, row := range rows {
				if row["event"] == want.event && (want.node == "" || row["nodeId"] == want.node) {
					n++
				}
			}
			if n != 1 {
				t.Errorf("run %s has %d %s %s; want exactly 1: %v", id, n, want.event, want.node, types)
			}
		}
		if last := types[len(types)-1]; last != "run.completed" {
			t.Errorf("run %s ends with %s; want run.completed: %v", id, last, types)
		}
		if !slices.Contains(types, "node.started") {
			t.Errorf("run %s: no node.started in %v", id, types)
		}
		if err := followers[i].checkEnvelopes(rows); err != nil {
			t.Errorf("follower of run %s: %v", id, err)
		}
	}
}

func postJSON(t *testing.T, url, body string, out any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, answer)
	}
	if err := json.Unmarshal(answer, out); err != nil {
		t.Fatal(err)
	}
}

// runEvents reads every stored event of a workflow run, ascending.
func runEvents(t *testing.T, base, runID string) []map[string]any {
	t.Helper()
	var rows []map[string]any
	after := int64(0)
	for {
		resp, err := http.Get(fmt.Sprintf("%s/api/workflows/runs/%s/events?after=%d&limit=1000", base, runID, after))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var page struct {
			Events    []map[string]any `json:"events"`
			HasMore   bool             `json:"hasMore"`
			NextAfter int64            `json:"nextAfter"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(body, &page) != nil {
			t.Fatalf("list run %s: %d %s", runID, resp.StatusCode, body)
		}
		rows = append(rows, page.Events...)
		if !page.HasMore {
			return rows
		}
		after = page.NextAfter
	}
}

// saw reports whether the follower read an event of type event.
func (f *follower) saw(event string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fr := range f.frames {
		if fr.event == event {
			return true
		}
	}
	return false
}

func (f *follower) events() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, fr := range f.frames {
		out = append(out, fr.id+":"+fr.event)
	}
	return out
}

// checkEnvelopes compares the transcript with a run's stored events: the
// same seqs in order, each once, with the same envelopes.
func (f *follower) checkEnvelopes(rows []map[string]any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.frames) != len(rows) {
		return fmt.Errorf("read %d frames; the run holds %d events", len(f.frames), len(rows))
	}
	for i, fr := range f.frames {
		if want := fmt.Sprint(i + 1); fr.id != want {
			return fmt.Errorf("frame %d has id %s; want %s (no gap, no duplicate)", i, fr.id, want)
		}
		want, _ := json.Marshal(rows[i])
		var got, stored any
		json.Unmarshal([]byte(fr.data), &got)
		json.Unmarshal(want, &stored)
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(stored)
		if !bytes.Equal(a, b) {
			return fmt.Errorf("frame %s is %s; the store holds %s", fr.id, a, b)
		}
	}
	return nil
}
