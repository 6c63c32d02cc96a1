package main

import (
	"database/sql"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestSQLiteOnlineBackup follows docs/OPERATIONS.md: VACUUM INTO on the
// database of a running server (WAL mode) makes a consistent copy that a
// server started on it serves, with every acknowledged event.
func TestSQLiteOnlineBackup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path, copyPath := filepath.Join(dir, "runstream.db"), filepath.Join(dir, "backup.db")
	p := runServe(t, nil, "--store", "sqlite:"+path, "--data-dir", dir, "--workers", "0")
	body := `{"events":[` + strings.TrimSuffix(strings.Repeat(`{"event_type":"middleware:backup","content":{"name":"b","hook":"h","action":"a","changes":{}}},`, 50), ",") + `]}`
	for range 4 {
		if code, out := postJSON(t, p.base+"/api/threads/t-backup/runs/r1/events", body); code != http.StatusCreated {
			t.Fatalf("append: %d %v", code, out)
		}
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("VACUUM INTO ?", copyPath); err != nil {
		t.Fatalf("VACUUM INTO while the server runs: %v", err)
	}
	db.Close()
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
	restored := runServe(t, nil, "--store", "sqlite:"+copyPath, "--data-dir", t.TempDir(), "--workers", "0")
	code, out, _ := get(t, restored.base+"/api/threads/t-backup/runs/r1/events?limit=500")
	if code != http.StatusOK || strings.Count(out, `"event_type":"middleware:backup"`) != 200 {
		t.Errorf("the restored copy answers %d with %d events, want 200", code, strings.Count(out, `"event_type":"middleware:backup"`))
	}
}
