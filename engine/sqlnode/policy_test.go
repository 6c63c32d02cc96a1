package sqlnode_test

import (
	"strings"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/engine/sqlnode"
)

func TestCheckStatement(t *testing.T) {
	t.Parallel()
	const both, lite, pg = 0, 1, 2
	tests := []struct {
		sql     string
		dialect int
		rule    string // "" = allowed
	}{
		{"SELECT 1", both, ""},
		{"select * from t;", both, ""},
		{"  -- a comment\nSELECT 1 -- another", both, ""},
		{"WITH x AS (SELECT 1) SELECT * FROM x", both, ""},
		{"(SELECT 1)", both, ""},
		{"VALUES (1), (2)", both, ""},
		{"TABLE t", pg, ""},
		{"SELECT 'DELETE FROM t; DROP TABLE t'", both, ""},
		{"SELECT 'it''s; DROP TABLE t'", both, ""},
		{`SELECT "delete", "a""b;" FROM t`, both, ""},
		{"SELECT replace(a, 'x', 'y') FROM t WHERE b = ?", both, ""},
		{"SELECT 1 /* ; DROP TABLE t */", both, ""},
		{"SELECT * FROM t WHERE a = $1 AND b::text = $2", pg, ""},
		{"SELECT $$; DELETE FROM t$$, $tag$ ; DROP $tag$", pg, ""},
		{`SELECT E'it\'s; DELETE FROM t'`, pg, ""},
		{"SELECT [update], `delete` FROM t WHERE a = :a OR b = @b", lite, ""},
		{"SELECT * FROM pragma_table_info('t')", lite, ""},
		{"/* a /* nested */ comment */ SELECT 1", pg, ""},

		{"SELECT 1; SELECT 2", both, sqlnode.ReasonMultipleStatements},
		{"SELECT 1;;DELETE FROM t", both, sqlnode.ReasonMultipleStatements},
		{"SELECT 'a'; DROP TABLE t -- '", both, sqlnode.ReasonMultipleStatements},
		// SQLite ends a block comment at its first */: the DELETE is code.
		{"SELECT 1 /* /* */ ; DELETE FROM t", lite, sqlnode.ReasonMultipleStatements},
		// Backslashes escape nothing in a SQLite string.
		{`SELECT E'\'; DELETE FROM t; --'`, lite, sqlnode.ReasonMultipleStatements},

		{"DELETE FROM t", both, sqlnode.ReasonReadOnly},
		{"insert into t values (1)", both, sqlnode.ReasonReadOnly},
		{"UPDATE t SET a = 1", both, sqlnode.ReasonReadOnly},
		{"CREATE TABLE x (a int)", both, sqlnode.ReasonReadOnly},
		{"drop table t", both, sqlnode.ReasonReadOnly},
		{"ALTER TABLE t ADD b int", both, sqlnode.ReasonReadOnly},
		{"TRUNCATE t", pg, sqlnode.ReasonReadOnly},
		{"REPLACE INTO t VALUES (1)", lite, sqlnode.ReasonReadOnly},
		{"WITH x AS (DELETE FROM t RETURNING *) SELECT * FROM x", both, sqlnode.ReasonReadOnly},
		{"WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x", both, sqlnode.ReasonReadOnly},
		{"SELECT * INTO t2 FROM t", pg, sqlnode.ReasonReadOnly},
		{"SELECT * FROM t FOR UPDATE", pg, sqlnode.ReasonReadOnly},
		{"(DELETE FROM t)", both, sqlnode.ReasonReadOnly},

		{"PRAGMA writable_schema = 1", lite, sqlnode.ReasonForbiddenStatement},
		{"ATTACH DATABASE '/tmp/x.db' AS x", lite, sqlnode.ReasonForbiddenStatement},
		{"DETACH x", lite, sqlnode.ReasonForbiddenStatement},
		{"COPY t TO '/tmp/x'", pg, sqlnode.ReasonForbiddenStatement},
		{"VACUUM", both, sqlnode.ReasonForbiddenStatement},
		{"SET search_path = evil", pg, sqlnode.ReasonForbiddenStatement},
		{"LOAD 'plugin'", pg, sqlnode.ReasonForbiddenStatement},
		{"EXPLAIN ANALYZE DELETE FROM t", pg, sqlnode.ReasonForbiddenStatement},
		{"BEGIN", both, sqlnode.ReasonForbiddenStatement},
		{"SELECT load_extension('x')", lite, sqlnode.RuleForbiddenFunction},
		{"SELECT pg_read_file('/etc/passwd')", pg, sqlnode.RuleForbiddenFunction},
		{`SELECT "pg_read_file"('/etc/passwd')`, pg, sqlnode.RuleForbiddenFunction},
		{"SELECT * FROM pg_catalog.pg_ls_dir('.')", pg, sqlnode.RuleForbiddenFunction},
		{"SELECT nextval('s')", pg, sqlnode.RuleForbiddenFunction},
		{"SELECT query_to_xml('delete from t', true, true, '')", pg, sqlnode.RuleForbiddenFunction},
		{"SELECT dblink_exec('x', 'drop table t')", pg, sqlnode.RuleForbiddenFunction},
		{"1", both, sqlnode.ReasonForbiddenStatement},

		{"SELECT 'unterminated", both, sqlnode.ReasonMalformedStatement},
		{"SELECT /* open", both, sqlnode.ReasonMalformedStatement},
		{`SELECT "open`, both, sqlnode.ReasonMalformedStatement},
		{"SELECT $a$ open", pg, sqlnode.ReasonMalformedStatement},
		// PostgreSQL nests block comments: this one never closes.
		{"SELECT 1 /* /* */ ; DELETE FROM t", pg, sqlnode.ReasonMalformedStatement},

		{"", both, sqlnode.ReasonEmptyStatement},
		{" -- only a comment\n", both, sqlnode.ReasonEmptyStatement},
		{";", both, sqlnode.ReasonEmptyStatement},
	}
	for _, tc := range tests {
		for _, d := range []sqlnode.Dialect{sqlnode.SQLite, sqlnode.Postgres} {
			if (tc.dialect == lite && d != sqlnode.SQLite) || (tc.dialect == pg && d != sqlnode.Postgres) {
				continue
			}
			err := sqlnode.CheckStatement(tc.sql, d)
			switch {
			case tc.rule == "" && err != nil:
				t.Errorf("%s %q: denied (%v), want allowed", d, tc.sql, err)
			case tc.rule != "" && err == nil:
				t.Errorf("%s %q: allowed, want %s", d, tc.sql, tc.rule)
			case tc.rule != "" && (err.Code != runstream.CodeWorkflowSQLPolicyDenied || cause(err.Details) != tc.rule):
				t.Errorf("%s %q: %v (details %v), want %s", d, tc.sql, err, err.Details, tc.rule)
			}
		}
	}
}

func TestParseSpec(t *testing.T) {
	t.Parallel()
	good := map[string]sqlnode.Spec{
		"shop=sqlite:./data/shop.db":                    {Name: "shop", Dialect: sqlnode.SQLite, Location: "./data/shop.db"},
		"wh=postgres://u:pw@db:5432/wh?sslmode=disable": {Name: "wh", Dialect: sqlnode.Postgres, Location: "postgres://u:pw@db:5432/wh?sslmode=disable"},
		"wh_2=postgresql://u@db/wh":                     {Name: "wh_2", Dialect: sqlnode.Postgres, Location: "postgresql://u@db/wh"},
	}
	for in, want := range good {
		got, err := sqlnode.ParseSpec(in)
		if err != nil || got != want {
			t.Errorf("ParseSpec(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"shop", "Shop=sqlite:x", "shop=sqlite:", "shop=mysql://x", "=sqlite:x", "wh=postgres://u:s3cret@db:bad port/x"} {
		_, err := sqlnode.ParseSpec(in)
		if err == nil {
			t.Errorf("ParseSpec(%q) succeeded", in)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseSpec(%q) error shows the password: %v", in, err)
		}
	}
}

// cause returns what a policy error names: details.reason under the rule
// single_read_statement, else details.rule.
func cause(details map[string]any) any {
	if details["rule"] == sqlnode.RuleSingleReadStatement {
		return details["reason"]
	}
	return details["rule"]
}
