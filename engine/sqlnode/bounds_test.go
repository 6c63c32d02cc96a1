package sqlnode

import (
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/runstream/runstream"
)

// wantOutputBound checks that err is the output bound's error.
func wantOutputBound(t *testing.T, err error) {
	t.Helper()
	re := runstream.AsError(err)
	if re == nil || re.Code != runstream.CodeWorkflowNodeLimitExceeded || re.Details["limit"] != LimitOutputBytes {
		t.Errorf("err = %v, want WORKFLOW_NODE_LIMIT_EXCEEDED %s", err, LimitOutputBytes)
	}
}

// allocatedBy returns the bytes f allocated.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestSQLiteOutputBound: one huge value, and many values that add up past
// the bound, fail with the output bound's error without the value ever
// being built in this process. Not parallel: it measures allocations.
func TestSQLiteOutputBound(t *testing.T) {
	dbs := sqliteFile(t)
	for _, stmt := range []string{
		"SELECT printf('%.*c', 200000000, 'x') AS big",
		"SELECT zeroblob(200000000) AS big",
		"WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 500) SELECT printf('%.*c', 100000, 'x') FROM c",
	} {
		q := query{database: "x", statement: stmt, maxRows: MaxMaxRows, timeout: 10 * time.Second}
		var err error
		if n := allocatedBy(func() { _, err = q.run(t.Context(), dbs, nil) }); n > 64<<20 {
			t.Errorf("%s allocated %d MB", stmt, n>>20)
		}
		wantOutputBound(t, err)
	}
}

// TestPostgresOutputBound is TestSQLiteOutputBound on PostgreSQL, when
// RUNSTREAM_TEST_POSTGRES_URL is set; a statement past its
// statement_timeout fails with WORKFLOW_NODE_TIMEOUT.
func TestPostgresOutputBound(t *testing.T) {
	url := os.Getenv("RUNSTREAM_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("RUNSTREAM_TEST_POSTGRES_URL is not set: skipping the PostgreSQL output bound test")
	}
	_, dbs := postgresSchema(t, url)
	for _, stmt := range []string{
		"SELECT repeat('x', 200000000) AS big",
		"SELECT repeat('x', 100000) FROM generate_series(1, 500)",
	} {
		q := query{database: "wh", statement: stmt, maxRows: MaxMaxRows, timeout: 30 * time.Second}
		var err error
		if n := allocatedBy(func() { _, err = q.run(t.Context(), dbs, nil) }); n > 64<<20 {
			t.Errorf("%s allocated %d MB", stmt, n>>20)
		}
		wantOutputBound(t, err)
	}
	// The connection that refused the message is not reused broken.
	q := query{database: "wh", statement: "SELECT count(*) AS n FROM t", maxRows: 10, timeout: 5 * time.Second}
	if res, err := q.run(t.Context(), dbs, nil); err != nil || res.Rows[0]["n"] != int64(2) {
		t.Errorf("count after the bound: %+v, %v", res, err)
	}
	q = query{database: "wh", statement: "SELECT count(*) FROM generate_series(1, 1000000000)", maxRows: 10, timeout: 200 * time.Millisecond}
	_, err := q.run(t.Context(), dbs, nil)
	if re := runstream.AsError(err); re == nil || re.Code != runstream.CodeWorkflowNodeTimeout {
		t.Errorf("a statement past its timeout: %v", err)
	}
}
