package engine_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"github.com/runstream/runstream/engine/enginetest"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/workflow"
)

type artifactData struct {
	ArtifactID string
	Name       string
	MimeType   string
	SizeBytes  int64
	SHA256     string
	NodeID     string
}

func readBlob(t *testing.T, blobs engine.ArtifactBlobs, runID, id string) string {
	t.Helper()
	rc, err := blobs.Open(context.Background(), runID, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// A node that declares an artifact stores its output's bytes (a string's
// text, else the JSON), announces it with artifact.created just before
// node.completed and run.completed lists every artifact of the run.
func TestArtifacts(t *testing.T) {
	t.Parallel()
	blobs := engine.NewMemoryBlobs()
	e := newEnv(t)
	e.start(t, func(c *engine.Config) { c.Artifacts = blobs })
	run := e.createRun(t, `{"name":"report","nodes":[
		{"id":"report","type":"transform","artifact":{"name":"report.md","mimeType":"text/markdown"},
		 "config":{"expression":"'# Report for ' + input.who"}},
		{"id":"facts","type":"transform","needs":["report"],"artifact":{"name":"facts.json","mimeType":"application/json"},
		 "config":{"expression":"{'who': input.who, 'n': 2}"}}],"output":"facts"}`, `{"who":"Ada"}`)
	got, events := e.waitTerminal(t, run.ID)
	enginetest.CheckSequence(t, events, "run.created", "run.queued", "run.started",
		"node.queued:report", "node.started:report", "artifact.created:report", "node.completed:report",
		"node.queued:facts", "node.started:facts", "artifact.created:facts", "node.completed:facts",
		"run.completed")
	if got.Status != workflow.StatusCompleted {
		t.Fatalf("run %s", got.Status)
	}
	wantContent := []string{"# Report for Ada", `{"n":2,"who":"Ada"}`}
	var created []artifactData
	for i, node := range []string{"report", "facts"} {
		var a artifactData
		env := enginetest.Data(t, events, workflow.EventArtifactCreated, node, 0, &a)
		if done := enginetest.Data(t, events, workflow.EventNodeCompleted, node, 0, &struct{}{}); done.NodeRunID != env.NodeRunID {
			t.Errorf("artifact.created of %s has node run %s, node.completed %s", node, env.NodeRunID, done.NodeRunID)
		}
		if a.SizeBytes != int64(len(wantContent[i])) || a.SHA256 != sha(wantContent[i]) {
			t.Errorf("artifact of %s: %+v, want %d bytes", node, a, len(wantContent[i]))
		}
		if content := readBlob(t, blobs, run.ID, a.ArtifactID); content != wantContent[i] {
			t.Errorf("stored bytes of %s: %q, want %q", node, content, wantContent[i])
		}
		meta, err := e.store.GetArtifact(t.Context(), run.ID, a.ArtifactID)
		if err != nil || meta.Name != a.Name || meta.MimeType != a.MimeType || meta.SHA256 != a.SHA256 || meta.NodeID != node || meta.SizeBytes != a.SizeBytes {
			t.Errorf("stored metadata %+v (%v), event %+v", meta, err, a)
		}
		a.NodeID = node
		created = append(created, a)
	}
	if created[0].Name != "report.md" || created[0].MimeType != "text/markdown" || created[1].Name != "facts.json" {
		t.Errorf("created %+v", created)
	}
	var completed struct{ Artifacts []artifactData }
	enginetest.Data(t, events, workflow.EventRunCompleted, "", 0, &completed)
	if !slices.Equal(completed.Artifacts, created) {
		t.Errorf("run.completed artifacts %+v, want %+v", completed.Artifacts, created)
	}
}

// Artifacts created before a takeover are listed by the run.completed of
// the engine that took the run over.
func TestArtifactsAcrossTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blobs := engine.NewMemoryBlobs()
		e := newEnv(t)
		ctxA, killA := context.WithCancel(context.Background())
		defer killA()
		a, err := engine.New(engine.Config{Store: e.store, Log: e.log, WorkerID: "a", LeaseDuration: 3 * time.Second, PollInterval: 20 * time.Millisecond, Artifacts: blobs})
		if err != nil {
			t.Fatal(err)
		}
		a.Start(ctxA)
		run := e.createRun(t, `{"name":"x","nodes":[
			{"id":"note","type":"transform","artifact":{"name":"note.txt","mimeType":"text/plain"},"config":{"expression":"'kept'"}},
			{"id":"slow","type":"delay","needs":["note"],"retry":{"maxAttempts":2},"config":{"ms":10000,"progressEveryMs":5000}}]}`, `{}`)
		e.wait(t, run.ID, "slow's progress", func(_ workflow.Run, envs []workflow.Envelope) bool {
			return slices.Contains(enginetest.Sequence(envs), "node.progress:slow")
		})
		killA()
		a.Stop(context.Background())
		e.start(t, func(c *engine.Config) {
			c.WorkerID, c.Artifacts = "b", blobs
			c.Clock = func() time.Time { return time.Now().Add(4 * time.Second) }
		})
		_, events := e.waitTerminal(t, run.ID)
		var created artifactData
		enginetest.Data(t, events, workflow.EventArtifactCreated, "note", 0, &created)
		created.NodeID = "note"
		var completed struct{ Artifacts []artifactData }
		enginetest.Data(t, events, workflow.EventRunCompleted, "", 0, &completed)
		if !slices.Equal(completed.Artifacts, []artifactData{created}) {
			t.Errorf("run.completed artifacts %+v, want %+v", completed.Artifacts, created)
		}
	})
}

func TestFileBlobs(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "artifacts")
	blobs, err := engine.NewFileBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := blobs.Put(ctx, "run_1", "art_1", []byte("first")); err != nil {
		t.Fatal(err)
	}
	if err := blobs.Put(ctx, "run_1", "art_1", []byte("second")); err != nil {
		t.Fatal(err)
	}
	if got := readBlob(t, blobs, "run_1", "art_1"); got != "second" {
		t.Errorf("read %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "run_1", "art_1")); err != nil || string(b) != "second" {
		t.Errorf("file holds %q (%v)", b, err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "run_1"))
	if len(entries) != 1 {
		t.Errorf("the run's directory holds %d entries, want only the artifact", len(entries))
	}
	if _, err := blobs.Open(ctx, "run_1", "art_2"); runstream.ErrorCodeOf(err) != runstream.CodeNotFound {
		t.Errorf("missing artifact: %v", err)
	}
	for _, bad := range [][2]string{{"..", "x"}, {"run_1", "../../etc"}, {"run_1", ""}, {"a/b", "c"}} {
		if err := blobs.Put(ctx, bad[0], bad[1], []byte("x")); runstream.ErrorCodeOf(err) != runstream.CodeInvalidArgument {
			t.Errorf("Put(%q, %q): %v", bad[0], bad[1], err)
		}
		if _, err := blobs.Open(ctx, bad[0], bad[1]); runstream.ErrorCodeOf(err) != runstream.CodeInvalidArgument {
			t.Errorf("Open(%q, %q): %v", bad[0], bad[1], err)
		}
	}
}

func TestArtifactSpecRules(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, artifact string }{
		{"NoName", `{"mimeType":"text/plain"}`},
		{"Slash", `{"name":"a/b","mimeType":"text/plain"}`},
		{"BadMime", `{"name":"a","mimeType":"not a type"}`},
		{"Unknown", `{"name":"a","mimeType":"text/plain","path":"/tmp"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := engine.DefaultRegistry().CompileJSON([]byte(`{"name":"x","nodes":[{"id":"a","type":"transform","artifact":` + tc.artifact + `,"config":{"expression":"1"}}]}`))
			re := runstream.AsError(err)
			if re == nil || re.Code != runstream.CodeWorkflowDefinitionInvalid {
				t.Fatalf("err = %v", err)
			}
			if rule := re.Details["rule"]; rule != engine.RuleInvalidArtifact && rule != engine.RuleMalformed {
				t.Errorf("rule %v", rule)
			}
		})
	}
	content := engine.ArtifactContent(json.RawMessage(`"a\nb"`))
	if string(content) != "a\nb" {
		t.Errorf("content of a string: %q", content)
	}
}
