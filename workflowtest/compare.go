package workflowtest

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream/workflow"
)

// The comparisons below hold times equal when they are the same instant
// (a backend may return them in another zone), except envelope timestamps,
// which are transmitted and must keep their offset too. JSON values must
// read back byte for byte as written; the suite writes them compact.

// diffs collects the names and values of differing fields.
type diffs []string

func (d *diffs) str(name, got, want string) {
	if got != want {
		*d = append(*d, fmt.Sprintf("%s %q, want %q", name, got, want))
	}
}

func (d *diffs) int(name string, got, want int64) {
	if got != want {
		*d = append(*d, fmt.Sprintf("%s %d, want %d", name, got, want))
	}
}

func (d *diffs) json(name string, got, want []byte) {
	if !bytes.Equal(got, want) {
		*d = append(*d, fmt.Sprintf("%s %s, want %s", name, got, want))
	}
}

func (d *diffs) hex(name string, got, want []byte) {
	if !bytes.Equal(got, want) {
		*d = append(*d, fmt.Sprintf("%s %x, want %x", name, got, want))
	}
}

func (d *diffs) time(name string, got, want time.Time) {
	if !got.Equal(want) {
		*d = append(*d, fmt.Sprintf("%s %s, want %s", name, got, want))
	}
}

func (d *diffs) report(t *testing.T, what string) {
	t.Helper()
	if len(*d) > 0 {
		t.Errorf("%s: %s", what, strings.Join(*d, "; "))
	}
}

func sameWorkflow(t *testing.T, what string, got, want workflow.Workflow) {
	t.Helper()
	var d diffs
	d.str("ID", got.ID, want.ID)
	d.str("OwnerID", got.OwnerID, want.OwnerID)
	d.str("Name", got.Name, want.Name)
	d.str("Description", got.Description, want.Description)
	d.str("LatestVersionID", got.LatestVersionID, want.LatestVersionID)
	d.time("CreatedAt", got.CreatedAt, want.CreatedAt)
	d.time("UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	d.report(t, what)
}

func sameVersion(t *testing.T, what string, got, want workflow.Version) {
	t.Helper()
	var d diffs
	d.str("ID", got.ID, want.ID)
	d.str("WorkflowID", got.WorkflowID, want.WorkflowID)
	d.int("Number", int64(got.Number), int64(want.Number))
	d.json("Definition", got.Definition, want.Definition)
	d.time("CreatedAt", got.CreatedAt, want.CreatedAt)
	d.report(t, what)
}

func sameRun(t *testing.T, what string, got, want workflow.Run) {
	t.Helper()
	var d diffs
	d.str("ID", got.ID, want.ID)
	d.str("WorkflowID", got.WorkflowID, want.WorkflowID)
	d.str("VersionID", got.VersionID, want.VersionID)
	d.str("OwnerID", got.OwnerID, want.OwnerID)
	d.str("Status", string(got.Status), string(want.Status))
	d.json("Input", got.Input, want.Input)
	d.json("Output", got.Output, want.Output)
	d.json("Error", got.Error, want.Error)
	d.int("LastSeq", got.LastSeq, want.LastSeq)
	d.time("CreatedAt", got.CreatedAt, want.CreatedAt)
	d.time("UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	d.time("StartedAt", got.StartedAt, want.StartedAt)
	d.time("FinishedAt", got.FinishedAt, want.FinishedAt)
	d.str("LeaseOwner", got.LeaseOwner, want.LeaseOwner)
	d.time("LeaseExpiresAt", got.LeaseExpiresAt, want.LeaseExpiresAt)
	d.report(t, what)
}

func sameRuns(t *testing.T, what string, got, want []workflow.Run) {
	t.Helper()
	if !slices.Equal(runIDs(got), runIDs(want)) {
		t.Errorf("%s: runs %v, want %v", what, runIDs(got), runIDs(want))
		return
	}
	for i := range got {
		sameRun(t, what, got[i], want[i])
	}
}

func runIDs(runs []workflow.Run) []string {
	out := []string{}
	for _, r := range runs {
		out = append(out, r.ID)
	}
	return out
}

func sameEnvelope(t *testing.T, what string, got, want workflow.Envelope) {
	t.Helper()
	var d diffs
	d.str("SchemaVersion", got.SchemaVersion, want.SchemaVersion)
	d.str("RunID", got.RunID, want.RunID)
	d.str("WorkflowID", got.WorkflowID, want.WorkflowID)
	d.str("VersionID", got.VersionID, want.VersionID)
	d.int("Seq", got.Seq, want.Seq)
	d.str("Event", string(got.Event), string(want.Event))
	d.str("NodeID", got.NodeID, want.NodeID)
	d.str("NodeRunID", got.NodeRunID, want.NodeRunID)
	d.time("Timestamp", got.Timestamp, want.Timestamp)
	_, gotOff := got.Timestamp.Zone()
	_, wantOff := want.Timestamp.Zone()
	d.int("Timestamp offset", int64(gotOff), int64(wantOff))
	d.json("Data", got.Data, want.Data)
	d.report(t, fmt.Sprintf("%s (seq %d)", what, want.Seq))
}

func sameEnvelopes(t *testing.T, what string, got, want []workflow.Envelope) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d events (seqs %v), want %d (seqs %v)", what, len(got), seqsOf(got), len(want), seqsOf(want))
		return
	}
	for i := range got {
		sameEnvelope(t, what, got[i], want[i])
	}
}

func sameToken(t *testing.T, what string, got, want workflow.ResumeToken) {
	t.Helper()
	var d diffs
	d.str("RunID", got.RunID, want.RunID)
	d.str("NodeID", got.NodeID, want.NodeID)
	d.str("NodeRunID", got.NodeRunID, want.NodeRunID)
	d.hex("Hash", got.Hash, want.Hash)
	d.str("Actions", strings.Join(got.Actions, ","), strings.Join(want.Actions, ","))
	d.int("len(Actions)", int64(len(got.Actions)), int64(len(want.Actions)))
	d.json("FormSchema", got.FormSchema, want.FormSchema)
	d.time("ExpiresAt", got.ExpiresAt, want.ExpiresAt)
	d.time("ConsumedAt", got.ConsumedAt, want.ConsumedAt)
	d.report(t, what)
}

func sameArtifact(t *testing.T, what string, got, want workflow.Artifact) {
	t.Helper()
	var d diffs
	d.str("ID", got.ID, want.ID)
	d.str("RunID", got.RunID, want.RunID)
	d.str("NodeID", got.NodeID, want.NodeID)
	d.str("Name", got.Name, want.Name)
	d.str("MimeType", got.MimeType, want.MimeType)
	d.int("SizeBytes", got.SizeBytes, want.SizeBytes)
	d.str("SHA256", got.SHA256, want.SHA256)
	d.time("CreatedAt", got.CreatedAt, want.CreatedAt)
	d.report(t, what)
}
