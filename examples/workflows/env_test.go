package workflows_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/engine/enginetest"
	"github.com/runstream/runstream/engine/nodeset"
	"github.com/runstream/runstream/engine/sqlnode"
	"github.com/runstream/runstream/internal/servertest"
	"github.com/runstream/runstream/workflow"
)

// server is the public HTTP API over a memory store with every node type
// (nodeset) and artifact storage, and the engines that run its runs
// (servertest.Server). The tests talk to it over HTTP only; engines are
// started and killed as instances of a deployment would be.
type server struct{ *servertest.Server }

func newServer(t *testing.T, dbs *sqlnode.Databases) *server {
	t.Helper()
	// The tests' sites listen on loopback, which the http node reaches
	// only when allowed.
	allow, err := engine.ParseHTTPAllowList("127.0.0.0/8,::1")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := nodeset.Registry(nodeset.Config{SQL: dbs, HTTP: engine.HTTPOptions{Allow: allow}})
	if err != nil {
		t.Fatal(err)
	}
	return &server{servertest.NewServer(t, servertest.ServerConfig{Registry: reg, Artifacts: engine.NewMemoryBlobs()})}
}

// request sends a request and returns the status, the headers and the
// body.
func (s *server) request(t *testing.T, method, path, contentType string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, s.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, raw
}

// call sends a JSON body (or none) and decodes the JSON answer, failing
// unless its status is want.
func (s *server) call(t *testing.T, method, path, body string, want int) map[string]any {
	t.Helper()
	contentType := ""
	if body != "" {
		contentType = "application/json"
	}
	status, _, raw := s.request(t, method, path, contentType, []byte(body))
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil || status != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, status, raw, want)
	}
	return out
}

// publishExample publishes the example file name as YAML, as it is.
func (s *server) publishExample(t *testing.T, name string) string {
	t.Helper()
	yaml, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	status, _, raw := s.request(t, "POST", "/api/workflows", "application/yaml", yaml)
	var body struct{ WorkflowID string }
	if err := json.Unmarshal(raw, &body); err != nil || status != http.StatusCreated {
		t.Fatalf("publish %s: %d %s", name, status, raw)
	}
	return body.WorkflowID
}

func (s *server) startRun(t *testing.T, workflowID, input string) string {
	t.Helper()
	body := s.call(t, "POST", "/api/workflows/"+workflowID+"/runs", `{"input":`+input+`}`, http.StatusCreated)
	return body["runId"].(string)
}

// follow opens the run's SSE stream (see servertest.Follow).
func (s *server) follow(t *testing.T, runID string) *servertest.Stream {
	t.Helper()
	return servertest.Follow(t, s.URL, runID)
}

// coverage records the event types the examples' asserted sequences hold.
type coverage struct {
	mu   sync.Mutex
	seen map[workflow.EventType]bool
}

// checkSequence fails unless the events are want (see sequence), with
// seqs 1..N, the last one terminal, no synthesised frame, and attempts
// that count from 1 per node; it records the types in cov.
// checkSequence is enginetest.CheckSequence, but with consecutive
// node.progress events of one node merged (with real waits their count
// depends on timing); it records the event types of a run that passed.
func (cov *coverage) checkSequence(t *testing.T, envs []workflow.Envelope, want ...string) {
	t.Helper()
	ok := enginetest.CheckRun(t, envs)
	if !enginetest.SameSequence(t, mergeProgress(enginetest.Sequence(envs)), want) || !ok {
		return
	}
	cov.mu.Lock()
	defer cov.mu.Unlock()
	for _, e := range envs {
		cov.seen[e.Event] = true
	}
}

// mergeProgress merges consecutive equal node.progress entries of a
// sequence.
func mergeProgress(seq []string) []string {
	var out []string
	for _, s := range seq {
		if strings.HasPrefix(s, "node.progress:") && len(out) > 0 && out[len(out)-1] == s {
			continue
		}
		out = append(out, s)
	}
	return out
}
