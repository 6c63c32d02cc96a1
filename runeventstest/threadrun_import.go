package runeventstest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// importedFeedback returns alice's feedback fb-1 on t1/r1, created an
// hour before runBase.
func importedFeedback() runevents.Feedback {
	return runevents.Feedback{ID: "fb-1", ThreadID: "t1", RunID: "r1", UserID: alice, Rating: json.RawMessage(`-1`),
		Comment: "wrong", Tags: []string{"incorrect"}, CreatedAt: runBase.Add(-time.Hour)}
}

var importFeedbackTests = []struct {
	name string
	run  func(t *testing.T, s runevents.RunStore)
}{
	{"ImportFeedbackKeepsIDAndTimes", func(t *testing.T, s runevents.RunStore) {
		imp := implementation[runevents.FeedbackImporter](t, s, "feedback imports")
		putRun(t, s, threadRun("t1", "r1", 0, runevents.RunSuccess))
		want := importedFeedback()
		got, created, err := imp.ImportFeedback(t.Context(), want)
		if err != nil || !created || got.ID != "fb-1" || !got.CreatedAt.Equal(want.CreatedAt) || !got.UpdatedAt.Equal(want.CreatedAt) {
			t.Fatalf("ImportFeedback = %+v, created %v, %v; want fb-1 created at its time", got, created, err)
		}
		list, err := s.ListRunFeedback(t.Context(), "t1", "r1", asAlice)
		if err != nil || len(list) != 1 {
			t.Fatalf("ListRunFeedback = %+v, %v", list, err)
		}
		f := list[0]
		if f.ID != "fb-1" || string(f.Rating) != "-1" || f.Comment != "wrong" || len(f.Tags) != 1 || f.Tags[0] != "incorrect" ||
			!f.CreatedAt.Equal(want.CreatedAt) || !f.UpdatedAt.Equal(want.CreatedAt) {
			t.Errorf("stored %+v, want the imported feedback as given", f)
		}
	}},
	{"ImportFeedbackFindsTheUsers", func(t *testing.T, s runevents.RunStore) {
		imp := implementation[runevents.FeedbackImporter](t, s, "feedback imports")
		putRun(t, s, threadRun("t1", "r1", 0, runevents.RunSuccess))
		first, err := s.PutFeedback(t.Context(), runevents.Feedback{ThreadID: "t1", RunID: "r1", UserID: alice, Rating: json.RawMessage(`1`)})
		if err != nil {
			t.Fatal(err)
		}
		got, created, err := imp.ImportFeedback(t.Context(), importedFeedback())
		if err != nil || created || got.ID != first.ID || string(got.Rating) != "1" {
			t.Fatalf("ImportFeedback over alice's feedback = %+v, created %v, %v; want hers, not created", got, created, err)
		}
		// Another user's feedback, or another message of the run, is new.
		other := importedFeedback()
		other.ID, other.UserID = "fb-2", bob
		if _, created, err := imp.ImportFeedback(t.Context(), other); err != nil || !created {
			t.Errorf("ImportFeedback of bob's: created %v, %v", created, err)
		}
		// An id that another feedback holds is a conflict.
		taken := importedFeedback()
		taken.MessageID = "m1"
		taken.ID = "fb-2"
		_, _, err = imp.ImportFeedback(t.Context(), taken)
		wantCode(t, err, runstream.CodeConflict, "ImportFeedback of a taken id")
		bad := importedFeedback()
		bad.ID = "fb 1"
		_, _, err = imp.ImportFeedback(t.Context(), bad)
		wantCode(t, err, runstream.CodeInvalidArgument, "ImportFeedback of an invalid id")
	}},
}
