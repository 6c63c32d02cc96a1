package runeventstest

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// deerflowRunTests pin the run row and feedback fields of the original
// system (issue 15): assistant id, kwargs, multitask strategy, message
// count and stop reason on run rows; message ids, tags, several
// feedbacks per run, ListRunFeedback and DeleteFeedbackByID.
var deerflowRunTests = []struct {
	name string
	run  func(t *testing.T, s runevents.RunStore)
}{
	{"DeerFlowRunFields", func(t *testing.T, s runevents.RunStore) {
		r := threadRun("t1", "r1", 0, runevents.RunSuccess)
		r.AssistantID, r.MultitaskStrategy, r.MessageCount, r.StopReason = "lead_agent", "enqueue", 7, "end_turn"
		r.Kwargs = json.RawMessage(`{ "input": {"messages": []}, "stream_mode": ["values"] }`)
		putRun(t, s, r)
		got, err := s.GetRun(t.Context(), "t1", "r1", asAlice)
		if err != nil {
			t.Fatal(err)
		}
		want := `lead_agent|{"input":{"messages":[]},"stream_mode":["values"]}|enqueue|7|end_turn`
		if s := deerflowFields(got); s != want {
			t.Errorf("GetRun fields %s, want %s", s, want)
		}
		list, _ := s.ListRuns(t.Context(), "t1", asAlice)
		found, _ := s.FindRun(t.Context(), "r1", asAlice)
		if len(list) != 1 || deerflowFields(list[0]) != want || deerflowFields(found) != want {
			t.Errorf("ListRuns/FindRun fields differ from GetRun's %s", want)
		}
		r.AssistantID, r.MultitaskStrategy, r.MessageCount, r.StopReason, r.Kwargs = "", "", 0, "", nil
		updated := putRun(t, s, r)
		if s := deerflowFields(updated); s != `|{}|reject|0|` {
			t.Errorf("defaults after an update without the fields: %s, want |{}|reject|0|", s)
		}
		got, _ = s.GetRun(t.Context(), "t1", "r1", asAlice)
		if s := deerflowFields(got); s != `|{}|reject|0|` {
			t.Errorf("stored defaults: %s, want |{}|reject|0|", s)
		}
		for name, bad := range map[string]runevents.ThreadRun{
			"array kwargs":           {Kwargs: json.RawMessage(`[1]`)},
			"broken kwargs":          {Kwargs: json.RawMessage(`{`)},
			"negative message count": {MessageCount: -1},
			"NUL in assistant id":    {AssistantID: "a\x00b"},
			"invalid UTF-8 reason":   {StopReason: "\xff"},
		} {
			bad.ThreadID, bad.RunID, bad.OwnerID, bad.Status = "t1", "r2", alice, runevents.RunSuccess
			_, err := s.PutRun(t.Context(), bad)
			wantCode(t, err, runstream.CodeInvalidArgument, "PutRun with "+name)
		}
	}},
	{"FeedbackPerMessage", func(t *testing.T, s runevents.RunStore) {
		ctx := t.Context()
		putRun(t, s, threadRun("t1", "r1", 0, runevents.RunSuccess))
		run, err := s.PutFeedback(ctx, runevents.Feedback{ThreadID: "t1", RunID: "r1", UserID: alice, Rating: json.RawMessage(`1`)})
		if err != nil {
			t.Fatal(err)
		}
		msg, err := s.PutFeedback(ctx, runevents.Feedback{ThreadID: "t1", RunID: "r1", UserID: alice, MessageID: "m1",
			Rating: json.RawMessage(`-1`), Tags: []string{"slow", "incorrect"}})
		if err != nil || msg.ID == run.ID || msg.MessageID != "m1" {
			t.Fatalf("feedback on message m1 = %+v, %v; want a second feedback", msg, err)
		}
		again, err := s.PutFeedback(ctx, runevents.Feedback{ThreadID: "t1", RunID: "r1", UserID: alice, MessageID: "m1", Rating: json.RawMessage(`1`)})
		if err != nil || again.ID != msg.ID || again.Tags != nil {
			t.Errorf("replacing m1's feedback = %+v, %v; want id %s kept, tags gone", again, err, msg.ID)
		}
		bobs, err := s.PutFeedback(ctx, runevents.Feedback{ThreadID: "t1", RunID: "r1", UserID: bob, Rating: json.RawMessage(`-1`), Tags: []string{"other"}})
		if err != nil {
			t.Fatal(err)
		}
		all, err := s.ListRunFeedback(ctx, "t1", "r1", runevents.AnyOwner)
		if err != nil || feedbackIDs(all) != fmt.Sprint([]string{run.ID, msg.ID, bobs.ID}) {
			t.Errorf("ListRunFeedback(any) = %v, %v; want %s %s %s, oldest first", feedbackIDs(all), err, run.ID, msg.ID, bobs.ID)
		}
		if len(all) == 3 && (fmt.Sprint(all[2].Tags) != "[other]" || all[1].MessageID != "m1" || string(all[1].Rating) != "1") {
			t.Errorf("listed rows lost their fields: %+v", all)
		}
		mine, _ := s.ListRunFeedback(ctx, "t1", "r1", asAlice)
		if feedbackIDs(mine) != fmt.Sprint([]string{run.ID, msg.ID}) {
			t.Errorf("ListRunFeedback(alice) = %v; want her two", feedbackIDs(mine))
		}
		if none, err := s.ListRunFeedback(ctx, "t1", "r9", runevents.AnyOwner); len(none) != 0 || err != nil {
			t.Errorf("ListRunFeedback of a run without feedback = %v, %v", none, err)
		}
		if n, err := s.DeleteFeedbackByID(ctx, "t1", "r1", bobs.ID, asAlice); n != 0 || err != nil {
			t.Errorf("alice deletes bob's feedback by id = %d, %v; want 0", n, err)
		}
		if n, err := s.DeleteFeedbackByID(ctx, "t1", "r2", msg.ID, asAlice); n != 0 || err != nil {
			t.Errorf("delete by id on another run = %d, %v; want 0", n, err)
		}
		if n, err := s.DeleteFeedbackByID(ctx, "t1", "r1", msg.ID, asAlice); n != 1 || err != nil {
			t.Errorf("alice deletes her m1 feedback = %d, %v; want 1", n, err)
		}
		if n, err := s.DeleteFeedback(ctx, "t1", "r1", asBob); n != 1 || err != nil {
			t.Errorf("bob deletes his on r1 = %d, %v; want 1", n, err)
		}
		left, _ := s.ListRunFeedback(ctx, "t1", "r1", runevents.AnyOwner)
		if feedbackIDs(left) != fmt.Sprint([]string{run.ID}) {
			t.Errorf("left %v; want %s", feedbackIDs(left), run.ID)
		}
		for name, bad := range map[string]runevents.Feedback{
			"unknown tag":     {Tags: []string{"boring"}},
			"repeated tag":    {Tags: []string{"slow", "slow"}},
			"NUL message id":  {MessageID: "m\x00"},
			"long message id": {MessageID: string(make([]byte, runevents.MaxFeedbackMessageID+1))},
		} {
			bad.ThreadID, bad.RunID, bad.UserID, bad.Rating = "t1", "r1", alice, json.RawMessage(`1`)
			_, err := s.PutFeedback(ctx, bad)
			wantCode(t, err, runstream.CodeInvalidArgument, "PutFeedback with "+name)
		}
		_, err = s.ListRunFeedback(ctx, "t1", "r1", runevents.Owner{})
		wantCode(t, err, runstream.CodeInvalidArgument, "ListRunFeedback without owner")
		_, err = s.DeleteFeedbackByID(ctx, "t/1", "r1", "x", asAlice)
		wantCode(t, err, runstream.CodeInvalidArgument, "DeleteFeedbackByID with a bad thread id")
	}},
	{"FeedbackShownPrefersTheRunsRating", func(t *testing.T, s runevents.RunStore) {
		// ListFeedback shows of a run its rating of the whole run, even
		// when a rating of a message is newer; without one, a rating of a
		// message.
		ctx := t.Context()
		putRun(t, s, threadRun("t1", "r1", 0, runevents.RunSuccess))
		put := func(message, rating string) runevents.Feedback {
			f, err := s.PutFeedback(ctx, runevents.Feedback{ThreadID: "t1", RunID: "r1", UserID: alice, MessageID: message, Rating: json.RawMessage(rating)})
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
		put("m1", "-1")
		run := put("", "1")
		put("m2", "-1")
		for _, owner := range []runevents.Owner{asAlice, runevents.AnyOwner} {
			got, err := s.ListFeedback(ctx, "t1", []string{"r1"}, owner)
			if f := got["r1"]; err != nil || f.ID != run.ID || f.MessageID != "" || string(f.Rating) != "1" {
				t.Errorf("ListFeedback as %q = %+v, %v; want the run's rating %s, not a newer message's", owner.UserID(), f, err, run.ID)
			}
		}
		if n, err := s.DeleteFeedbackByID(ctx, "t1", "r1", run.ID, asAlice); n != 1 || err != nil {
			t.Fatalf("delete the run's rating = %d, %v", n, err)
		}
		got, err := s.ListFeedback(ctx, "t1", []string{"r1"}, asAlice)
		if f := got["r1"]; err != nil || (f.MessageID != "m1" && f.MessageID != "m2") {
			t.Errorf("ListFeedback without the run's rating = %+v, %v; want a message's", f, err)
		}
	}},
}

func deerflowFields(r runevents.ThreadRun) string {
	return fmt.Sprintf("%s|%s|%s|%d|%s", r.AssistantID, r.Kwargs, r.MultitaskStrategy, r.MessageCount, r.StopReason)
}

func feedbackIDs(list []runevents.Feedback) string {
	ids := make([]string, len(list))
	for i, f := range list {
		ids[i] = f.ID
	}
	return fmt.Sprint(ids)
}
