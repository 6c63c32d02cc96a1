package sqlnode

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/runstream/runstream"
)

// These tests skip the policy: the database itself must refuse writes.

func wantDenied(t *testing.T, err error, rule string) {
	t.Helper()
	re := runstream.AsError(err)
	if re == nil || re.Code != runstream.CodeWorkflowSQLPolicyDenied || re.Details["rule"] != RuleSingleReadStatement || re.Details["reason"] != rule {
		t.Errorf("err = %v, want WORKFLOW_SQL_POLICY_DENIED %s", err, rule)
	}
}

func TestSQLiteReadOnlyConnection(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "x.db")
	rw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.Exec("CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	rw.Close()
	dbs, err := Open(Spec{Name: "x", Dialect: SQLite, Location: path})
	if err != nil {
		t.Fatal(err)
	}
	defer dbs.Close()
	db, _ := dbs.lookup("x")
	for _, stmt := range []string{"DELETE FROM t", "CREATE TABLE u (b)", "INSERT INTO t VALUES (2)"} {
		q := query{database: "x", statement: stmt, maxRows: 10, timeout: 5 * time.Second}
		_, err := db.query(t.Context(), stmt, nil, 10, q.timeout)
		if err == nil {
			t.Errorf("%s succeeded on the read-only connection", stmt)
			continue
		}
		wantDenied(t, q.failure(db, err, false), ReasonReadOnly)
	}
	res, err := db.query(t.Context(), "SELECT count(*) AS n FROM t", nil, 10, time.Second)
	if err != nil || res.Rows[0]["n"] != int64(1) {
		t.Errorf("count: %+v, %v", res, err)
	}
	if _, err := Open(Spec{Name: "y", Dialect: SQLite, Location: filepath.Join(t.TempDir(), "missing.db")}); err == nil {
		t.Errorf("opening a missing SQLite file succeeded")
	}
}

// TestPostgresReadOnly runs on PostgreSQL, in a schema of its own, when
// RUNSTREAM_TEST_POSTGRES_URL is set.
func TestPostgresReadOnly(t *testing.T) {
	t.Parallel()
	url := os.Getenv("RUNSTREAM_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("RUNSTREAM_TEST_POSTGRES_URL is not set")
	}
	var suffix [6]byte
	rand.Read(suffix[:])
	schema := "sqlnode_" + hex.EncodeToString(suffix[:])
	admin, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx := t.Context()
	for _, stmt := range []string{
		"CREATE SCHEMA " + schema,
		"CREATE TABLE " + schema + ".t (a int, b text)",
		"INSERT INTO " + schema + ".t VALUES (1, 'one'), (2, 'two')",
	} {
		if _, err := admin.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { admin.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })

	dbs, err := Open(Spec{Name: "wh", Dialect: Postgres, Location: url})
	if err != nil {
		t.Fatal(err)
	}
	defer dbs.Close()
	q := query{database: "wh", statement: "SELECT a, b FROM " + schema + ".t WHERE a > $1 ORDER BY a", maxRows: 10, timeout: 5 * time.Second}
	res, err := q.run(ctx, dbs, []any{int64(1)})
	if err != nil || res.RowCount != 1 || res.Rows[0]["b"] != "two" {
		t.Errorf("query: %+v, %v", res, err)
	}
	q = query{database: "wh", statement: "DELETE FROM " + schema + ".t", maxRows: 10, timeout: 5 * time.Second}
	_, err = q.run(ctx, dbs, nil)
	wantDenied(t, err, ReasonReadOnly)
	db, _ := dbs.lookup("wh")
	_, err = db.query(ctx, q.statement, nil, 10, q.timeout)
	if err == nil {
		t.Fatal("DELETE succeeded in the read-only transaction")
	}
	wantDenied(t, q.failure(db, err, false), ReasonReadOnly)
	// The statement timeout is the database's too.
	sleep := query{database: "wh", statement: "SELECT pg_sleep(5)", maxRows: 1, timeout: 200 * time.Millisecond}
	_, err = db.query(context.Background(), sleep.statement, nil, 1, sleep.timeout)
	if err == nil {
		t.Fatal("pg_sleep(5) finished within a 200 ms statement timeout")
	}
	if re := runstream.AsError(sleep.failure(db, err, false)); re.Code != runstream.CodeWorkflowNodeTimeout {
		t.Errorf("timeout: %v", re)
	}
	var n int
	if err := admin.QueryRowContext(ctx, "SELECT count(*) FROM "+schema+".t").Scan(&n); err != nil || n != 2 {
		t.Errorf("rows after the refused delete: %d (%v)", n, err)
	}
}
