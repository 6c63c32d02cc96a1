package engine_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/engine/enginetest"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/workflow"
)

// ssrfServer answers /target with "reached" and counts it; /redirect
// sends to the URL in its to parameter.
func ssrfServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var reached atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/target":
			reached.Add(1)
			w.Write([]byte("reached"))
		case "/redirect":
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &reached
}

func httpDef(url string) string {
	return `{"name":"h","nodes":[{"id":"call","type":"http","config":{"url":"` + url + `"}}],"output":"call"}`
}

// wantRefused checks that the call node failed, for good, because the
// guard refused the address.
func wantRefused(t *testing.T, run workflow.Run, events []workflow.Envelope) {
	t.Helper()
	if run.Status != workflow.StatusFailed {
		t.Fatalf("run %s, want failed", run.Status)
	}
	var failed struct {
		Error struct {
			Code      runstream.ErrorCode
			Message   string
			Retryable bool
			Details   map[string]any
		}
	}
	enginetest.Data(t, events, workflow.EventNodeFailed, "call", 0, &failed)
	if failed.Error.Code != runstream.CodeWorkflowHTTPNodeError || failed.Error.Details["rule"] != "address_not_allowed" || failed.Error.Retryable {
		t.Errorf("node.failed: %+v, want WORKFLOW_HTTP_NODE_ERROR address_not_allowed, not retryable", failed.Error)
	}
}

// TestHTTPNodeRefusesLoopbackByDefault: with no allow list, the http node
// reaches no loopback address, however it is written.
func TestHTTPNodeRefusesLoopbackByDefault(t *testing.T) {
	t.Parallel()
	srv, reached := ssrfServer(t)
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	e := enginetest.Start(t, memory.NewWorkflowStore(), engine.DefaultRegistry(), nil)
	for _, url := range []string{
		srv.URL + "/target",
		"http://localhost:" + port + "/target",
		"http://[::ffff:127.0.0.1]:" + port + "/target",
		"http://0.0.0.0:" + port + "/target",
	} {
		run, events := e.Run(t, httpDef(url), `{}`)
		wantRefused(t, run, events)
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the server was reached %d times", n)
	}
}

// TestHTTPNodeAllowList: an allowed network or host is reached; a
// redirect from an allowed host to a loopback address that is not allowed
// is refused.
func TestHTTPNodeAllowList(t *testing.T) {
	t.Parallel()
	srv, reached := ssrfServer(t)
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]

	byNetwork := enginetest.Start(t, memory.NewWorkflowStore(), httpRegistry("127.0.0.0/8"), nil)
	if run, _ := byNetwork.Run(t, httpDef(srv.URL+"/target"), `{}`); run.Status != workflow.StatusCompleted {
		t.Errorf("allowed by network: run %s", run.Status)
	}
	byHost := enginetest.Start(t, memory.NewWorkflowStore(), httpRegistry("localhost"), nil)
	if run, _ := byHost.Run(t, httpDef("http://localhost:"+port+"/target"), `{}`); run.Status != workflow.StatusCompleted {
		t.Errorf("allowed by host: run %s", run.Status)
	}
	if n := reached.Load(); n != 2 {
		t.Errorf("the server was reached %d times, want 2", n)
	}
	run, events := byHost.Run(t, httpDef("http://localhost:"+port+"/redirect?to=http://127.0.0.1:"+port+"/target"), `{}`)
	wantRefused(t, run, events)
	if n := reached.Load(); n != 2 {
		t.Errorf("the redirect reached the target")
	}
}

func TestParseHTTPAllowList(t *testing.T) {
	t.Parallel()
	for _, good := range []string{"", "10.0.0.0/8", "127.0.0.1, ::1", "api.internal,localhost.", "fd00::/8,host-1"} {
		if _, err := engine.ParseHTTPAllowList(good); err != nil {
			t.Errorf("ParseHTTPAllowList(%q): %v", good, err)
		}
	}
	for _, bad := range []string{"http://x", "x:80", "user@host", "a b"} {
		if _, err := engine.ParseHTTPAllowList(bad); err == nil {
			t.Errorf("ParseHTTPAllowList(%q) succeeded", bad)
		}
	}
}
