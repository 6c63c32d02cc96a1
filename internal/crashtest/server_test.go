package crashtest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// binary is the runstream binary TestMain builds.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "runstream-crashtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "runstream")
	build := exec.Command("go", "build", "-o", binary, "github.com/runstream/runstream/cmd/runstream")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build runstream:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is one runstream serve process.
type server struct {
	cmd    *exec.Cmd
	base   string
	stderr *os.File
	// done is closed when the process has exited, with err its Wait error.
	done chan struct{}
	err  error
}

// freePort returns a port nothing listens on now, for a server that must
// come back on the same address after a restart.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServer runs the binary's serve on addr with args and waits until
// it listens. Its log goes to a file in dir, shown when the test fails.
func startServer(t *testing.T, dir, addr string, args ...string) *server {
	t.Helper()
	logFile, err := os.CreateTemp(dir, "serve-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, append([]string{"serve", "--addr", addr, "--log-level", "WARN", "--data-dir", dir}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, base: "http://" + addr, stderr: logFile, done: make(chan struct{})}
	listening := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		found := false
		for sc.Scan() {
			if !found && strings.Contains(sc.Text(), "listening on") {
				found = true
				listening <- true
			}
		}
		if !found {
			listening <- false
		}
	}()
	go func() {
		s.err = cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() { s.kill() })
	select {
	case ok := <-listening:
		if !ok {
			t.Fatalf("serve exited before listening:\n%s", s.log())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not listen within 60 s:\n%s", s.log())
	}
	return s
}

// kill ends the process with SIGKILL and waits for it.
func (s *server) kill() {
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

func (s *server) log() string {
	b, _ := os.ReadFile(s.stderr.Name())
	return string(b)
}

// backendArgs returns the serve flags of a fresh store of the backend:
// a SQLite file in dir, a PostgreSQL schema of its own (dropped at the
// test's end), or, for "jsonl", thread run events (and their idempotency
// keys) in JSON Lines files under dir/events with the rest in a SQLite
// file. The PostgreSQL backend skips without RUNSTREAM_TEST_POSTGRES_URL.
func backendArgs(t *testing.T, backend, dir string) []string {
	t.Helper()
	switch backend {
	case "sqlite":
		return []string{"--store", "sqlite:" + filepath.Join(dir, "runstream.db")}
	case "jsonl":
		return []string{"--store", "sqlite:" + filepath.Join(dir, "runstream.db"), "--run-events", "jsonl:" + filepath.Join(dir, "events")}
	case "postgres":
		url := os.Getenv("RUNSTREAM_TEST_POSTGRES_URL")
		if url == "" {
			t.Skip("RUNSTREAM_TEST_POSTGRES_URL is not set: skipping the PostgreSQL crash test")
		}
		schema := fmt.Sprintf("rs_crash_%d", time.Now().UnixNano())
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				t.Errorf("drop schema %s: %v", schema, err)
				return
			}
			defer conn.Close(ctx)
			if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
				t.Errorf("drop schema %s: %v", schema, err)
			}
		})
		return []string{"--store", url, "--postgres-schema", schema}
	}
	t.Fatalf("unknown backend %q", backend)
	return nil
}
