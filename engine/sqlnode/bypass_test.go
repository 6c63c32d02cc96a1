package sqlnode

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream"
)

// bypass is one attempt to get a statement past the policy, and the rule
// it must be denied by.
type bypass struct {
	sql  string
	rule string
}

// postgresBypasses are attempts, on PostgreSQL, to call a function that
// reads files, signals sessions, changes settings, sleeps or opens
// connections, or to write, by spelling names the way PostgreSQL decodes
// them.
var postgresBypasses = []bypass{
	{`SELECT pg_read_file('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT U&"pg\005fread\005ffile"('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT u&"pg\005fread\005ffile"('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT U&"pg!005fread!005ffile" UESCAPE '!'('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT U&"pg!005fread!005ffile"   uescape  '!' ('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT U&"pg#005fread#005ffile" /* c */ UESCAPE /* c */ '#'('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT U&"\+000070\+000067_read_file"('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT U&"pg_ls_dir"('.')`, RuleForbiddenFunction},
	{`SELECT U&"pg\005fls\005fdir"('.')`, RuleForbiddenFunction},
	{`SELECT U&"pg\005fterminate\005fbackend"(pg_backend_pid())`, RuleForbiddenFunction},
	{`SELECT U&"set\005fconfig"('search_path', 'x', true)`, RuleForbiddenFunction},
	{`SELECT U&"pg\005freload\005fconf"()`, RuleForbiddenFunction},
	{`SELECT U&"pg!005freload!005fconf" UESCAPE '!'()`, RuleForbiddenFunction},
	{`SELECT U&"pg\005fsleep"(1)`, RuleForbiddenFunction},
	{`SELECT "pg_read_file"('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT "pg_""read_file"('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT pg_catalog.pg_read_file('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT "pg_catalog"."pg_read_file"('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT pg_catalog . pg_read_file ('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT pg_catalog/**/./**/pg_read_file/**/('/etc/hostname')`, RuleForbiddenFunction},
	{"SELECT pg_read_file -- c\n('/etc/hostname')", RuleForbiddenFunction},
	{`SELECT PG_READ_FILE('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT pg_read_binary_file('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT * FROM pg_ls_dir('.')`, RuleForbiddenFunction},
	{`SELECT * FROM ROWS FROM (pg_ls_dir('.'))`, RuleForbiddenFunction},
	{`SELECT * FROM LATERAL pg_ls_dir('.')`, RuleForbiddenFunction},
	{`SELECT pg_stat_file('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT pg_sleep(10)`, RuleForbiddenFunction},
	{`SELECT pg_sleep_for('10 seconds')`, RuleForbiddenFunction},
	{`SELECT pg_terminate_backend(pg_backend_pid())`, RuleForbiddenFunction},
	{`SELECT pg_cancel_backend(1)`, RuleForbiddenFunction},
	{`SELECT set_config('statement_timeout', '0', false)`, RuleForbiddenFunction},
	{`SELECT current_setting('data_directory')`, RuleForbiddenFunction},
	{`SELECT pg_reload_conf()`, RuleForbiddenFunction},
	{`SELECT pg_advisory_lock(1)`, RuleForbiddenFunction},
	{`SELECT nextval('s')`, RuleForbiddenFunction},
	{`SELECT lo_import('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT query_to_xml('select 1', true, true, '')`, RuleForbiddenFunction},
	{`SELECT dblink('dbname=x', 'select 1')`, RuleForbiddenFunction},
	{`SELECT public.pg_read_file('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT x.pg_catalog.pg_read_file('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT my_function(1)`, RuleForbiddenFunction},
	{`SELECT (pg_read_file('/etc/hostname'))`, RuleForbiddenFunction},
	{`SELECT length(pg_read_file('/etc/hostname'))`, RuleForbiddenFunction},
	{`SELECT $$x$$, pg_read_file('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT E'\'', pg_read_file('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT U&'\0027', pg_read_file('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT 1 /* /* nested */ */, pg_read_file('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT "U&""pg_read_file"""('x')`, RuleForbiddenFunction},
	{`SELECT U&"pg\005Fread\005Ffile"('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT U&"\d800"('x')`, ReasonMalformedStatement},
	{`SELECT U&"pg\zzzzread"('x')`, ReasonMalformedStatement},
	{`SELECT U&"x" UESCAPE 'ab'`, ReasonMalformedStatement},
	{`SELECT U&"x" UESCAPE '+'`, ReasonMalformedStatement},
	{`SELECT 1; SELECT pg_read_file('/etc/hostname')`, ReasonMultipleStatements},
	{`SELECT $a$ ; $a$; DELETE FROM t`, ReasonMultipleStatements},
	{`WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d`, ReasonReadOnly},
	{`SELECT * INTO t2 FROM t`, ReasonReadOnly},
	{`COPY (SELECT 1) TO '/tmp/x'`, ReasonForbiddenStatement},
	{`U&"SELECT" 1`, ReasonForbiddenStatement},
	{`SELECT * FROM (VALUES (1)) pg_read_file('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT * FROM (SELECT 1) pg_sleep(1)`, RuleForbiddenFunction},
	{`SELECT * FROM (SELECT 1) s(pg_sleep(1))`, RuleForbiddenFunction},
	{`SELECT (1) pg_ls_dir(a, '.') FROM t`, RuleForbiddenFunction},
	{`SELECT DISTINCT ON (x) pg_sleep(x) FROM (VALUES (1)) v(x)`, RuleForbiddenFunction},
	{`SELECT DISTINCT ON (p) pg_read_file(p) FROM (VALUES ('/etc/hostname')) v(p)`, RuleForbiddenFunction},
	{`SELECT DISTINCT ON (n) set_config(n, v, l) FROM (VALUES ('statement_timeout', '0', false)) s(n, v, l)`, RuleForbiddenFunction},
	{`SELECT * FROM t JOIN u ON (a) pg_sleep(a)`, RuleForbiddenFunction},
	{`SELECT 1 AS ·$$, pg_read_file('/etc/hostname') AS y$$`, RuleForbiddenFunction},
	{`SELECT 1 AS é$$, pg_read_file('/etc/hostname') AS y$$`, RuleForbiddenFunction},
}

// postgresAllowed are statements the allow-list keeps working.
var postgresAllowed = []string{
	`SELECT count(*), max(a), string_agg(b, ',') FROM t`,
	`SELECT U&"\0061" FROM (SELECT 1 AS a) AS x`,
	`SELECT a::numeric(10, 2), CAST(a AS varchar(10)) FROM t`,
	`SELECT lower(b), coalesce(b, ''), jsonb_build_object('a', a) FROM t WHERE a IN (1, 2) AND EXISTS (SELECT 1)`,
	`WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 3) SELECT pg_catalog.sum(n) FROM c`,
	`SELECT row_number() OVER (PARTITION BY a ORDER BY b) FROM t AS x(a, b)`,
	`SELECT * FROM generate_series(1, 3) AS g(n)`,
	`SELECT v.x FROM (VALUES (1), (2)) v(x)`,
	`SELECT g.n FROM generate_series(1, 3) g(n)`,
	`SELECT v.x, g.n FROM (VALUES (1), (2)) v(x), generate_series(1, 3) AS g(n)`,
	`SELECT s.a, s."b" FROM (SELECT 1, 'one') s(a, "b")`,
	`SELECT g.n FROM t JOIN LATERAL generate_series(1, a) g(n) ON true`,
	`SELECT repeat('x', 3), current_timestamp(0), now()`,
}

// sqliteBypasses are attempts, on SQLite, to load code, touch files or
// write, in the ways SQLite spells names and statements.
var sqliteBypasses = []bypass{
	{`SELECT load_extension('x')`, RuleForbiddenFunction},
	{`SELECT LOAD_EXTENSION('x')`, RuleForbiddenFunction},
	{`SELECT Load_Extension('x')`, RuleForbiddenFunction},
	{`SELECT "load_extension"('x')`, RuleForbiddenFunction},
	{"SELECT `load_extension`('x')", RuleForbiddenFunction},
	{`SELECT [load_extension]('x')`, RuleForbiddenFunction},
	{`SELECT "LOAD_EXTENSION"('x')`, RuleForbiddenFunction},
	{`SELECT load_extension/**/('x')`, RuleForbiddenFunction},
	{"SELECT load_extension -- c\n('x')", RuleForbiddenFunction},
	{`SELECT readfile('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT "readfile"('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT writefile('/tmp/x', 'y')`, RuleForbiddenFunction},
	{"SELECT `WriteFile`('/tmp/x', 'y')", RuleForbiddenFunction},
	{`SELECT edit('x')`, RuleForbiddenFunction},
	{`SELECT fts3_tokenizer('simple')`, RuleForbiddenFunction},
	{`SELECT 1, (SELECT readfile('/etc/hostname'))`, RuleForbiddenFunction},
	{`SELECT 'a''b', readfile('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT "a""b", readfile('/etc/hostname')`, RuleForbiddenFunction},
	{`SELECT 1 /* x */, readfile('/etc/hostname')`, RuleForbiddenFunction},
	{`ATTACH DATABASE '/tmp/x.db' AS x`, ReasonForbiddenStatement},
	{`attach '/tmp/x.db' as x`, ReasonForbiddenStatement},
	{`DETACH x`, ReasonForbiddenStatement},
	{`PRAGMA writable_schema = 1`, ReasonForbiddenStatement},
	{`PRAGMA query_only = 0`, ReasonForbiddenStatement},
	{`VACUUM INTO '/tmp/x.db'`, ReasonForbiddenStatement},
	{`BEGIN`, ReasonForbiddenStatement},
	{`ANALYZE`, ReasonForbiddenStatement},
	{`REINDEX`, ReasonForbiddenStatement},
	{"`SELECT` 1", ReasonForbiddenStatement},
	{`"SELECT" 1`, ReasonForbiddenStatement},
	{`SELECT 1; DELETE FROM t`, ReasonMultipleStatements},
	{`SELECT 1 /* /* */ ; DELETE FROM t`, ReasonMultipleStatements},
	{`SELECT E'\'; DELETE FROM t; --'`, ReasonMultipleStatements},
	{`SELECT $$x$$; DELETE FROM t`, ReasonMultipleStatements},
	{`SELECT 1;DROP TABLE t`, ReasonMultipleStatements},
	{`DELETE FROM t`, ReasonReadOnly},
	{`REPLACE INTO t VALUES (1)`, ReasonReadOnly},
	{`INSERT OR REPLACE INTO t VALUES (1)`, ReasonReadOnly},
	{`WITH x AS (SELECT 1) DELETE FROM t`, ReasonReadOnly},
	{`WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x`, ReasonReadOnly},
	{`WITH x AS (SELECT 1) UPDATE t SET a = 1`, ReasonReadOnly},
	{`CREATE TEMP TABLE x (a)`, ReasonReadOnly},
	{`SELECT 'unterminated`, ReasonMalformedStatement},
	{"SELECT `unterminated", ReasonMalformedStatement},
	{`SELECT [unterminated`, ReasonMalformedStatement},
}

// TestBypassCorpus: every attempt of the corpus is denied by its rule, and
// the allowed statements stay allowed.
func TestBypassCorpus(t *testing.T) {
	t.Parallel()
	if len(postgresBypasses) < 40 || len(sqliteBypasses) < 40 {
		t.Fatalf("the corpus has %d PostgreSQL and %d SQLite attempts, want at least 40 each", len(postgresBypasses), len(sqliteBypasses))
	}
	for d, corpus := range map[Dialect][]bypass{Postgres: postgresBypasses, SQLite: sqliteBypasses} {
		for _, b := range corpus {
			err := CheckStatement(b.sql, d)
			if err == nil || err.Code != runstream.CodeWorkflowSQLPolicyDenied || cause(err.Details) != b.rule {
				t.Errorf("%s %q: %v, want %s", d, b.sql, err, b.rule)
			}
		}
	}
	for _, s := range postgresAllowed {
		if err := CheckStatement(s, Postgres); err != nil {
			t.Errorf("postgres %q: %v, want allowed", s, err)
		}
	}
}

// TestDecodeUnicodeEscapes: U&"…" bodies decode as PostgreSQL decodes
// them.
func TestDecodeUnicodeEscapes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`pg\005fread`:     "pg_read",
		`d\0061t\+000061`: "data",
		`a\\b`:            `a\b`,
		`\D83D\DE00`:      "😀",
	} {
		if got, err := decodeUnicodeEscapes(in, '\\'); err != nil || got != want {
			t.Errorf("decode %q = %q, %v; want %q", in, got, err, want)
		}
	}
	if got, err := decodeUnicodeEscapes(`x!0041!!`, '!'); err != nil || got != "xA!" {
		t.Errorf("decode with ! = %q, %v", got, err)
	}
}

// TestPostgresBypassCorpus runs the PostgreSQL corpus through the sql
// node's query path on a real database, in a schema of its own: each is
// refused, and the statements the allow-list keeps run.
func TestPostgresBypassCorpus(t *testing.T) {
	t.Parallel()
	url := os.Getenv("RUNSTREAM_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("RUNSTREAM_TEST_POSTGRES_URL is not set: skipping the PostgreSQL bypass corpus")
	}
	_, dbs := postgresSchema(t, url)
	ctx := t.Context()
	for _, b := range postgresBypasses {
		q := query{database: "wh", statement: b.sql, maxRows: 10, timeout: 5 * time.Second}
		_, err := q.run(ctx, dbs, nil)
		re := runstream.AsError(err)
		if re == nil || re.Code != runstream.CodeWorkflowSQLPolicyDenied {
			t.Errorf("%q ran: %v", b.sql, err)
		}
	}
	for _, s := range postgresAllowed {
		q := query{database: "wh", statement: s, maxRows: 10, timeout: 5 * time.Second}
		if _, err := q.run(ctx, dbs, nil); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
}

// postgresSchema creates a schema with a table t (a int, b text) of two
// rows, dropped when the test ends, and opens the database as "wh" with
// that schema as its search path.
func postgresSchema(t *testing.T, url string) (string, *Databases) {
	t.Helper()
	var suffix [6]byte
	rand.Read(suffix[:])
	schema := "sqlnode_" + hex.EncodeToString(suffix[:])
	admin, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	for _, stmt := range []string{
		"CREATE SCHEMA " + schema,
		"CREATE TABLE " + schema + ".t (a int, b text)",
		"INSERT INTO " + schema + ".t VALUES (1, 'one'), (2, 'two')",
	} {
		if _, err := admin.ExecContext(t.Context(), stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { admin.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	dbs, err := Open(Spec{Name: "wh", Dialect: Postgres, Location: url + sep + "search_path=" + schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dbs.Close() })
	return schema, dbs
}

// TestSQLiteBypassCorpus runs the SQLite corpus through the sql node's
// query path on a real file: each is refused.
func TestSQLiteBypassCorpus(t *testing.T) {
	t.Parallel()
	dbs := sqliteFile(t)
	for _, b := range sqliteBypasses {
		q := query{database: "x", statement: b.sql, maxRows: 10, timeout: 5 * time.Second}
		_, err := q.run(t.Context(), dbs, nil)
		re := runstream.AsError(err)
		if re == nil || re.Code != runstream.CodeWorkflowSQLPolicyDenied {
			t.Errorf("%q ran: %v", b.sql, err)
		}
	}
}

// sqliteFile creates a SQLite file with a table t (a, b) of two rows and
// opens it as "x".
func sqliteFile(t *testing.T) *Databases {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.db")
	rw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.Exec("CREATE TABLE t (a INTEGER, b TEXT); INSERT INTO t VALUES (1, 'one'), (2, 'two')"); err != nil {
		t.Fatal(err)
	}
	rw.Close()
	dbs, err := Open(Spec{Name: "x", Dialect: SQLite, Location: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dbs.Close() })
	return dbs
}

// cause returns what a policy error names: details.reason under the rule
// single_read_statement, else details.rule.
func cause(details map[string]any) any {
	if details["rule"] == RuleSingleReadStatement {
		return details["reason"]
	}
	return details["rule"]
}
