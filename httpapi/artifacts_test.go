package httpapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/engine/enginetest"
	"github.com/runstream/runstream/internal/apitest"
	"github.com/runstream/runstream/internal/servertest"
	"github.com/runstream/runstream/workflow"
)

// newArtifactServer is newServer whose API and engines store artifacts in
// blobs.
func newArtifactServer(t *testing.T, blobs engine.ArtifactBlobs) *server {
	t.Helper()
	return &server{servertest.NewServer(t, servertest.ServerConfig{Artifacts: blobs, Authenticate: userFromHeader})}
}

// getRaw sends a GET and returns the response with its body read.
func (s *server) getRaw(t *testing.T, path string, header ...string) (*http.Response, string) {
	t.Helper()
	resp := apitest.Get(t, s.URL+path, header...)
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func TestArtifactDownload(t *testing.T) {
	t.Parallel()
	blobs := engine.NewMemoryBlobs()
	s := newArtifactServer(t, blobs)
	s.StartEngine(t, context.Background(), func(c *engine.Config) { c.Artifacts = blobs })
	wf := s.publish(t, `{"name":"report","nodes":[
		{"id":"report","type":"transform","artifact":{"name":"Bericht – März.md","mimeType":"text/markdown; charset=utf-8"},
		 "config":{"expression":"'# Report for ' + input.who"}}],"output":"report"}`)
	run := s.startRun(t, wf, `{"who":"Ada"}`)
	events := s.follow(t, run).Rest(t)
	enginetest.CheckSequence(t, events, "run.created", "run.queued", "run.started",
		"node.queued:report", "node.started:report", "artifact.created:report", "node.completed:report", "run.completed")
	var created struct {
		ArtifactID string
		SizeBytes  int64
		SHA256     string
	}
	enginetest.Data(t, events, workflow.EventArtifactCreated, "report", 0, &created)
	var completed struct {
		Artifacts []struct{ ArtifactID, NodeID string }
	}
	enginetest.Data(t, events, workflow.EventRunCompleted, "", 0, &completed)
	if len(completed.Artifacts) != 1 || completed.Artifacts[0].ArtifactID != created.ArtifactID || completed.Artifacts[0].NodeID != "report" {
		t.Errorf("run.completed artifacts %+v", completed.Artifacts)
	}

	path := "/api/workflows/runs/" + run + "/artifacts/" + created.ArtifactID
	resp, body := s.getRaw(t, path)
	sum := sha256.Sum256([]byte(body))
	if resp.StatusCode != 200 || body != "# Report for Ada" || hex.EncodeToString(sum[:]) != created.SHA256 || int64(len(body)) != created.SizeBytes {
		t.Fatalf("GET artifact: %d %q", resp.StatusCode, body)
	}
	wantHeaders := map[string]string{
		"Content-Type":           "text/markdown; charset=utf-8",
		"Content-Disposition":    "attachment; filename*=utf-8''Bericht%20%E2%80%93%20M%C3%A4rz.md",
		"X-Content-Type-Options": "nosniff",
		"Content-Length":         "16",
	}
	for k, v := range wantHeaders {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	other, _ := s.getRaw(t, path, "X-User", "mallory")
	if other.StatusCode != http.StatusNotFound {
		t.Errorf("another user's artifact: %d", other.StatusCode)
	}
	wantError(t, "another user", 404, runstream.CodeWorkflowRunNotFound)(s.get(t, path, "X-User", "mallory"))
	wantError(t, "unknown artifact", 404, runstream.CodeNotFound)(s.get(t, "/api/workflows/runs/"+run+"/artifacts/art_nope"))
	wantError(t, "unknown run", 404, runstream.CodeWorkflowRunNotFound)(s.get(t, "/api/workflows/runs/run_nope/artifacts/"+created.ArtifactID))
}

// A server without artifact storage says so.
func TestArtifactsUnavailable(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	wantError(t, "no blobs", 503, runstream.CodeUnavailable)(s.get(t, "/api/workflows/runs/run_x/artifacts/art_x"))
}
