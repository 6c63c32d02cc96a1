package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseGroupCommits(t *testing.T) {
	tests := []struct {
		name, text string
		want       groupCommits
		wantErr    bool
	}{
		{"none", "# HELP x y\nx 1\n", groupCommits{}, false},
		{"one store", `# TYPE runstream_store_group_commit_size histogram
runstream_store_group_commit_size_bucket{store="sqlite",le="1"} 3
runstream_store_group_commit_size_bucket{store="sqlite",le="+Inf"} 10
runstream_store_group_commit_size_sum{store="sqlite"} 72
runstream_store_group_commit_size_count{store="sqlite"} 10
runstream_store_operation_duration_seconds_count{operation="put",store="sqlite"} 99
`, groupCommits{Count: 10, Writes: 72}, false},
		{"labels summed, float counts", `runstream_store_group_commit_size_sum{store="a"} 1.5e+06
runstream_store_group_commit_size_count{store="a"} 1e+06
runstream_store_group_commit_size_sum{store="b"} 4
runstream_store_group_commit_size_count{store="b"} 2
`, groupCommits{Count: 1000002, Writes: 1500004}, false},
		{"a value that is not a number", "runstream_store_group_commit_size_count{store=\"a\"} many\n", groupCommits{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseGroupCommits(strings.NewReader(tt.text))
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parseGroupCommits = %+v, %v; want %+v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestBenchThreadCommits runs thread-ingest against a bench server on
// SQLite in this process: it reports the group commits of the POSTs, each
// POST one write, and nothing of the seeding before them.
func TestBenchThreadCommits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	servers, served := serveBench(t, ctx, "sqlite:"+filepath.Join(t.TempDir(), "bench.db"))

	const events = 200
	cfg := benchConfig{events: events, eventBytes: 200, batch: 1, concurrency: 8, threads: 1, runs: 1}
	res, err := benchThread(ctx, servers, cfg, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := res.Commits
	if c.Writes != events || c.Count < 1 || c.Count > events {
		t.Errorf("commits %+v, want %d writes in 1 to %d commits", c, events, events)
	}
	if !strings.Contains(res.String(), "group commits") {
		t.Errorf("the group commits are not reported:\n%s", res)
	}
	cancel()
	if err := <-served; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("bench serve: %v", err)
	}
}

// TestBenchThreadProfiles: --cpu-profile and --trace write the server's CPU
// profile and execution trace of the stretch the events are produced in.
func TestBenchThreadProfiles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	servers, served := serveBench(t, ctx, "sqlite:"+filepath.Join(t.TempDir(), "bench.db"))

	dir := t.TempDir()
	cfg := benchConfig{events: 50, eventBytes: 200, batch: 1, concurrency: 4, threads: 1, runs: 1,
		cpuProfile: filepath.Join(dir, "cpu.prof"), trace: filepath.Join(dir, "exec.trace"), cpuSeconds: 1}
	if _, err := benchThread(ctx, servers, cfg, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	for path, magic := range map[string]string{cfg.cpuProfile: "\x1f\x8b", cfg.trace: "go 1."} {
		b, err := os.ReadFile(path)
		if err != nil || !strings.HasPrefix(string(b), magic) {
			t.Errorf("%s: %d bytes starting %q (%v), want a file starting %q", filepath.Base(path), len(b), b[:min(len(b), 8)], err, magic)
		}
	}
	cancel()
	if err := <-served; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("bench serve: %v", err)
	}
}
