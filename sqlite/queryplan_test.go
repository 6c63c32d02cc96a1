package sqlite

import (
	"strings"
	"testing"

	"github.com/runstream/runstream/runevents"
)

// queryPlan returns the EXPLAIN QUERY PLAN lines of q on the read pool.
func queryPlan(t *testing.T, db *DB, q query) []string {
	t.Helper()
	rows, err := db.readers.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q.sql, q.args...)
	if err != nil {
		t.Fatalf("EXPLAIN QUERY PLAN %s: %v", q.sql, err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}

// The read queries search run_events through the index meant for them,
// never by a full scan, and need no sort: the index yields seq order.
func TestQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	db := newDB(t, Config{})
	after, before := runevents.Seq(10), runevents.Seq(100)
	owner := runevents.OwnedBy("u")
	ai := []runevents.EventType{runevents.EventLLMAIResponse}
	for _, tc := range []struct {
		name  string
		q     query
		index string
	}{
		{"ListEventsTask", listEventsQuery(runevents.ListEventsParams{ThreadID: "t", RunID: "r", Owner: owner, TaskID: "task", Limit: 50}), "run_events_run_tasks"},
		{"ListEventsTaskTypesAfter", listEventsQuery(runevents.ListEventsParams{ThreadID: "t", RunID: "r", Owner: runevents.AnyOwner, TaskID: "task",
			EventTypes: []runevents.EventType{runevents.EventSubagentStep}, AfterSeq: after, Limit: 50}), "run_events_run_tasks"},
		{"ListEvents", listEventsQuery(runevents.ListEventsParams{ThreadID: "t", RunID: "r", Owner: owner, AfterSeq: after, Limit: 500}), "run_events_run"},
		{"ListEventsTypes", listEventsQuery(runevents.ListEventsParams{ThreadID: "t", RunID: "r", Owner: owner, EventTypes: ai, Limit: 500}), "run_events_run"},
		{"ListMessagesLatest", listMessagesQuery(runevents.ListMessagesParams{ThreadID: "t", Owner: owner, Limit: 50}), "run_events_messages"},
		{"ListMessagesWindow", listMessagesQuery(runevents.ListMessagesParams{ThreadID: "t", Owner: runevents.AnyOwner, AfterSeq: after, BeforeSeq: before, Limit: 50}), "run_events_messages"},
		{"ListMessagesByRun", listMessagesByRunQuery(runevents.ListMessagesByRunParams{ThreadID: "t", RunID: "r", Owner: owner, BeforeSeq: before, Limit: 50}), "run_events_run_messages"},
		{"FirstOfType", query{sql: firstOfTypeSQL, args: []any{"t", "r", "run.delivery"}}, "run_events_run"},
		{"LastVisibleAI", lastVisibleAIQuery("t", []string{"r1", "r2"}, owner), "run_events_run_messages"},
		{"CountMessages", countMessagesQuery("t", runevents.AnyOwner), "run_events_messages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			plan := queryPlan(t, db, tc.q)
			joined := strings.Join(plan, "\n")
			t.Log(joined)
			if !strings.Contains(joined, "INDEX "+tc.index+" (") {
				t.Errorf("plan does not use %s:\n%s", tc.index, joined)
			}
			for _, line := range plan {
				if strings.HasPrefix(line, "SCAN run_events") && !strings.Contains(line, "USING") {
					t.Errorf("full scan of run_events: %q", line)
				}
				if strings.Contains(line, "TEMP B-TREE") {
					t.Errorf("the rows are sorted instead of read in index order: %q", line)
				}
			}
		})
	}
}
