package workflowtest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

var eventTests = []test{
	{"ListWindows", func(t *testing.T, s workflow.Store) {
		run := newRun(t, s, nil)
		other := newRun(t, s, nil)
		batch := make([]workflow.NewEvent, 8)
		for i := range batch {
			batch[i] = progress(i)
		}
		appendEvents(t, s, workflow.AppendParams{RunID: other.ID, Events: batch[:3]})
		appendEvents(t, s, workflow.AppendParams{RunID: run.ID, Events: batch})
		all := allEvents(t, s, run.ID)
		if got := seqsOf(all); !slices.Equal(got, span(1, 10)) {
			t.Fatalf("events of the run: seqs %v, want 1..10", got)
		}
		for after := int64(0); after <= 11; after++ {
			for limit := 1; limit <= 12; limit++ {
				got, err := s.ListEvents(t.Context(), run.ID, after, limit)
				if err != nil {
					t.Fatalf("ListEvents(after %d, limit %d): %v", after, limit, err)
				}
				want := all[min(after, 10):min(after+int64(limit), 10)]
				sameEnvelopes(t, fmt.Sprintf("ListEvents(after %d, limit %d)", after, limit), got, want)
			}
		}
		if got := seqsOf(allEvents(t, s, other.ID)); !slices.Equal(got, span(1, 5)) {
			t.Errorf("events of the other run: seqs %v, want 1..5", got)
		}
	}},
	{"ListLimits", func(t *testing.T, s workflow.Store) {
		run := newRun(t, s, nil)
		batch := make([]workflow.NewEvent, 100)
		for i := range batch {
			batch[i] = progress(i)
		}
		for range 10 {
			appendEvents(t, s, workflow.AppendParams{RunID: run.ID, Events: batch})
		}
		got, err := s.ListEvents(t.Context(), run.ID, 0, workflow.MaxEventPageLimit)
		if err != nil || len(got) != workflow.MaxEventPageLimit {
			t.Errorf("ListEvents with the maximum limit: %d events, %v; want %d", len(got), err, workflow.MaxEventPageLimit)
		}
		got, err = s.ListEvents(t.Context(), run.ID, 1000, workflow.MaxEventPageLimit)
		if err != nil || !slices.Equal(seqsOf(got), span(1001, 1002)) {
			t.Errorf("ListEvents after 1000: seqs %v, %v; want [1001 1002]", seqsOf(got), err)
		}
		cases := []struct {
			name  string
			after int64
			limit int
		}{
			{"negative after", -1, 10},
			{"limit 0", 0, 0},
			{"negative limit", 0, -1},
			{"limit above the maximum", 0, workflow.MaxEventPageLimit + 1},
		}
		for _, c := range cases {
			_, err := s.ListEvents(t.Context(), run.ID, c.after, c.limit)
			wantCode(t, err, runstream.CodeInvalidArgument, c.name)
		}
	}},
	{"ListUnknownRun", func(t *testing.T, s workflow.Store) {
		// An unknown run is reported, not read as empty, so that a stream
		// notices a run that went away.
		_, err := s.ListEvents(t.Context(), newID("run"), 0, 10)
		wantCode(t, err, runstream.CodeWorkflowRunNotFound, "ListEvents of an unknown run")
	}},
	{"Envelope", func(t *testing.T, s workflow.Store) {
		run := newRun(t, s, nil)
		given := time.Date(2026, 8, 26, 10, 0, 0, 123456789, time.FixedZone("", 8*3600))
		inputs := []workflow.NewEvent{
			nodeEvent(workflow.EventNodeProgress, "n1", `{"b":1,"a":[true,null,"é\u2028"]}`),
			runEvent(workflow.EventRunStarted, ""),
			{Event: workflow.EventNodeOutputDelta, NodeID: "n2", Timestamp: given, Data: json.RawMessage(`{}`)},
			{Event: workflow.EventNodeQueued, NodeID: "n3"},
			runEvent(workflow.EventRunCancelRequested, `{"requestedBy":"alice"}`),
		}
		before := time.Now()
		envs := appendEvents(t, s, workflow.AppendParams{RunID: run.ID, Events: inputs})
		after := time.Now()
		want := make([]workflow.Envelope, len(inputs))
		for i, e := range inputs {
			want[i] = workflow.Envelope{
				SchemaVersion: "1.0", RunID: run.ID, WorkflowID: run.WorkflowID, VersionID: run.VersionID,
				Seq: int64(i + 3), Event: e.Event, NodeID: e.NodeID, NodeRunID: e.NodeRunID,
				Timestamp: envs[i].Timestamp, Data: e.Data,
			}
			if len(e.Data) == 0 {
				want[i].Data = json.RawMessage(`{}`)
			}
			if e.Timestamp.IsZero() {
				checkDefaultTime(t, fmt.Sprintf("defaulted timestamp of seq %d", i+3), envs[i].Timestamp, before, after)
			}
		}
		want[2].Timestamp = given.Truncate(time.Microsecond)
		sameEnvelopes(t, "Append returned", envs, want)
		sameEnvelopes(t, "ListEvents", allEvents(t, s, run.ID)[2:], want)
	}},
}

var copyTests = []test{
	{"Workflow", func(t *testing.T, s workflow.Store) {
		def := []byte(`{"name":"x"}`)
		w := workflow.Workflow{ID: newID("wf"), OwnerID: alice}
		v := workflow.Version{ID: newID("wv"), Definition: def}
		_, gv, err := s.CreateWorkflow(t.Context(), w, v)
		if err != nil {
			t.Fatalf("CreateWorkflow: %v", err)
		}
		def[0], gv.Definition[0] = '#', '#'
		got, err := s.GetVersion(t.Context(), w.ID, v.ID, asAlice)
		if err != nil {
			t.Fatalf("GetVersion: %v", err)
		}
		if string(got.Definition) != `{"name":"x"}` {
			t.Fatalf("definition %s after changing what went in and came out, want {\"name\":\"x\"}", got.Definition)
		}
		got.Definition[0] = '#'
		v2 := workflow.Version{ID: newID("wv"), WorkflowID: w.ID, Definition: []byte(`{"n":2}`)}
		gv2, err := s.AddVersion(t.Context(), v2, asAlice)
		if err != nil {
			t.Fatalf("AddVersion: %v", err)
		}
		v2.Definition[0], gv2.Definition[0] = '#', '#'
		for id, want := range map[string]string{v.ID: `{"name":"x"}`, v2.ID: `{"n":2}`} {
			got, err := s.GetVersion(t.Context(), w.ID, id, asAlice)
			if err != nil || string(got.Definition) != want {
				t.Errorf("definition of %s: %s, %v; want %s", id, got.Definition, err, want)
			}
		}
	}},
	{"Run", func(t *testing.T, s workflow.Store) {
		w, v := newWorkflow(t, s, alice)
		input, data := []byte(`{"q":1}`), []byte(`{"version":1}`)
		r := workflow.Run{ID: newID("run"), WorkflowID: w.ID, VersionID: v.ID, OwnerID: alice, Input: input}
		gr, envs, err := s.CreateRun(t.Context(), r, []workflow.NewEvent{{Event: workflow.EventRunCreated, Data: data}})
		if err != nil {
			t.Fatalf("CreateRun: %v", err)
		}
		input[0], data[0], gr.Input[0], envs[0].Data[0] = '#', '#', '#', '#'
		listed, err := s.ListRuns(t.Context(), workflow.ListRunsParams{Owner: asAlice, Limit: 10})
		if err != nil || len(listed) != 1 {
			t.Fatalf("ListRuns: %d runs, %v", len(listed), err)
		}
		listed[0].Input[0] = '#'
		read := getRun(t, s, r.ID)
		read.Input[0] = '#'
		events := allEvents(t, s, r.ID)
		events[0].Data[0] = '#'

		delta, output := []byte(`{"delta":"d"}`), []byte(`{"output":{"o":1},"artifacts":[]}`)
		appended := appendEvents(t, s, workflow.AppendParams{RunID: r.ID, Events: []workflow.NewEvent{
			{Event: workflow.EventNodeOutputDelta, NodeID: "n1", Data: delta},
			{Event: workflow.EventRunCompleted, Data: output},
		}})
		delta[0], output[0], appended[0].Data[0], appended[1].Data[0] = '#', '#', '#', '#'
		done := getRun(t, s, r.ID)
		done.Output[0] = '#'

		got := getRun(t, s, r.ID)
		if string(got.Input) != `{"q":1}` || string(got.Output) != `{"o":1}` {
			t.Errorf("run input %s and output %s after changing copies, want {\"q\":1} and {\"o\":1}", got.Input, got.Output)
		}
		wantData := []string{`{"version":1}`, `{"delta":"d"}`, `{"output":{"o":1},"artifacts":[]}`}
		for i, e := range allEvents(t, s, r.ID) {
			if string(e.Data) != wantData[i] {
				t.Errorf("data of seq %d: %s after changing copies, want %s", e.Seq, e.Data, wantData[i])
			}
		}
	}},
	{"ResumeToken", func(t *testing.T, s workflow.Store) {
		run := newRun(t, s, nil)
		tok := workflow.ResumeToken{NodeID: "ask", Hash: hashOf("secret"), Actions: []string{"approve"}, FormSchema: []byte(`{"type":"object"}`), ExpiresAt: base.Add(time.Hour)}
		want := tok
		want.RunID, want.Hash, want.Actions, want.FormSchema = run.ID, hashOf("secret"), []string{"approve"}, []byte(`{"type":"object"}`)
		appendEvents(t, s, workflow.AppendParams{RunID: run.ID, Events: []workflow.NewEvent{nodeEvent(workflow.EventRunAwaitingInput, "ask", "")}, ResumeToken: &tok})
		tok.Hash[0]++
		tok.Actions[0] = "reject"
		tok.FormSchema[0] = '#'
		got, err := s.PendingResumeToken(t.Context(), run.ID)
		if err != nil {
			t.Fatalf("PendingResumeToken: %v", err)
		}
		got.Hash[0]++
		got.Actions[0] = "reject"
		got.FormSchema[0] = '#'
		got, err = s.PendingResumeToken(t.Context(), run.ID)
		if err != nil {
			t.Fatalf("PendingResumeToken: %v", err)
		}
		sameToken(t, "token after changing copies", got, want)
	}},
}
