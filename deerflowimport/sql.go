package deerflowimport

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	_ "modernc.org/sqlite"             // the "sqlite" database/sql driver

	"github.com/runstream/runstream/redact"
	"github.com/runstream/runstream/runevents"
)

// sqlSource reads DeerFlow's SQL database (SQLite or PostgreSQL): the
// tables run_events, runs and feedback, whichever exist. Every column is
// read as text (CAST … AS TEXT), so that both dialects read alike.
type sqlSource struct {
	name string
	db   *sql.DB
	ctx  context.Context
	// columns of each table present, by table name.
	columns map[string]map[string]bool
}

// OpenSQL opens DeerFlow's database read-only: a postgres:// or
// postgresql:// URL (a search_path parameter selects the schema), or the
// path of a SQLite file, optionally written sqlite:PATH. It fails when
// none of run_events, runs and feedback exists.
func OpenSQL(ctx context.Context, dsn string) (Source, error) {
	s := &sqlSource{ctx: ctx, columns: map[string]map[string]bool{}}
	var err error
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		s.name = "PostgreSQL database " + redactURL(dsn)
		s.db, err = sql.Open("pgx", dsn)
	default:
		path := strings.TrimPrefix(dsn, "sqlite:")
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("SQLite database %s: %w", path, err)
		}
		s.name = "SQLite database " + path
		s.db, err = sql.Open("sqlite", "file:"+path+"?mode=ro")
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	for _, table := range []string{"run_events", "runs", "feedback"} {
		cols, err := s.tableColumns(table)
		if err != nil {
			s.db.Close()
			return nil, err
		}
		if cols != nil {
			s.columns[table] = cols
		}
	}
	if len(s.columns) == 0 {
		s.db.Close()
		return nil, fmt.Errorf("%s: no run_events, runs or feedback table: not a DeerFlow database", s.name)
	}
	return s, nil
}

// tableColumns returns the columns of table, nil when it does not exist.
func (s *sqlSource) tableColumns(table string) (map[string]bool, error) {
	var exists bool
	q := `SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '` + table + `')`
	if strings.HasPrefix(s.name, "PostgreSQL") {
		q = `SELECT to_regclass('` + table + `') IS NOT NULL`
	}
	if err := s.db.QueryRowContext(s.ctx, q).Scan(&exists); err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	if !exists {
		return nil, nil
	}
	rows, err := s.db.QueryContext(s.ctx, `SELECT * FROM `+table+` LIMIT 0`)
	if err != nil {
		return nil, fmt.Errorf("%s: read table %s: %w", s.name, table, err)
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		return nil, fmt.Errorf("%s: read table %s: %w", s.name, table, err)
	}
	cols := map[string]bool{}
	for _, n := range names {
		cols[strings.ToLower(n)] = true
	}
	return cols, nil
}

func (s *sqlSource) Name() string { return s.name }

func (s *sqlSource) Close() error { return s.db.Close() }

// query selects want of table as text (NULL for a column the table lacks)
// in the given order and calls fn with each row, by column name.
func (s *sqlSource) query(table string, want []string, order string, fn func(map[string]sql.NullString) error) error {
	cols := s.columns[table]
	if cols == nil {
		return nil
	}
	exprs := make([]string, len(want))
	for i, c := range want {
		exprs[i] = "NULL"
		if cols[c] {
			exprs[i] = "CAST(" + c + " AS TEXT)"
		}
	}
	rows, err := s.db.QueryContext(s.ctx, "SELECT "+strings.Join(exprs, ", ")+" FROM "+table+" ORDER BY "+order)
	if err != nil {
		return fmt.Errorf("%s: read %s: %w", s.name, table, err)
	}
	defer rows.Close()
	vals := make([]sql.NullString, len(want))
	ptrs := make([]any, len(want))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return fmt.Errorf("%s: read %s: %w", s.name, table, err)
		}
		row := make(map[string]sql.NullString, len(want))
		for i, c := range want {
			row[c] = vals[i]
		}
		if err := fn(row); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: read %s: %w", s.name, table, err)
	}
	return nil
}

var eventColumns = []string{"id", "thread_id", "run_id", "user_id", "event_type", "category", "content", "event_metadata", "seq", "created_at"}

// Threads reads run_events by thread and seq, one thread at a time.
func (s *sqlSource) Threads(fn func(string, []Row, []Problem) error) error {
	var (
		thread string
		rows   []Row
		bad    []Problem
	)
	report := func(p Problem) { bad = append(bad, p) }
	flush := func() error {
		if len(rows) == 0 && len(bad) == 0 {
			return nil
		}
		r := dedupSeqs(rows, report)
		b := bad
		rows, bad = nil, nil
		return fn(thread, r, b)
	}
	err := s.query("run_events", eventColumns, "thread_id, seq, id", func(c map[string]sql.NullString) error {
		loc := "run_events id=" + c["id"].String
		if c["thread_id"].String != thread {
			if err := flush(); err != nil {
				return err
			}
			thread = c["thread_id"].String
		}
		row, err := sqlEvent(c)
		if err != nil {
			report(Problem{loc, err})
			return nil
		}
		row.Loc = loc
		rows = append(rows, row)
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

// sqlEvent converts a run_events row.
func sqlEvent(c map[string]sql.NullString) (Row, error) {
	seq, err := strconv.ParseInt(c["seq"].String, 10, 64)
	if err != nil || seq < 1 {
		return Row{}, fmt.Errorf("seq %s is not a positive integer", redact.Quote(c["seq"].String))
	}
	created, err := parseTime(c["created_at"].String)
	if err != nil {
		return Row{}, err
	}
	content, metadata, err := sqlContent(c["content"].String, c["event_metadata"].String)
	if err != nil {
		return Row{}, err
	}
	return Row{
		Owned: c["user_id"].Valid,
		Event: runevents.ImportEvent{Seq: seq, NewEvent: runevents.NewEvent{
			ThreadID: c["thread_id"].String, RunID: c["run_id"].String, UserID: c["user_id"].String,
			EventType: runevents.EventType(c["event_type"].String), Category: runevents.Category(c["category"].String),
			Content: content, Metadata: metadata, CreatedAt: created,
		}},
	}, nil
}

var runColumns = []string{"run_id", "thread_id", "user_id", "status", "model_name", "operation_kind", "metadata_json",
	"assistant_id", "multitask_strategy", "kwargs_json", "stop_reason", "message_count",
	"total_input_tokens", "total_output_tokens", "total_tokens", "llm_call_count",
	"lead_agent_tokens", "subagent_tokens", "middleware_tokens", "token_usage_by_model",
	"created_at", "updated_at",
	"error", "first_human_message", "last_ai_message", "follow_up_to_run_id", "failure_category", "failed_layer"}

// metadataColumns are the run columns kept in the run row's metadata.
var metadataColumns = []string{"error", "first_human_message", "last_ai_message", "follow_up_to_run_id", "failure_category", "failed_layer"}

// Runs reads the runs table by creation.
func (s *sqlSource) Runs(report func(Problem)) ([]Run, error) {
	var out []Run
	err := s.query("runs", runColumns, "created_at, run_id", func(c map[string]sql.NullString) error {
		loc := "runs run_id=" + c["run_id"].String
		r, err := sqlRun(c)
		if err != nil {
			report(Problem{loc, err})
			return nil
		}
		out = append(out, Run{Loc: loc, Row: r})
		return nil
	})
	return out, err
}

// statuses maps DeerFlow's run statuses to runstream's.
var statuses = map[string]runevents.RunStatus{
	"pending": runevents.RunPending, "running": runevents.RunRunning, "success": runevents.RunSuccess,
	"error": runevents.RunError, "interrupted": runevents.RunInterrupted, "timeout": runevents.RunTimeout,
	"failed": runevents.RunError, "cancelled": runevents.RunInterrupted,
}

// sqlRun converts a runs row.
func sqlRun(c map[string]sql.NullString) (runevents.ThreadRun, error) {
	r := runevents.ThreadRun{ThreadID: c["thread_id"].String, RunID: c["run_id"].String, OwnerID: c["user_id"].String,
		ModelName: c["model_name"].String, OperationKind: c["operation_kind"].String,
		AssistantID: c["assistant_id"].String, MultitaskStrategy: c["multitask_strategy"].String, StopReason: c["stop_reason"].String}
	status, ok := statuses[c["status"].String]
	if !ok {
		return r, fmt.Errorf("status %s is not a run status", redact.Quote(c["status"].String))
	}
	r.Status = status
	meta := map[string]any{}
	if m := c["metadata_json"]; m.Valid && strings.TrimSpace(m.String) != "null" {
		if err := json.Unmarshal([]byte(m.String), &meta); err != nil || meta == nil {
			return r, errors.New("metadata_json is not a JSON object")
		}
	}
	if r.OperationKind == "" {
		r.OperationKind, _ = meta["operation_kind"].(string)
	}
	for _, col := range metadataColumns {
		if v := c[col]; v.Valid && meta[col] == nil {
			meta[col] = v.String
		}
	}
	var err error
	if r.Metadata, err = json.Marshal(meta); err != nil {
		return r, err
	}
	if k := c["kwargs_json"]; k.Valid && strings.TrimSpace(k.String) != "null" {
		r.Kwargs = json.RawMessage(k.String)
	}
	ints := []struct {
		col string
		dst *int64
	}{
		{"message_count", &r.MessageCount}, {"total_input_tokens", &r.Usage.TotalInputTokens},
		{"total_output_tokens", &r.Usage.TotalOutputTokens}, {"total_tokens", &r.Usage.TotalTokens},
		{"llm_call_count", &r.Usage.LLMCallCount}, {"lead_agent_tokens", &r.Usage.LeadAgentTokens},
		{"subagent_tokens", &r.Usage.SubagentTokens}, {"middleware_tokens", &r.Usage.MiddlewareTokens},
	}
	for _, f := range ints {
		if v := c[f.col]; v.Valid {
			if *f.dst, err = strconv.ParseInt(v.String, 10, 64); err != nil {
				return r, fmt.Errorf("%s %s is not an integer", f.col, redact.Quote(v.String))
			}
		}
	}
	if m := c["token_usage_by_model"]; m.Valid && strings.TrimSpace(m.String) != "null" {
		if err := json.Unmarshal([]byte(m.String), &r.Usage.ByModel); err != nil {
			return r, errors.New("token_usage_by_model is not an object of model usages")
		}
	}
	for _, f := range []struct {
		col string
		dst *time.Time
	}{{"created_at", &r.CreatedAt}, {"updated_at", &r.UpdatedAt}} {
		if v := c[f.col]; v.Valid {
			if *f.dst, err = parseTime(v.String); err != nil {
				return r, fmt.Errorf("%s: %w", f.col, err)
			}
		}
	}
	return r, nil
}

var feedbackColumns = []string{"feedback_id", "run_id", "thread_id", "user_id", "message_id", "rating", "comment", "tags", "created_at"}

// Feedback reads the feedback table by creation.
func (s *sqlSource) Feedback(report func(Problem)) ([]Feedback, error) {
	var out []Feedback
	err := s.query("feedback", feedbackColumns, "created_at, feedback_id", func(c map[string]sql.NullString) error {
		loc := "feedback feedback_id=" + c["feedback_id"].String
		f := runevents.Feedback{ID: c["feedback_id"].String, ThreadID: c["thread_id"].String, RunID: c["run_id"].String,
			UserID: c["user_id"].String, MessageID: c["message_id"].String, Rating: json.RawMessage(c["rating"].String), Comment: c["comment"].String}
		if t := c["tags"]; t.Valid && strings.TrimSpace(t.String) != "null" {
			if err := json.Unmarshal([]byte(t.String), &f.Tags); err != nil {
				report(Problem{loc, errors.New("tags is not a list of strings")})
				return nil
			}
		}
		if v := c["created_at"]; v.Valid {
			t, err := parseTime(v.String)
			if err != nil {
				report(Problem{loc, err})
				return nil
			}
			f.CreatedAt, f.UpdatedAt = t, t
		}
		out = append(out, Feedback{Loc: loc, Row: f})
		return nil
	})
	return out, err
}

// redactURL hides the password of a database URL.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(a database URL)"
	}
	return u.Redacted()
}
