package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAgentAgainstRunstreamServe builds the runstream binary, starts
// `runstream serve` on a free port, runs the example against it and reads
// the thread back over HTTP.
func TestAgentAgainstRunstreamServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the runstream binary")
	}
	bin := filepath.Join(t.TempDir(), "runstream")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "github.com/runstream/runstream/cmd/runstream")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	serve := exec.CommandContext(ctx, bin, "serve", "--addr", "127.0.0.1:0", "--store", "memory:")
	serve.Env = append(serve.Environ(), "RUNSTREAM_AUTH=none")
	var stderr bytes.Buffer
	serve.Stderr = &stderr
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = serve.Wait()
	}()
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if _, after, ok := strings.Cut(sc.Text(), " listening on "); ok {
				urls <- strings.TrimSpace(after)
			}
		}
	}()
	var url string
	select {
	case url = <-urls:
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not start:\n%s", stderr.String())
	}

	var out bytes.Buffer
	if err := run(t.Context(), []string{"-server", url, "-thread", "served", "-run", "r1", "-dir", t.TempDir()}, &out, func(string) string { return "" }); err != nil {
		t.Fatalf("agent: %v\nserver: %s", err, stderr.String())
	}
	resp, err := http.Get(url + "/api/threads/served/token-usage")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var usage map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&usage); err != nil {
		t.Fatal(err)
	}
	if usage["total_tokens"] != 817.0 {
		t.Errorf("token usage through runstream serve = %v", usage)
	}
	resp, err = http.Get(url + "/api/threads/served/runs/r1/workspace-changes")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var changes struct {
		Available bool `json:"available"`
		Summary   struct{ Created, Modified int }
	}
	if err := json.NewDecoder(resp.Body).Decode(&changes); err != nil {
		t.Fatal(err)
	}
	if !changes.Available || changes.Summary.Created != 1 || changes.Summary.Modified != 1 {
		t.Errorf("workspace changes through runstream serve = %+v", changes)
	}
}
