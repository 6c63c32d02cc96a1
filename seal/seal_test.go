package seal_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/seal"
	"github.com/runstream/runstream/workflow"
	"github.com/runstream/runstream/workflowtest"
)

func TestSealOpen(t *testing.T) {
	t.Parallel()
	s := seal.NewRandom()
	sealed := s.Seal("tok-123", "run_1")
	if !seal.IsSealed(sealed) || strings.Contains(sealed, "tok-123") {
		t.Fatalf("Seal = %q", sealed)
	}
	if again := s.Seal("tok-123", "run_1"); again == sealed {
		t.Errorf("two seals of one value are equal: the nonce is not random")
	}
	if got, err := s.Open(sealed, "run_1"); err != nil || got != "tok-123" {
		t.Errorf("Open = %q, %v; want tok-123", got, err)
	}
	if _, err := s.Open(sealed, "run_2"); err == nil {
		t.Errorf("Open with another run id succeeded")
	}
	if _, err := seal.NewRandom().Open(sealed, "run_1"); err == nil {
		t.Errorf("Open with another key succeeded")
	}
	for _, bad := range []string{"tok-123", "sealed:v1:", "sealed:v1:!!", sealed[:len(sealed)-2]} {
		if _, err := s.Open(bad, "run_1"); err == nil {
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
}

func TestKeyFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "data", "seal.key")
	if _, err := seal.LoadKeyFile(path, false); err == nil {
		t.Fatalf("LoadKeyFile of a missing file without create succeeded")
	}
	key, err := seal.LoadKeyFile(path, true)
	if err != nil || len(key) != seal.KeySize {
		t.Fatalf("LoadKeyFile(create) = %d bytes, %v", len(key), err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := info.Mode().Perm(); mode != 0o600 {
		t.Errorf("key file mode %o, want 600", mode)
	}
	again, err := seal.LoadKeyFile(path, true)
	if err != nil || !bytes.Equal(again, key) {
		t.Errorf("second LoadKeyFile = %x, %v; want the same key", again, err)
	}
	os.WriteFile(path, []byte("short\n"), 0o600)
	if _, err := seal.LoadKeyFile(path, true); err == nil {
		t.Errorf("LoadKeyFile of a malformed key succeeded")
	}
	if k, err := seal.ParseKey(" " + seal.FormatKey(key) + "\n"); err != nil || !bytes.Equal(k, key) {
		t.Errorf("ParseKey(FormatKey) = %x, %v", k, err)
	}
}

// TestWorkflowStoreConformance runs the store conformance suite through
// the sealing wrapper: it changes nothing a caller sees.
func TestWorkflowStoreConformance(t *testing.T) {
	workflowtest.Run(t, workflowtest.Harness{
		Open: func(*testing.T) workflow.Store {
			return seal.WorkflowStore(memory.NewWorkflowStore(), seal.NewRandom())
		},
	})
	workflowtest.RunQueue(t, workflowtest.Harness{
		Open: func(*testing.T) workflow.Store {
			return seal.WorkflowStore(memory.NewWorkflowStore(), seal.NewRandom())
		},
	})
}

// TestWorkflowStoreSealsTheToken checks that the inner store holds the
// token sealed while every envelope the wrapper returns holds it plain,
// byte for byte as appended.
func TestWorkflowStoreSealsTheToken(t *testing.T) {
	t.Parallel()
	inner := memory.NewWorkflowStore()
	s := seal.WorkflowStore(inner, seal.NewRandom())
	defer s.Close()
	if _, ok := s.(workflow.Queue); !ok {
		t.Errorf("the wrapper of a queue is not a workflow.Queue")
	}
	if _, ok := s.(workflow.NodeOutputStore); !ok {
		t.Errorf("the wrapper of a node output store is not a workflow.NodeOutputStore")
	}
	ctx := t.Context()
	w, v, err := s.CreateWorkflow(ctx, workflow.Workflow{ID: "wf-1", OwnerID: "alice"}, workflow.Version{ID: "wv-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateRun(ctx, workflow.Run{ID: "run-1", WorkflowID: w.ID, VersionID: v.ID, OwnerID: "alice"},
		[]workflow.NewEvent{{Event: workflow.EventRunCreated, Data: json.RawMessage(`{}`)}, {Event: workflow.EventRunQueued, Data: json.RawMessage(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, workflow.AppendParams{RunID: "run-1", Events: []workflow.NewEvent{{Event: workflow.EventRunStarted, Data: json.RawMessage(`{}`)}}}); err != nil {
		t.Fatal(err)
	}
	const token = "Zm9vYmFyYmF6cXV4LXRoZS1yZXN1bWUtdG9rZW4tMTIz"
	data := json.RawMessage(`{"formSchema":{"type":"object"},"actions":["approve"],"resumeToken":"` + token + `","expiresAt":"2030-01-01T00:00:00Z"}`)
	appended, err := s.Append(ctx, workflow.AppendParams{RunID: "run-1", Events: []workflow.NewEvent{
		{Event: workflow.EventRunAwaitingInput, NodeID: "ask", NodeRunID: "nr-1", Data: data},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(appended) != 1 || !bytes.Equal(appended[0].Data, data) {
		t.Errorf("Append returned %s, want the data as appended %s", appended[0].Data, data)
	}
	raw, err := inner.ListEvents(ctx, "run-1", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	stored := raw[len(raw)-1].Data
	if bytes.Contains(stored, []byte(token)) || !bytes.Contains(stored, []byte(`"resumeToken":"sealed:v1:`)) {
		t.Errorf("the inner store holds %s, want the token sealed", stored)
	}
	got, err := s.ListEvents(ctx, "run-1", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if last := got[len(got)-1].Data; !bytes.Equal(last, data) {
		t.Errorf("ListEvents returned %s, want %s", last, data)
	}
	// A store written with another key returns the token sealed.
	other := seal.WorkflowStore(inner, seal.NewRandom())
	got, err = other.ListEvents(ctx, "run-1", 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !bytes.Equal(got[0].Data, stored) {
		t.Errorf("another key's ListEvents returned %s, want the stored data %s", got[0].Data, stored)
	}
}
