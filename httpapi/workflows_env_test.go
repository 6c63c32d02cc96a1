package httpapi_test

import (
	"cmp"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/httpapi"
	"github.com/runstream/runstream/internal/servertest"
)

// server is the public HTTP API over a memory store, with the engines
// that execute its runs (servertest.Server). Requests act for the user in
// the X-User header ("local" without it).
type server struct{ *servertest.Server }

func newServer(t *testing.T) *server {
	t.Helper()
	return &server{servertest.NewServer(t, servertest.ServerConfig{Authenticate: userFromHeader})}
}

// userFromHeader acts for the user in the X-User header, "local" without
// it.
func userFromHeader(r *http.Request) (string, error) {
	return cmp.Or(r.Header.Get("X-User"), httpapi.LocalUser), nil
}

// call sends a request with a JSON (or YAML, by contentType) body and
// returns the status and the decoded JSON response.
func (s *server) call(t *testing.T, method, path, contentType, body string, header ...string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, s.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
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
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: %d with a body that is not a JSON object: %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

func (s *server) post(t *testing.T, path, body string, header ...string) (int, map[string]any) {
	t.Helper()
	return s.call(t, "POST", path, "application/json", body, header...)
}

func (s *server) get(t *testing.T, path string, header ...string) (int, map[string]any) {
	t.Helper()
	return s.call(t, "GET", path, "", "", header...)
}

// must fails unless the call answered want.
func must(t *testing.T, want int) func(int, map[string]any) map[string]any {
	t.Helper()
	return func(status int, body map[string]any) map[string]any {
		t.Helper()
		if status != want {
			t.Fatalf("status %d, want %d: %v", status, want, body)
		}
		return body
	}
}

// wantError fails unless the call answered status with the unified error
// body of code.
func wantError(t *testing.T, what string, status int, code runstream.ErrorCode) func(int, map[string]any) map[string]any {
	t.Helper()
	return func(gotStatus int, body map[string]any) map[string]any {
		t.Helper()
		if gotStatus != status || body["code"] != string(code) {
			t.Errorf("%s: %d %v, want %d %s", what, gotStatus, body, status, code)
		}
		return body
	}
}

// publish creates a workflow with definition def and returns its id.
func (s *server) publish(t *testing.T, def string) string {
	t.Helper()
	body := must(t, http.StatusCreated)(s.post(t, "/api/workflows", def))
	return body["workflowId"].(string)
}

// startRun starts a run of the workflow and returns its id.
func (s *server) startRun(t *testing.T, workflowID, input string) string {
	t.Helper()
	body := must(t, http.StatusCreated)(s.post(t, "/api/workflows/"+workflowID+"/runs", `{"input":`+input+`}`))
	if body["status"] != "queued" {
		t.Errorf("new run view: %v", body)
	}
	return body["runId"].(string)
}

// follow opens the run's SSE stream (see servertest.Follow).
func (s *server) follow(t *testing.T, runID string) *servertest.Stream {
	t.Helper()
	return servertest.Follow(t, s.URL, runID)
}

type errorData struct {
	Error struct {
		Code      runstream.ErrorCode `json:"code"`
		Retryable bool                `json:"retryable"`
		NodeID    string              `json:"nodeId"`
	} `json:"error"`
	Attempt      int     `json:"attempt"`
	WillRetry    bool    `json:"willRetry"`
	FailedNodeID *string `json:"failedNodeId"`
}
