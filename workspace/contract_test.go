package workspace_test

import (
	"path/filepath"
	"testing"

	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/journal"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/threadsvc"
	"github.com/runstream/runstream/workspace"
)

// TestRecordThroughTheService appends through the thread service, whose
// event log validates the payload against the contract, and reads it back
// through the workspace review projection.
func TestRecordThroughTheService(t *testing.T) {
	t.Parallel()
	validator, err := contracts.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	events := memory.NewRunEventStore()
	svc := threadsvc.New(events, events, memory.NewRunStore(), eventlog.NewThreadLog(events, validator, nil, eventlog.ThreadLimits{}), nil, threadsvc.Config{})
	e := setup(t)
	write(t, filepath.Join(e.ws, "notes.txt"), "a\n")
	before := capture(t, e)
	write(t, filepath.Join(e.ws, "notes.txt"), "a\nb\n")
	write(t, filepath.Join(e.out, "img.png"), "png")
	if _, ok, err := workspace.Record(t.Context(), journal.ServiceSink{Service: svc, User: "u"}, "t1", "r1", e.cfg, before); err != nil || !ok {
		t.Fatalf("Record = %v, %v", ok, err)
	}
	got, err := svc.WorkspaceChanges(t.Context(), "u", "t1", "r1", true, true)
	if err != nil {
		t.Fatal(err)
	}
	if got["available"] != true {
		t.Fatalf("projection = %v", got)
	}
	files, _ := got["files"].([]any)
	if len(files) != 2 {
		t.Fatalf("files = %v", got["files"])
	}
}
