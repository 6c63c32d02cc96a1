package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// runDoctor runs "runstream doctor" with args and returns its output and
// error.
func runDoctor(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := (&Main{Getenv: func(string) string { return "" }}).Run(t.Context(), append([]string{"doctor"}, args...), &out, &out)
	return out.String(), err
}

// line returns the line of out that reports check name, or "".
func line(out, status, name string) string {
	for l := range strings.Lines(out) {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == status && f[1] == name {
			return l
		}
	}
	return ""
}

// servedSQLite serves a SQLite store once, so that it is created and
// migrated, and returns its path.
func servedSQLite(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "runstream.db")
	p := runServe(t, nil, "--store", "sqlite:"+path, "--data-dir", filepath.Dir(path), "--workers", "0")
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDoctorPassesOnAServedStore: every check of a SQLite store serve
// created passes (exit status 0); NORMAL synchronous is a warning only.
func TestDoctorPassesOnAServedStore(t *testing.T) {
	t.Parallel()
	path := servedSQLite(t)
	out, err := runDoctor(t, "--store", "sqlite:"+path, "--data-dir", filepath.Dir(path), "--min-free-bytes", "1")
	if err != nil || line(out, "ok", "store") == "" || line(out, "ok", "durability") == "" || line(out, "ok", "disk") == "" {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
	out, err = runDoctor(t, "--store", "sqlite:"+path, "--data-dir", filepath.Dir(path), "--min-free-bytes", "1", "--sqlite-synchronous", "NORMAL")
	if err != nil || line(out, "warn", "durability") == "" || !strings.Contains(out, "fix: run serve with --sqlite-synchronous FULL") {
		t.Fatalf("doctor with NORMAL: %v\n%s", err, out)
	}
}

// TestDoctorFailures: each check's failing case prints FAIL with a fix
// and makes the exit status non-zero.
func TestDoctorFailures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain.db") // a SQLite file serve never opened
	db, err := sql.Open("sqlite", plain)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE other (x INTEGER)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	served := servedSQLite(t)
	for _, tc := range []struct {
		name   string
		args   []string
		check  string
		detail string
	}{
		{"store missing", []string{"--store", "sqlite:" + filepath.Join(dir, "none.db")}, "store", "no SQLite database at"},
		{"store not migrated", []string{"--store", "sqlite:" + plain}, "store", "not migrated"},
		{"durability", []string{"--store", "sqlite:" + plain}, "durability", "journal_mode is delete, not wal"},
		{"disk", []string{"--store", "sqlite:" + served, "--min-free-bytes", fmt.Sprint(uint64(1) << 62)}, "disk", "less than 4096.0 PiB"},
		{"postgres unreachable", []string{"--store", "postgres://runstream@127.0.0.1:1/none?sslmode=disable&connect_timeout=5"}, "store", "cannot reach PostgreSQL"},
		{"not a store", []string{"--store", "mysql://x"}, "store", "is not a store URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--data-dir", dir, "--min-free-bytes", "1"}, tc.args...)
			out, err := runDoctor(t, args...)
			if !errors.Is(err, errChecksFailed) || exitCode(err) != 1 {
				t.Errorf("error %v (exit %d), want a failed check (exit 1)\n%s", err, exitCode(err), out)
			}
			l := line(out, "FAIL", tc.check)
			if !strings.Contains(l, tc.detail) {
				t.Errorf("no FAIL %s line with %q:\n%s", tc.check, tc.detail, out)
			}
			if i := strings.Index(out, l); l != "" && !strings.HasPrefix(strings.TrimSpace(out[i+len(l):]), "fix:") {
				t.Errorf("FAIL %s has no fix:\n%s", tc.check, out)
			}
		})
	}
}

// TestDoctorListenerFailure: a listener that cannot connect fails.
func TestDoctorListenerFailure(t *testing.T) {
	t.Parallel()
	r := listenerCheck(t.Context(), doctorConfig{store: "postgres://runstream@127.0.0.1:1/none?sslmode=disable&connect_timeout=5", timeout: 10 * time.Second})
	if r.status != "FAIL" || !strings.Contains(r.detail, "LISTEN/NOTIFY does not work") || r.fix == "" {
		t.Errorf("listener check = %+v", r)
	}
}

// TestDoctorPostgres checks a PostgreSQL deployment when
// RUNSTREAM_TEST_POSTGRES_URL is set: a served schema passes; an empty
// schema is not migrated; synchronous_commit=off fails; a clock an hour
// off fails.
func TestDoctorPostgres(t *testing.T) {
	t.Parallel()
	url := os.Getenv("RUNSTREAM_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("RUNSTREAM_TEST_POSTGRES_URL is not set: skipping the PostgreSQL doctor checks")
	}
	schema := fmt.Sprintf("rs_cmd_doctor_%d", time.Now().UnixNano())
	t.Cleanup(func() { dropSchema(t, url, schema) })
	p := runServe(t, nil, "--store", url, "--postgres-schema", schema, "--workers", "0", "--data-dir", t.TempDir())
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	out, err := runDoctor(t, "--store", url, "--postgres-schema", schema, "--data-dir", t.TempDir(), "--min-free-bytes", "1")
	for _, check := range []string{"store", "durability", "clock", "listener", "disk"} {
		if line(out, "ok", check) == "" {
			t.Errorf("%s is not ok", check)
		}
	}
	if err != nil {
		t.Errorf("doctor: %v\n%s", err, out)
	}

	out, err = runDoctor(t, "--store", url, "--postgres-schema", schema+"_empty", "--min-free-bytes", "1")
	if !errors.Is(err, errChecksFailed) || !strings.Contains(line(out, "FAIL", "store"), "not migrated") {
		t.Errorf("an empty schema: %v\n%s", err, out)
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	out, err = runDoctor(t, "--store", url+sep+"synchronous_commit=off", "--postgres-schema", schema, "--min-free-bytes", "1")
	if !errors.Is(err, errChecksFailed) || !strings.Contains(line(out, "FAIL", "durability"), "synchronous_commit=off") {
		t.Errorf("synchronous_commit=off: %v\n%s", err, out)
	}
	skewed := doctorConfig{store: url, postgresSchema: schema, dataDir: t.TempDir(), maxClockSkew: time.Second, timeout: 10 * time.Second,
		now: func() time.Time { return time.Now().Add(-time.Hour) }}
	results := runChecks(context.Background(), skewed)
	var clock checkResult
	for _, r := range results {
		if r.name == "clock" {
			clock = r
		}
	}
	if clock.status != "FAIL" || !strings.Contains(clock.detail, "behind PostgreSQL's") || !strings.Contains(clock.detail, "59m") && !strings.Contains(clock.detail, "1h0m") {
		t.Errorf("a clock an hour behind: %+v", clock)
	}
}
