package postgres

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/runstream/runstream/runevents"
)

// TestTaskQueryUsesIndex checks that the planner answers the task filter
// of ListEvents from the task index, not by scanning the run.
func TestTaskQueryUsesIndex(t *testing.T) {
	db := openDB(t, newSchema(t))
	s, ctx := db.RunEvents(), t.Context()
	for b := range 20 {
		var batch []runevents.NewEvent
		for i := range 1000 {
			e := prepEvent("t1", "r1")
			if i%100 == 0 { // 1% of the run belongs to one of 10 tasks
				e.Metadata = json.RawMessage(fmt.Sprintf(`{"task_id":"task-%d"}`, (b*10+i/100)%10))
			}
			batch = append(batch, e)
		}
		if _, err := s.PutBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.pool.Exec(ctx, "ANALYZE run_events"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		p    runevents.ListEventsParams
		want int
	}{
		{"task", runevents.ListEventsParams{TaskID: "task-3"}, 20},
		{"task after seq", runevents.ListEventsParams{TaskID: "task-3", AfterSeq: runevents.Seq(5000)}, 15},
		{"task and types", runevents.ListEventsParams{TaskID: "task-3", EventTypes: []runevents.EventType{runevents.EventRunStart}}, 20},
		{"task of an owner", runevents.ListEventsParams{TaskID: "task-3", Owner: runevents.OwnedBy("u")}, 20},
	}
	for _, tc := range tests {
		p := tc.p
		p.ThreadID, p.RunID, p.Limit = "t1", "r1", 50
		if p.Owner.IsZero() {
			p.Owner = runevents.AnyOwner
		}
		sql, args, ok := listEventsQuery(p)
		if !ok {
			t.Fatalf("%s: no query", tc.name)
		}
		plan := explain(t, db, sql, args)
		if !strings.Contains(plan, "run_events_thread_run_task_seq") {
			t.Errorf("%s: plan does not use the task index:\n%s", tc.name, plan)
		}
		got, err := s.ListEvents(ctx, p)
		if err != nil || len(got) != tc.want {
			t.Errorf("%s: %d rows, %v; want %d", tc.name, len(got), err, tc.want)
		}
	}
}

// explain returns the plan of a page query as the store runs it.
func explain(t *testing.T, db *DB, sql string, args []any) string {
	t.Helper()
	lines, err := queryPage(t.Context(), db.pool, "EXPLAIN "+sql, args, func(rows pgx.Rows) ([]string, error) {
		return pgx.CollectRows(rows, pgx.RowTo[string])
	})
	if err != nil {
		t.Fatalf("EXPLAIN: %v", err)
	}
	return strings.Join(lines, "\n")
}

// TestPagesReadInIndexOrder checks that every page query has an index in
// its order: with sorting disabled (see queryPage) a missing one would
// still show a Sort in the plan.
func TestPagesReadInIndexOrder(t *testing.T) {
	db := openDB(t, newSchema(t))
	s, ctx := db.RunEvents(), t.Context()
	for range 5 {
		var batch []runevents.NewEvent
		for i := range 1000 {
			e := prepEvent("t1", "r"+strconv.Itoa(i%3))
			if i%10 == 0 {
				e.EventType, e.Category = runevents.EventLLMAIResponse, runevents.CategoryMessage
			}
			batch = append(batch, e)
		}
		if _, err := s.PutBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.pool.Exec(ctx, "ANALYZE run_events"); err != nil {
		t.Fatal(err)
	}
	u, after, before := runevents.OwnedBy("u"), runevents.Seq(100), runevents.Seq(4000)
	type page struct {
		name    string
		sql     string
		args    []any
		indexes []string // any of them will do
	}
	var pages []page
	for _, run := range []string{"", "r1"} {
		indexes := []string{"run_events_thread_messages_seq"}
		if run != "" {
			indexes = append(indexes, "run_events_thread_run_seq")
		}
		for _, c := range []struct {
			name          string
			after, before *int64
		}{{"latest", nil, nil}, {"before", nil, before}, {"after", after, nil}, {"window", after, before}} {
			sql, args, _, _ := listMessagesQuery("t1", run, u, c.after, c.before, 50)
			pages = append(pages, page{"messages " + c.name + " of run " + run, sql, args, indexes})
		}
	}
	for _, p := range []runevents.ListEventsParams{{}, {AfterSeq: after}, {EventTypes: []runevents.EventType{runevents.EventRunStart}}} {
		p.ThreadID, p.RunID, p.Owner, p.Limit = "t1", "r1", u, 50
		sql, args, _ := listEventsQuery(p)
		pages = append(pages, page{fmt.Sprintf("events after %v types %v", p.AfterSeq != nil, p.EventTypes), sql, args, []string{"run_events_thread_run_seq"}})
	}
	for _, p := range pages {
		plan := explain(t, db, p.sql, p.args)
		uses := slices.ContainsFunc(p.indexes, func(index string) bool {
			return strings.Contains(plan, "Index Scan using "+index) || strings.Contains(plan, "Index Scan Backward using "+index)
		})
		if strings.Contains(plan, "Sort") || !uses {
			t.Errorf("%s: plan sorts or does not read %v in order:\n%s", p.name, p.indexes, plan)
		}
	}
}

// TestQueryPageDisablesSortForItsQueryOnly checks that a page query runs
// with enable_sort off and that the connection has it back on after.
func TestQueryPageDisablesSortForItsQueryOnly(t *testing.T) {
	db := openDB(t, newSchema(t))
	ctx := t.Context()
	for range 3 { // the pool reuses its connections
		setting, err := queryPage(ctx, db.pool, "SELECT current_setting('enable_sort')", nil, func(rows pgx.Rows) (string, error) {
			return pgx.CollectExactlyOneRow(rows, pgx.RowTo[string])
		})
		if err != nil || setting != "off" {
			t.Errorf("enable_sort in a page query: %q, %v; want off", setting, err)
		}
		if err := db.pool.QueryRow(ctx, "SELECT current_setting('enable_sort')").Scan(&setting); err != nil || setting != "on" {
			t.Errorf("enable_sort after a page query: %q, %v; want on", setting, err)
		}
	}
}
