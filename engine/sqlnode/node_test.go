package sqlnode_test

import (
	"cmp"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/engine/enginetest"
	"github.com/runstream/runstream/engine/sqlnode"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/workflow"
)

// newShopDB creates a SQLite file with a table of three products.
func newShopDB(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shop.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, stmt := range []string{
		"CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT, price REAL, data BLOB)",
		"INSERT INTO products VALUES (1, 'apple', 0.5, NULL), (2, 'pear', 0.75, x'00ff'), (3, 'plum', 1.25, 'text')",
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func openDBs(t *testing.T, specs ...string) *sqlnode.Databases {
	t.Helper()
	var parsed []sqlnode.Spec
	for _, s := range specs {
		p, err := sqlnode.ParseSpec(s)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, p)
	}
	dbs, err := sqlnode.Open(parsed...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dbs.Close() })
	return dbs
}

// runFlow runs a definition on an engine whose registry has the sql node
// type over dbs, and returns the run and its events once it ended.
func runFlow(t *testing.T, dbs *sqlnode.Databases, def, input string) (workflow.Run, []workflow.Envelope) {
	t.Helper()
	reg, err := engine.NewRegistry(append(engine.Builtins(), sqlnode.NodeType(dbs))...)
	if err != nil {
		t.Fatal(err)
	}
	store := memory.NewWorkflowStore()
	t.Cleanup(func() { store.Close() })
	return enginetest.Start(t, store, reg, nil).Run(t, def, input)
}

var sequence = enginetest.Sequence

func sqlDef(config string) string {
	return `{"name":"q","nodes":[{"id":"q","type":"sql","retry":{"maxAttempts":3,"backoffMs":1},"config":` + config + `}],"output":"q"}`
}

func TestSQLNodeQuery(t *testing.T) {
	t.Parallel()
	dbs := openDBs(t, "shop=sqlite:"+newShopDB(t))
	run, events := runFlow(t, dbs, sqlDef(`{"database":"shop","query":"SELECT id, name, price, data FROM products WHERE price < ? ORDER BY id","params":["{{ input.max }}"]}`), `{"max":1}`)
	if want := []string{"run.created", "run.queued", "run.started", "node.queued:q", "node.started:q", "node.completed:q", "run.completed"}; !slices.Equal(sequence(events), want) {
		t.Fatalf("events %v", sequence(events))
	}
	var res sqlnode.Result
	if err := json.Unmarshal(run.Output, &res); err != nil {
		t.Fatal(err)
	}
	want := `{"columns":["id","name","price","data"],"rows":[{"data":null,"id":1,"name":"apple","price":0.5},{"data":"AP8=","id":2,"name":"pear","price":0.75}],"rowCount":2,"truncated":false}`
	if string(run.Output) != want {
		t.Errorf("output %s\nwant   %s", run.Output, want)
	}
	run, _ = runFlow(t, dbs, sqlDef(`{"database":"shop","query":"SELECT name FROM products ORDER BY id","maxRows":2}`), `{}`)
	if string(run.Output) != `{"columns":["name"],"rows":[{"name":"apple"},{"name":"pear"}],"rowCount":2,"truncated":true}` {
		t.Errorf("capped output %s", run.Output)
	}
}

// Denied statements fail the node before they run, with the rule and the
// node id, and are not retried whatever the node's retry policy.
func TestSQLNodePolicyDenied(t *testing.T) {
	t.Parallel()
	path := newShopDB(t)
	dbs := openDBs(t, "shop=sqlite:"+path)
	tests := []struct{ name, config, rule string }{
		{"Write", `{"database":"shop","query":"DELETE FROM products"}`, sqlnode.ReasonReadOnly},
		{"Multiple", `{"database":"shop","query":"SELECT 1; DELETE FROM products"}`, sqlnode.ReasonMultipleStatements},
		{"Pragma", `{"database":"shop","query":"PRAGMA query_only = 0"}`, sqlnode.ReasonForbiddenStatement},
		{"Attach", `{"database":"shop","query":"ATTACH DATABASE '/tmp/evil.db' AS evil"}`, sqlnode.ReasonForbiddenStatement},
		{"UnknownDatabase", `{"database":"nope","query":"SELECT 1"}`, sqlnode.RuleUnknownDatabase},
		{"WriteOnUnknownDatabase", `{"database":"nope","query":"DELETE FROM products"}`, sqlnode.ReasonReadOnly},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			run, events := runFlow(t, dbs, sqlDef(tc.config), `{}`)
			want := []string{"run.created", "run.queued", "run.started", "node.queued:q", "node.started:q", "node.failed:q", "run.failed"}
			if !slices.Equal(sequence(events), want) {
				t.Fatalf("events %v", sequence(events))
			}
			var failed struct {
				Error struct {
					Code      runstream.ErrorCode
					Retryable bool
					NodeID    string
					Details   struct{ Rule, Reason string }
				}
				WillRetry bool
			}
			json.Unmarshal(events[5].Data, &failed)
			e := failed.Error
			if e.Code != runstream.CodeWorkflowSQLPolicyDenied || e.Retryable || failed.WillRetry || e.NodeID != "q" || cmp.Or(e.Details.Reason, e.Details.Rule) != tc.rule {
				t.Errorf("node.failed %+v", failed)
			}
			if run.Status != workflow.StatusFailed {
				t.Errorf("run %s", run.Status)
			}
		})
	}
	t.Cleanup(func() {
		// Nothing was written: the three products are still there.
		db, _ := sql.Open("sqlite", "file:"+path+"?mode=ro")
		defer db.Close()
		var n int
		if err := db.QueryRow("SELECT count(*) FROM products").Scan(&n); err != nil || n != 3 {
			t.Errorf("products: %d (%v)", n, err)
		}
		if _, err := os.Stat("/tmp/evil.db"); err == nil {
			t.Errorf("ATTACH created /tmp/evil.db")
		}
	})
}

func TestSQLNodeStatementTimeout(t *testing.T) {
	t.Parallel()
	dbs := openDBs(t, "shop=sqlite:"+newShopDB(t))
	_, events := runFlow(t, dbs, `{"name":"q","nodes":[{"id":"q","type":"sql","config":{"database":"shop","timeoutMs":100,
		"query":"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"}}]}`, `{}`)
	last := events[len(events)-2]
	var failed struct {
		Error struct {
			Code    runstream.ErrorCode
			Message string
		}
	}
	json.Unmarshal(last.Data, &failed)
	if last.Event != workflow.EventNodeFailed || failed.Error.Code != runstream.CodeWorkflowNodeTimeout || !strings.Contains(failed.Error.Message, "100 ms") {
		t.Errorf("%s %s", last.Event, last.Data)
	}
}

func TestSQLNodeConfig(t *testing.T) {
	t.Parallel()
	reg, err := engine.NewRegistry(sqlnode.NodeType(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, config := range []string{
		`{"query":"SELECT 1"}`,
		`{"database":"shop"}`,
		`{"database":"shop","query":"SELECT 1","maxRows":100000}`,
		`{"database":"shop","query":"SELECT 1","timeoutMs":-1}`,
		`{"database":"shop","query":"SELECT 1","params":["{{ nope( }}"]}`,
		`{"database":"shop","query":"SELECT 1","url":"sqlite:/etc/passwd"}`,
		// A connection string is not a configured database's name: refused
		// when published, so its password is never stored.
		`{"database":"postgres://admin:hunter2@db.internal:5432/prod","query":"SELECT 1"}`,
		`{"database":"Shop","query":"SELECT 1"}`,
	} {
		_, err := reg.CompileJSON([]byte(`{"name":"q","nodes":[{"id":"q","type":"sql","config":` + config + `}]}`))
		if runstream.ErrorCodeOf(err) != runstream.CodeWorkflowDefinitionInvalid {
			t.Errorf("config %s: %v", config, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("config %s: the error echoes the password: %v", config, err)
		}
	}
}

func TestQueryTool(t *testing.T) {
	t.Parallel()
	dbs := openDBs(t, "shop=sqlite:"+newShopDB(t))
	tool := sqlnode.QueryTool(dbs)
	if !strings.Contains(string(tool.Parameters), `"enum":["shop"]`) || !json.Valid(tool.Parameters) {
		t.Errorf("parameters %s", tool.Parameters)
	}
	out, err := tool.Call(t.Context(), json.RawMessage(`{"database":"shop","query":"SELECT count(*) AS n FROM products WHERE price > ?","params":[0.6]}`))
	if err != nil || string(out) != `{"columns":["n"],"rows":[{"n":2}],"rowCount":1,"truncated":false}` {
		t.Errorf("call: %s, %v", out, err)
	}
	_, err = tool.Call(t.Context(), json.RawMessage(`{"database":"shop","query":"DROP TABLE products"}`))
	if re := runstream.AsError(err); re == nil || re.Code != runstream.CodeWorkflowSQLPolicyDenied || re.Details["reason"] != sqlnode.ReasonReadOnly {
		t.Errorf("denied call: %v", err)
	}
}
