// Package sqlnode is the sql node type and the sql_query tool of the
// workflow engine: one read-only statement against a database the server
// names (SQLite or PostgreSQL), checked by a policy before it runs, in a
// read-only transaction with a statement timeout and a row cap.
//
// A definition names a database; the server maps names to locations
// (runstream serve --sql-database NAME=sqlite:PATH or NAME=postgres://…),
// so a definition never holds a path, a URL or a password.
package sqlnode

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Limits of a query.
const (
	DefaultMaxRows   = 1000
	MaxMaxRows       = 10000
	DefaultTimeout   = 10 * time.Second
	MaxTimeout       = 5 * time.Minute
	maxParams        = 100
	maxStatementSize = 64 << 10
	// MaxOutputBytes bounds the values of a result, counted while the
	// rows are read: a query past it fails with
	// WORKFLOW_NODE_LIMIT_EXCEEDED (details.limit "sql_output_bytes").
	MaxOutputBytes = 4 << 20
	// maxMessageBytes bounds one message from PostgreSQL (a row) and one
	// SQLite string or blob, so that no single value past the output
	// bound is read into memory.
	maxMessageBytes = MaxOutputBytes + 64<<10
)

// LimitOutputBytes is details.limit of a query whose result exceeds
// MaxOutputBytes.
const LimitOutputBytes = "sql_output_bytes"

// errOutputTooLarge is returned by database.query past MaxOutputBytes.
var errOutputTooLarge = errors.New("the result exceeds its size bound")

// Result is the output of a query: the columns, the rows (objects by
// column name; a later column shadows an earlier one of the same name),
// and whether the row cap cut the rows short.
type Result struct {
	Columns   []string         `json:"columns"`
	Rows      []map[string]any `json:"rows"`
	RowCount  int              `json:"rowCount"`
	Truncated bool             `json:"truncated"`
}

// query is a statement ready to run.
type query struct {
	database  string
	statement string
	maxRows   int
	timeout   time.Duration
}

// run checks the statement against the policy and looks the database
// up, then runs the statement with args in a read-only transaction. Policy errors are WORKFLOW_SQL_POLICY_DENIED
// (not retryable); a statement that outlives the timeout is
// WORKFLOW_NODE_TIMEOUT; any other failure is WORKFLOW_NODE_FAILED with
// the database's message, never its location.
func (q query) run(ctx context.Context, dbs *Databases, args []any) (Result, error) {
	db, err := dbs.lookup(q.database)
	if err != nil {
		// Without a dialect, a statement both dialects deny for one
		// reason is denied for it: the policy does not depend on the
		// server's configuration.
		lite, pg := CheckStatement(q.statement, SQLite), CheckStatement(q.statement, Postgres)
		if lite != nil && pg != nil && lite.Details["rule"] == pg.Details["rule"] {
			return Result{}, lite
		}
		return Result{}, err
	}
	if perr := CheckStatement(q.statement, db.dialect); perr != nil {
		return Result{}, perr
	}
	qctx, cancel := context.WithTimeout(ctx, q.timeout)
	defer cancel()
	res, err := db.query(qctx, q.statement, args, q.maxRows, q.timeout)
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, context.Cause(ctx)
		}
		return Result{}, q.failure(db, err, qctx.Err() != nil)
	}
	return res, nil
}

// failure words a failed query for the caller.
func (q query) failure(db *database, err error, timedOut bool) error {
	var pgErr *pgconn.PgError
	var liteErr *sqlite.Error
	var bodyErr *pgproto3.ExceededMaxBodyLenErr
	switch {
	case errors.Is(err, errOutputTooLarge), errors.As(err, &bodyErr), errors.As(err, &liteErr) && liteErr.Code()&0xff == sqlite3.SQLITE_TOOBIG:
		return runstream.Errorf(runstream.CodeWorkflowNodeLimitExceeded, "the result of the statement on %s exceeds %d bytes", db.name, MaxOutputBytes).
			WithDetail("limit", LimitOutputBytes)
	case timedOut || (errors.As(err, &pgErr) && pgErr.Code == "57014"):
		return runstream.Errorf(runstream.CodeWorkflowNodeTimeout, "the statement on %s did not finish within %d ms", db.name, q.timeout.Milliseconds())
	case errors.As(err, &pgErr) && pgErr.Code == "25006", errors.As(err, &liteErr) && liteErr.Code()&0xff == 8:
		// The read-only transaction (PostgreSQL) or connection (SQLite
		// SQLITE_READONLY) refused a write the policy did not see.
		return deny(ReasonReadOnly, "the database refused a write: only reads are allowed")
	case errors.As(err, &pgErr):
		return runstream.Wrap(err, runstream.CodeWorkflowNodeFailed, "the statement on %s failed: %s (SQLSTATE %s)", db.name, shortMessage(pgErr.Message), pgErr.Code)
	case errors.As(err, &liteErr):
		return runstream.Wrap(err, runstream.CodeWorkflowNodeFailed, "the statement on %s failed: %s", db.name, shortMessage(liteErr.Error()))
	}
	return runstream.Wrap(err, runstream.CodeWorkflowNodeFailed, "the statement on %s failed (the database could not be reached or answered unexpectedly)", db.name)
}

func shortMessage(s string) string {
	if utf8.RuneCountInString(s) > 300 {
		return string([]rune(s)[:300]) + "…"
	}
	return s
}

// query runs one statement in a read-only transaction, under a
// statement timeout (PostgreSQL's statement_timeout; on SQLite ctx's
// deadline interrupts it), reading at most maxRows rows and failing with
// errOutputTooLarge as soon as the values read exceed MaxOutputBytes.
func (db *database) query(ctx context.Context, statement string, args []any, maxRows int, timeout time.Duration) (Result, error) {
	conn, err := db.db.Conn(ctx)
	if err != nil {
		return Result{}, err
	}
	defer conn.Close()
	if db.dialect == SQLite {
		if _, err := sqlite.Limit(conn, sqlite3.SQLITE_LIMIT_LENGTH, maxMessageBytes); err != nil {
			return Result{}, err
		}
	}
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return Result{}, err
	}
	defer tx.Rollback()
	if db.dialect == Postgres {
		// SET LOCAL takes no parameters; the value is an integer. The
		// policy reads strings as standard_conforming_strings does.
		for _, set := range []string{
			fmt.Sprintf("SET LOCAL statement_timeout = %d", timeout.Milliseconds()),
			"SET LOCAL standard_conforming_strings = on",
		} {
			if _, err := tx.ExecContext(ctx, set); err != nil {
				return Result{}, err
			}
		}
	}
	rows, err := tx.QueryContext(ctx, statement, args...)
	if err != nil {
		return Result{}, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return Result{}, err
	}
	res := Result{Columns: cols, Rows: []map[string]any{}}
	size := 0
	values := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range values {
		ptrs[i] = &values[i]
	}
	for rows.Next() {
		if len(res.Rows) == maxRows {
			res.Truncated = true
			break
		}
		if err := rows.Scan(ptrs...); err != nil {
			return Result{}, err
		}
		row := make(map[string]any, len(cols))
		for i, c := range cols {
			row[c] = jsonValue(values[i])
			values[i] = nil
			if size += len(c) + approxSize(row[c]); size > MaxOutputBytes {
				return Result{}, errOutputTooLarge
			}
		}
		res.Rows = append(res.Rows, row)
	}
	if err := rows.Err(); err != nil {
		return Result{}, err
	}
	res.RowCount = len(res.Rows)
	return res, nil
}

// jsonValue converts a scanned value to one JSON can hold: text for
// bytes (base64 when not UTF-8), RFC 3339 for times, strings for
// non-finite floats and other types.
func jsonValue(v any) any {
	switch v := v.(type) {
	case nil, bool, int64, string:
		return v
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Sprint(v)
		}
		return v
	case []byte:
		if utf8.Valid(v) {
			return string(v)
		}
		return base64.StdEncoding.EncodeToString(v)
	case time.Time:
		return v.Format(time.RFC3339Nano)
	}
	return fmt.Sprint(v)
}

func approxSize(v any) int {
	if s, ok := v.(string); ok {
		return len(s)
	}
	return 8
}

// sqlArgs converts rendered parameters (a JSON array) to query arguments:
// numbers with no fraction become int64, objects and arrays their JSON.
func sqlArgs(raw json.RawMessage) ([]any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var params []json.RawMessage
	if err := json.Unmarshal(raw, &params); err != nil {
		return nil, errors.New("params must be an array")
	}
	if len(params) > maxParams {
		return nil, fmt.Errorf("at most %d params are allowed", maxParams)
	}
	args := make([]any, len(params))
	for i, p := range params {
		var v any
		dec := json.NewDecoder(strings.NewReader(string(p)))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("params[%d] is not valid JSON", i)
		}
		switch x := v.(type) {
		case json.Number:
			if n, err := x.Int64(); err == nil {
				args[i] = n
			} else if f, err := x.Float64(); err == nil {
				args[i] = f
			} else {
				args[i] = x.String()
			}
		case map[string]any, []any:
			args[i] = string(p)
		default:
			args[i] = x
		}
	}
	return args, nil
}

// config is the config of a sql node.
type config struct {
	Database string `json:"database"`
	Query    string `json:"query"`
	// Params are the statement's placeholders' values ($1… on
	// PostgreSQL, ? or $1… on SQLite), a JSON template over input and
	// nodes.<id>.output: values never become SQL text.
	Params    json.RawMessage `json:"params"`
	MaxRows   int             `json:"maxRows"`
	TimeoutMs int64           `json:"timeoutMs"`
}

// NodeType returns the sql node type over dbs (nil: no database): config
// {"database", "query", "params"?, "maxRows"? (1000, at most 10000),
// "timeoutMs"? (10 s, at most 5 min)}. Its output is a Result. The
// statement is checked (CheckStatement) and the database looked up when
// the node runs, so a denied statement fails the node with
// WORKFLOW_SQL_POLICY_DENIED, not the publication.
func NodeType(dbs *Databases) engine.NodeType {
	return engine.NodeType{Name: "sql", Repeatable: engine.AlwaysRepeatable, Compile: func(raw json.RawMessage) (engine.NodeFunc, error) {
		var c config
		if err := engine.DecodeConfig(raw, &c); err != nil {
			return nil, err
		}
		q, err := compileQuery(c.Database, c.Query, c.MaxRows, c.TimeoutMs)
		if err != nil {
			return nil, err
		}
		params, err := engine.CompileJSONTemplate(c.Params)
		if err != nil {
			return nil, fmt.Errorf("params: %w", err)
		}
		return func(ctx context.Context, n *engine.NodeRun) (json.RawMessage, error) {
			env, err := n.Env()
			if err != nil {
				return nil, err
			}
			rendered, err := params.RenderContext(ctx, env)
			if err != nil {
				return nil, engine.RenderError("params", err)
			}
			args, err := sqlArgs(rendered)
			if err != nil {
				return nil, runstream.Errorf(runstream.CodeWorkflowNodeFailed, "params: %s", err.Error())
			}
			res, err := q.run(ctx, dbs, args)
			if err != nil {
				return nil, err
			}
			return json.Marshal(res)
		}, nil
	}}
}

func compileQuery(database, statement string, maxRows int, timeoutMs int64) (query, error) {
	q := query{database: database, statement: statement, maxRows: DefaultMaxRows, timeout: DefaultTimeout}
	switch {
	case database == "":
		return q, errors.New("database is required: the name of a database configured on the server")
	case !namePattern.MatchString(database):
		// Refused when published, so that a connection string written
		// here (with its password) is never stored with the definition.
		return q, fmt.Errorf("database must be the name of a database configured on the server (%s), not a connection string", namePattern)
	case strings.TrimSpace(statement) == "":
		return q, errors.New("query is required")
	case len(statement) > maxStatementSize:
		return q, fmt.Errorf("query must have at most %d bytes", maxStatementSize)
	case maxRows < 0 || maxRows > MaxMaxRows:
		return q, fmt.Errorf("maxRows must be 0 (default %d) to %d", DefaultMaxRows, MaxMaxRows)
	case timeoutMs < 0 || time.Duration(timeoutMs)*time.Millisecond > MaxTimeout:
		return q, fmt.Errorf("timeoutMs must be 0 (default %d) to %d", DefaultTimeout.Milliseconds(), MaxTimeout.Milliseconds())
	}
	if maxRows > 0 {
		q.maxRows = maxRows
	}
	if timeoutMs > 0 {
		q.timeout = time.Duration(timeoutMs) * time.Millisecond
	}
	return q, nil
}

// QueryTool returns the sql_query tool over dbs: input {"database",
// "query", "params"?}, run under the sql node's policy and default
// limits; its output is a Result.
func QueryTool(dbs *Databases) engine.Tool {
	database := `{"type":"string","description":"The database name."}`
	if names := dbs.Names(); len(names) > 0 {
		enum, _ := json.Marshal(names)
		database = `{"type":"string","description":"The database name.","enum":` + string(enum) + `}`
	}
	return engine.Tool{
		Name:        "sql_query",
		Description: "Run one read-only SQL query (SELECT, WITH, VALUES) on a named database and return its rows.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"database":` + database + `,` +
			`"query":{"type":"string","description":"One read-only SQL statement."},` +
			`"params":{"type":"array","description":"Values of the statement's placeholders."}},` +
			`"required":["database","query"],"additionalProperties":false}`),
		Call: func(ctx context.Context, input json.RawMessage) (json.RawMessage, error) {
			var in struct {
				Database string          `json:"database"`
				Query    string          `json:"query"`
				Params   json.RawMessage `json:"params"`
			}
			if err := engine.DecodeConfig(input, &in); err != nil {
				return nil, runstream.Errorf(runstream.CodeInvalidArgument, "sql_query input: %s", err.Error())
			}
			q, err := compileQuery(in.Database, in.Query, 0, 0)
			if err != nil {
				return nil, runstream.Errorf(runstream.CodeInvalidArgument, "sql_query input: %s", err.Error())
			}
			args, err := sqlArgs(in.Params)
			if err != nil {
				return nil, runstream.Errorf(runstream.CodeInvalidArgument, "sql_query input: %s", err.Error())
			}
			res, err := q.run(ctx, dbs, args)
			if err != nil {
				return nil, err
			}
			return json.Marshal(res)
		},
	}
}
