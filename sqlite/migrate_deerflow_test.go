package sqlite

import (
	"database/sql"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/runstream/runstream/runevents"
)

// migrationsBefore returns the embedded migrations numbered below
// version (a "NNNN" prefix).
func migrationsBefore(t *testing.T, version string) fstest.MapFS {
	t.Helper()
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	out := fstest.MapFS{}
	for _, name := range names {
		if filepath.Base(name) < version {
			data, err := fs.ReadFile(migrationFiles, name)
			if err != nil {
				t.Fatal(err)
			}
			out[name] = &fstest.MapFile{Data: data}
		}
	}
	return out
}

// 0005_deerflow_rows.sql upgrades a database with run rows and feedback:
// the rows keep their values and read with the DeerFlow defaults, the
// feedback keeps its id and rates the whole run.
func TestMigrationDeerFlowRowsKeepsData(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "runstream.db")
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if err := migrate(t.Context(), raw, migrationsBefore(t, "0005")); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`INSERT INTO thread_runs (thread_id, run_id, owner_id, status, operation_kind, model_name, metadata, total_input_tokens, total_output_tokens,
			total_tokens, llm_call_count, lead_agent_tokens, subagent_tokens, middleware_tokens, usage_by_model, created_at, created_offset, updated_at, updated_offset)
			VALUES ('t1', 'r1', 'alice', 'success', 'run', 'gpt-4o', '{}', 1, 2, 3, 1, 3, 0, 0, NULL, 1000000, 0, 2000000, 0)`,
		`INSERT INTO feedback (id, thread_id, run_id, user_id, rating, comment, created_at, updated_at)
			VALUES ('fb_old', 't1', 'r1', 'alice', '1', 'good', 1000000, 1000000)`,
	} {
		if _, err := raw.ExecContext(t.Context(), stmt); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()

	db := newDB(t, Config{Path: path})
	run, err := db.Runs().GetRun(t.Context(), "t1", "r1", runevents.AnyOwner)
	if err != nil || run.ModelName != "gpt-4o" || run.Usage.TotalTokens != 3 || string(run.Kwargs) != "{}" || run.MultitaskStrategy != "reject" ||
		run.AssistantID != "" || run.MessageCount != 0 || run.StopReason != "" {
		t.Errorf("upgraded run row = %+v, %v", run, err)
	}
	list, err := db.Runs().ListRunFeedback(t.Context(), "t1", "r1", runevents.AnyOwner)
	if err != nil || len(list) != 1 || list[0].ID != "fb_old" || list[0].MessageID != "" || list[0].Tags != nil || list[0].Comment != "good" {
		t.Fatalf("upgraded feedback = %+v, %v", list, err)
	}
	// The old row is the user's feedback on the run: PUT replaces it.
	again, err := db.Runs().PutFeedback(t.Context(), runevents.Feedback{ThreadID: "t1", RunID: "r1", UserID: "alice", Rating: []byte(`-1`)})
	if err != nil || again.ID != "fb_old" {
		t.Errorf("PutFeedback after the upgrade = %+v, %v; want fb_old replaced", again, err)
	}
	if names := strings.Join(appliedMigrations(t, db.writer), "\n"); !strings.Contains(names, "0005_deerflow_rows.sql") {
		t.Errorf("schema_migrations:\n%s", names)
	}
}
