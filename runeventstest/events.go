package runeventstest

import (
	"fmt"
	"testing"

	"github.com/runstream/runstream/runevents"
)

var listEventsTests = []test{
	{"OneRunAllCategories", func(t *testing.T, s runevents.Store) {
		recs := seedBrute(t, s)
		for _, run := range []string{"ra", "rb"} {
			var want []runevents.Record
			for _, r := range recs {
				if r.RunID == run {
					want = append(want, r)
				}
			}
			sameRecords(t, "ListEvents of "+run, runRows(t, s, "t1", run, asAlice), want)
		}
		if got := runRows(t, s, "t1", "missing", asAlice); len(got) != 0 {
			t.Errorf("unknown run: %d rows", len(got))
		}
		if got := runRows(t, s, "t-none", "ra", asAlice); len(got) != 0 {
			t.Errorf("unknown thread: %d rows", len(got))
		}
	}},
	{"AfterSeqAndLimit", func(t *testing.T, s runevents.Store) {
		recs := seedBrute(t, s)
		var all []int64
		for _, r := range recs {
			if r.RunID == "ra" {
				all = append(all, r.Seq)
			}
		}
		for after := int64(-1); after <= int64(len(recs))+1; after++ {
			for _, limit := range []int{1, 3, 100} {
				var want []int64
				for _, seq := range all {
					if seq > after && len(want) < limit {
						want = append(want, seq)
					}
				}
				got := listEvents(t, s, runevents.ListEventsParams{ThreadID: "t1", RunID: "ra", Owner: asAlice, AfterSeq: runevents.Seq(after), Limit: limit})
				if !equalSeqs(seqs(got), want) {
					t.Errorf("after=%d limit=%d: %v, want %v", after, limit, seqs(got), want)
				}
			}
		}
		got := listEvents(t, s, runevents.ListEventsParams{ThreadID: "t1", RunID: "ra", Owner: asAlice, Limit: 2})
		if !equalSeqs(seqs(got), all[:2]) {
			t.Errorf("no cursor, limit 2: %v, want the first two %v", seqs(got), all[:2])
		}
	}},
	{"EventTypes", func(t *testing.T, s runevents.Store) {
		putBatch(t, s, []runevents.NewEvent{
			trace("t1", "r1"), msg("t1", "r1"), delivery("t1", "r1", `""`), msg("t1", "r1"), trace("t1", "r2"),
		})
		cases := []struct {
			types []runevents.EventType
			want  []int64
		}{
			{nil, []int64{1, 2, 3, 4}},
			{[]runevents.EventType{}, []int64{1, 2, 3, 4}},
			{[]runevents.EventType{runevents.EventLLMAIResponse}, []int64{2, 4}},
			{[]runevents.EventType{runevents.EventRunStart, runevents.EventRunDelivery}, []int64{1, 3}},
			{[]runevents.EventType{runevents.EventRunError}, nil},
		}
		for _, c := range cases {
			got := listEvents(t, s, runevents.ListEventsParams{ThreadID: "t1", RunID: "r1", Owner: asAlice, EventTypes: c.types, Limit: 100})
			if !equalSeqs(seqs(got), c.want) {
				t.Errorf("event types %q: %v, want %v", c.types, seqs(got), c.want)
			}
		}
	}},
	{"TaskIDBeforeLimit", func(t *testing.T, s runevents.Store) {
		step := func(task string, i int) runevents.NewEvent {
			e := ev("t1", "r1", runevents.EventSubagentStep, runevents.CategorySubagent, fmt.Sprintf(`{"task_id":%q,"message_index":%d}`, task, i))
			return withMeta(e, fmt.Sprintf(`{"task_id":%q,"message_index":%d}`, task, i))
		}
		var events []runevents.NewEvent
		for i := range 500 {
			if i%50 == 25 {
				events = append(events, step("task-a", len(events)))
			}
			events = append(events, step("task-b", i))
		}
		// Rows that must never match task "7" or "task-a".
		events = append(events,
			withMeta(ev("t1", "r1", runevents.EventSubagentStep, runevents.CategorySubagent, `{}`), `{"task_id":7}`),
			withMeta(ev("t1", "r1", runevents.EventSubagentStep, runevents.CategorySubagent, `{}`), `{"task":{"task_id":"task-a"}}`),
			withMeta(ev("t1", "r1", runevents.EventSubagentStart, runevents.CategorySubagent, `{}`), `{"task_id":"task-a"}`),
		)
		recs := putBatch(t, s, events)
		var wantA []int64
		for _, r := range recs {
			if id, ok := r.MetadataString("task_id"); ok && id == "task-a" && r.EventType == runevents.EventSubagentStep {
				wantA = append(wantA, r.Seq)
			}
		}
		if len(wantA) != 10 {
			t.Fatalf("seeded %d task-a steps, want 10", len(wantA))
		}
		var got []int64
		var after *int64
		for range 10 {
			page := listEvents(t, s, runevents.ListEventsParams{ThreadID: "t1", RunID: "r1", Owner: asAlice, Limit: 3,
				EventTypes: []runevents.EventType{runevents.EventSubagentStep}, TaskID: "task-a", AfterSeq: after})
			got = append(got, seqs(page)...)
			if len(page) < 3 {
				break
			}
			after = runevents.Seq(page[len(page)-1].Seq)
		}
		if !equalSeqs(got, wantA) {
			t.Errorf("paging task-a by 3: %v, want %v", got, wantA)
		}
		all := listEvents(t, s, runevents.ListEventsParams{ThreadID: "t1", RunID: "r1", Owner: asAlice, Limit: 100, TaskID: "task-a"})
		if len(all) != 11 {
			t.Errorf("task-a rows of every type: %d, want 11", len(all))
		}
		if n := listEvents(t, s, runevents.ListEventsParams{ThreadID: "t1", RunID: "r1", Owner: asAlice, Limit: 100, TaskID: "7"}); len(n) != 0 {
			t.Errorf("task_id \"7\" matched %d rows; a numeric metadata.task_id must never match", len(n))
		}
	}},
	{"EmptyTaskID", func(t *testing.T, s runevents.Store) {
		// An empty task id given (HasTaskID) matches by equality: the rows
		// whose metadata.task_id is "" (or null, which reads as "", see
		// runevents.Filters), not those without one.
		recs := putBatch(t, s, []runevents.NewEvent{
			withMeta(ev("t1", "r1", runevents.EventRunStart, runevents.CategoryTrace, `{}`), `{}`),
			withMeta(ev("t1", "r1", runevents.EventRunStart, runevents.CategoryTrace, `{}`), `{"task_id":""}`),
			withMeta(ev("t1", "r1", runevents.EventRunStart, runevents.CategoryTrace, `{}`), `{"task_id":null}`),
			withMeta(ev("t1", "r1", runevents.EventRunStart, runevents.CategoryTrace, `{}`), `{"task_id":"a"}`),
		})
		got := listEvents(t, s, runevents.ListEventsParams{ThreadID: "t1", RunID: "r1", Owner: asAlice, Limit: 100, HasTaskID: true})
		if !equalSeqs(seqs(got), []int64{recs[1].Seq, recs[2].Seq}) {
			t.Errorf("task_id \"\" given: %v, want the rows whose task_id is \"\" or null (%d, %d)", seqs(got), recs[1].Seq, recs[2].Seq)
		}
		if all := listEvents(t, s, runevents.ListEventsParams{ThreadID: "t1", RunID: "r1", Owner: asAlice, Limit: 100}); len(all) != 4 {
			t.Errorf("no task filter: %d rows, want 4", len(all))
		}
	}},
}
