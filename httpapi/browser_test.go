package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
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

// followPage follows the run named in its query string with the browser's
// EventSource, as a web UI would, recording the id of every event and
// closing on the terminal one.
const followPage = `<!doctype html>
<html><body><script>
window.seen = [];
window.done = false;
const terminal = new Set(["run.completed", "run.failed", "run.cancelled"]);
const run = new URLSearchParams(location.search).get("run");
const es = new EventSource("/api/workflows/runs/" + run + "/stream");
for (const type of %s) {
  es.addEventListener(type, (e) => {
    window.seen.push(Number(e.lastEventId));
    if (terminal.has(type)) { es.close(); window.done = true; }
  });
}
</script></body></html>`

// chromium returns the path of the Chromium binary, skipping the test when
// there is none (bash .ci/run installs Debian's chromium).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	t.Skip("no chromium on PATH: install Debian's chromium (bash .ci/run does) to run the browser tests")
	return ""
}

// A browser's EventSource follows a run over a taken-over connection,
// reconnects by itself with Last-Event-ID after the server drops it, and
// ends with every event exactly once.
func TestBrowserFollowsAndResumes(t *testing.T) {
	exe := chromium(t)
	validator, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	store := memory.NewWorkflowStore()
	hub := live.New(live.Config{Poll: streams.Poller(store), PollInterval: 50 * time.Millisecond})
	hubCtx, stopHub := context.WithCancel(context.Background())
	go hub.Run(hubCtx)
	t.Cleanup(stopHub)
	log := eventlog.NewWorkflowLog(store, validator, hub, nil)
	api := httpapi.New(httpapi.Config{Stream: httpapi.StreamConfig{Retry: 100 * time.Millisecond}}, workflowsvc.New(store, nil, hub, workflowsvc.Config{}), nil)

	types, _ := json.Marshal(workflow.Events())
	var mu sync.Mutex
	var resumes []string // Last-Event-ID of each stream request
	mux := http.NewServeMux()
	mux.HandleFunc("GET /follow", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, followPage, types)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") == "text/event-stream" {
			mu.Lock()
			resumes = append(resumes, r.Header.Get("Last-Event-ID"))
			mu.Unlock()
		}
		api.ServeHTTP(w, r)
	})
	srv := apitest.Serve(t, mux, api)

	ctx := context.Background()
	wf, v, err := store.CreateWorkflow(ctx, workflow.Workflow{ID: "wf_browser", OwnerID: httpapi.LocalUser, Name: "browser"},
		workflow.Version{ID: "wv_browser", Definition: json.RawMessage(`{"name":"browser","nodes":[]}`)})
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := log.CreateRun(ctx, workflow.Run{ID: "run_browser", WorkflowID: wf.ID, VersionID: v.ID, OwnerID: httpapi.LocalUser, Input: json.RawMessage(`{}`)},
		[]workflow.NewEvent{
			{Event: workflow.EventRunCreated, Data: json.RawMessage(`{"version":1,"versionId":"wv_browser"}`)},
			{Event: workflow.EventRunQueued, Data: json.RawMessage(`{"queue":"default"}`)},
		})
	if err != nil {
		t.Fatal(err)
	}
	appendEvent := func(e workflow.NewEvent) {
		t.Helper()
		if _, err := log.Append(ctx, workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{e}}); err != nil {
			t.Fatal(err)
		}
	}
	progress := func(from, to int) {
		t.Helper()
		for i := from; i <= to; i++ {
			appendEvent(workflow.NewEvent{Event: workflow.EventNodeProgress, NodeID: "n1", NodeRunID: "nr1",
				Data: json.RawMessage(`{"phase":"work","message":"step ` + strconv.Itoa(i) + `","percent":null}`)})
		}
	}

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true))...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	// The first call starts the browser, whose life is that call's context:
	// no timeout on it; evaluate bounds each later call.
	if err := chromedp.Do(browser, chromedp.Navigate(srv.URL+"/follow?run="+run.ID), chromedp.WaitReady("body")); err != nil {
		t.Fatalf("open the page in Chromium: %v", err)
	}
	evaluate := func(expr string, v any) {
		t.Helper()
		ctx, cancel := context.WithTimeout(browser, 10*time.Second)
		defer cancel()
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](expr))
		if err == nil {
			err = json.Unmarshal(raw, v)
		}
		if err != nil {
			t.Fatalf("evaluate %s in the page: %v", expr, err)
		}
	}
	seen := func() []int64 {
		t.Helper()
		var ids []int64
		evaluate(`window.seen`, &ids)
		return ids
	}
	// waitFor polls cond until it holds, failing at once when the page's
	// EventSource gave up (readyState 2, closed, before the terminal
	// event): nothing it waits for can come then.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			var page struct {
				Done       bool
				ReadyState int
			}
			evaluate(`({done: window.done, readyState: es.readyState})`, &page)
			if page.ReadyState == 2 && !page.Done {
				t.Fatalf("the EventSource gave up while waiting for %s; the page saw %v", what, seen())
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; the page saw %v", what, seen())
			}
		}
	}

	waitFor("the replay of seqs 1 and 2", func() bool { return len(seen()) >= 2 })
	progress(3, 7)
	waitFor("seqs 3..7 live", func() bool { return len(seen()) >= 7 })
	srv.CloseClientConnections() // the server drops the browser's stream
	progress(8, 12)
	waitFor("the browser to reconnect with Last-Event-ID", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(resumes) >= 2
	})
	appendEvent(workflow.NewEvent{Event: workflow.EventRunCompleted, Data: json.RawMessage(`{"output":{"ok":true},"artifacts":[]}`)})
	waitFor("run.completed", func() bool {
		var done bool
		evaluate(`window.done`, &done)
		return done
	})

	want := make([]int64, 13)
	for i := range want {
		want[i] = int64(i + 1)
	}
	if got := seen(); !slices.Equal(got, want) {
		t.Errorf("the browser saw seqs %v, want 1..13 exactly once", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if resumes[0] != "" {
		t.Errorf("first stream request sent Last-Event-ID %q, want none", resumes[0])
	}
	for _, id := range resumes[1:] {
		if n, err := strconv.Atoi(id); err != nil || n < 7 || n > 12 {
			t.Errorf("the browser resumed with Last-Event-ID %q, want a seq from 7 to 12", id)
		}
	}
}
