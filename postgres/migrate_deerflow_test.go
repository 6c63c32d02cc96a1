package postgres

import (
	"io/fs"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/runstream/runstream/runevents"
)

// 0004_deerflow_rows.sql upgrades a schema with run rows and feedback:
// the rows keep their values and read with the DeerFlow defaults, the
// feedback keeps its id and rates the whole run.
func TestMigrationDeerFlowRowsKeepsData(t *testing.T) {
	schema := newSchema(t)
	pool := testPool(t, schema)
	ctx := t.Context()
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	before := fstest.MapFS{}
	for _, name := range names {
		if filepath.Base(name) < "0004" {
			data, _ := fs.ReadFile(migrationFiles, name)
			before[name] = &fstest.MapFile{Data: data}
		}
	}
	if err := migrate(ctx, pool, schema, before); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`INSERT INTO thread_runs (thread_id, run_id, owner_id, status, operation_kind, model_name, metadata, total_input_tokens, total_output_tokens,
			total_tokens, llm_call_count, lead_agent_tokens, subagent_tokens, middleware_tokens, usage_by_model, created_at, created_at_offset, updated_at, updated_at_offset)
			VALUES ('t1', 'r1', 'alice', 'success', 'run', 'gpt-4o', '{}', 1, 2, 3, 1, 3, 0, 0, NULL, now(), 0, now(), 0)`,
		`INSERT INTO feedback (id, thread_id, run_id, user_id, rating, comment, created_at, updated_at)
			VALUES ('fb_old', 't1', 'r1', 'alice', '1', 'good', now(), now())`,
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	db := openDB(t, schema)
	run, err := db.Runs().GetRun(ctx, "t1", "r1", runevents.AnyOwner)
	if err != nil || run.ModelName != "gpt-4o" || run.Usage.TotalTokens != 3 || string(run.Kwargs) != "{}" || run.MultitaskStrategy != "reject" ||
		run.AssistantID != "" || run.MessageCount != 0 || run.StopReason != "" {
		t.Errorf("upgraded run row = %+v, %v", run, err)
	}
	list, err := db.Runs().ListRunFeedback(ctx, "t1", "r1", runevents.AnyOwner)
	if err != nil || len(list) != 1 || list[0].ID != "fb_old" || list[0].MessageID != "" || list[0].Tags != nil || list[0].Comment != "good" {
		t.Fatalf("upgraded feedback = %+v, %v", list, err)
	}
	again, err := db.Runs().PutFeedback(ctx, runevents.Feedback{ThreadID: "t1", RunID: "r1", UserID: "alice", Rating: []byte(`-1`)})
	if err != nil || again.ID != "fb_old" {
		t.Errorf("PutFeedback after the upgrade = %+v, %v; want fb_old replaced", again, err)
	}
}
