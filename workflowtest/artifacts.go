package workflowtest

import (
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

// storeArtifacts appends one artifact.created per artifact, with them.
func storeArtifacts(t *testing.T, s workflow.Store, runID string, as ...workflow.Artifact) {
	t.Helper()
	events := make([]workflow.NewEvent, len(as))
	for i, a := range as {
		events[i] = nodeEvent(workflow.EventArtifactCreated, a.NodeID, `{"id":"`+a.ID+`"}`)
	}
	appendEvents(t, s, workflow.AppendParams{RunID: runID, Events: events, Artifacts: as})
}

func getArtifact(t *testing.T, s workflow.Store, runID, id string) workflow.Artifact {
	t.Helper()
	a, err := s.GetArtifact(t.Context(), runID, id)
	if err != nil {
		t.Fatalf("GetArtifact(%s, %s): %v", runID, id, err)
	}
	return a
}

func report(id string) workflow.Artifact {
	return workflow.Artifact{
		ID: id, NodeID: "n1", Name: "report.md", MimeType: "text/markdown", SizeBytes: 1234,
		SHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", CreatedAt: base.Add(time.Second),
	}
}

var artifactTests = []test{
	{"Stored", func(t *testing.T, s workflow.Store) {
		run := newRun(t, s, nil)
		given := report("a1")
		defaulted := workflow.Artifact{ID: "a2", NodeID: "n2", Name: "empty"}
		before := time.Now()
		storeArtifacts(t, s, run.ID, given, defaulted)
		after := time.Now()
		given.RunID = run.ID
		sameArtifact(t, "artifact with its time", getArtifact(t, s, run.ID, "a1"), given)
		got := getArtifact(t, s, run.ID, "a2")
		checkDefaultTime(t, "artifact CreatedAt", got.CreatedAt, before, after)
		defaulted.RunID, defaulted.CreatedAt = run.ID, got.CreatedAt
		sameArtifact(t, "artifact without a time", got, defaulted)
	}},
	{"NotFound", func(t *testing.T, s workflow.Store) {
		run := newRun(t, s, nil)
		other := newRun(t, s, nil)
		storeArtifacts(t, s, run.ID, report("a1"))
		for _, c := range []struct{ name, run, id string }{
			{"unknown artifact", run.ID, "a2"},
			{"another run's artifact", other.ID, "a1"},
			{"unknown run", newID("run"), "a1"},
		} {
			_, err := s.GetArtifact(t.Context(), c.run, c.id)
			wantCode(t, err, runstream.CodeNotFound, c.name)
		}
	}},
	{"SameIDInTwoRuns", func(t *testing.T, s workflow.Store) {
		r1 := newRun(t, s, nil)
		r2 := newRun(t, s, nil)
		a1, a2 := report("out"), report("out")
		a2.Name, a2.SizeBytes = "other.md", 7
		storeArtifacts(t, s, r1.ID, a1)
		storeArtifacts(t, s, r2.ID, a2)
		a1.RunID, a2.RunID = r1.ID, r2.ID
		sameArtifact(t, "artifact of the first run", getArtifact(t, s, r1.ID, "out"), a1)
		sameArtifact(t, "artifact of the second run", getArtifact(t, s, r2.ID, "out"), a2)
	}},
	{"Duplicate", func(t *testing.T, s workflow.Store) {
		run := newRun(t, s, nil)
		first := report("a1")
		storeArtifacts(t, s, run.ID, first)
		run, events := getRun(t, s, run.ID), allEvents(t, s, run.ID)
		again := report("a1")
		again.Name = "replaced.md"
		_, err := s.Append(t.Context(), workflow.AppendParams{
			RunID:     run.ID,
			Events:    []workflow.NewEvent{nodeEvent(workflow.EventArtifactCreated, "n1", ""), nodeEvent(workflow.EventArtifactCreated, "n1", "")},
			Artifacts: []workflow.Artifact{report("a3"), again},
		})
		wantCode(t, err, runstream.CodeConflict, "Append of an artifact id the run has")
		unchanged(t, s, "after the duplicate artifact", run, events)
		first.RunID = run.ID
		sameArtifact(t, "first artifact after the duplicate", getArtifact(t, s, run.ID, "a1"), first)
		_, err = s.GetArtifact(t.Context(), run.ID, "a3")
		wantCode(t, err, runstream.CodeNotFound, "artifact of the refused batch")
	}},
}
