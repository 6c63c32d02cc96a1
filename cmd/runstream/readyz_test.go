package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestReadyzReportsParts: /readyz names the store and the engine, and on
// PostgreSQL (RUNSTREAM_TEST_POSTGRES_URL) the listener, each ready.
func TestReadyzReportsParts(t *testing.T) {
	t.Parallel()
	base, _, _ := startServe(t, nil, "--store", "memory:", "--workers", "1")
	want := `"parts":{"engine":{"status":"ready"},"store":{"status":"ready"}}`
	if code, body, _ := get(t, base+"/readyz"); code != http.StatusOK || !strings.Contains(body, want) {
		t.Errorf("/readyz = %d %s, want %s", code, body, want)
	}
	url := os.Getenv("RUNSTREAM_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("RUNSTREAM_TEST_POSTGRES_URL is not set: skipping the PostgreSQL listener part")
	}
	schema := fmt.Sprintf("rs_cmd_readyz_%d", time.Now().UnixNano())
	t.Cleanup(func() { dropSchema(t, url, schema) })
	p := runServe(t, nil, "--store", url, "--postgres-schema", schema, "--workers", "1", "--data-dir", t.TempDir())
	want = `"parts":{"engine":{"status":"ready"},"listener":{"status":"ready"},"store":{"status":"ready"}}`
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body, _ := get(t, p.base+"/readyz")
		if code == http.StatusOK && strings.Contains(body, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d %s, want %s", code, body, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
