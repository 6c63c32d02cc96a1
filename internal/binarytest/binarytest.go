// Package binarytest builds the runstream binary once per test binary and
// runs it as a server process (`runstream serve`): the support of the
// black-box tests that kill, signal and restart real servers
// (internal/crashtest, internal/langgraphsdk).
//
// A test package calls Main from its TestMain; its tests call Start.
package binarytest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/runstream/runstream/postgres"
)

// binary is the path of the binary Main built.
var binary string

// Main builds the runstream binary into a temporary directory, runs the
// tests of m, removes the binary and exits with the tests' code. A build
// failure exits with 1 before any test runs.
func Main(m *testing.M) {
	dir, err := os.MkdirTemp("", "runstream-binarytest-")
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

// FreeAddr returns a loopback address nothing listens on now, for a
// server that must come back on the same address after a restart.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Server is a `runstream serve` process on a fixed address and data
// directory, which Start can run again after it exited (a restart). Each
// start logs (stderr, at WARN) to a new file in the data directory. The
// test's cleanup kills the process.
type Server struct {
	t    testing.TB
	addr string
	dir  string
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the current process has exited
	err  error         // its Wait error, once done is closed
	logs []string      // the log files of every start
}

// Start runs serve on addr with its data directory dir and the extra
// args, and waits until it listens (failing the test when it exits first
// or does not listen within a minute).
func Start(t testing.TB, dir, addr string, args ...string) *Server {
	t.Helper()
	s := &Server{t: t, addr: addr, dir: dir, args: args}
	t.Cleanup(s.logIfFailed)
	t.Cleanup(s.Kill)
	s.Start()
	return s
}

// Addr is the server's address, host:port.
func (s *Server) Addr() string { return s.addr }

// Base is the server's base URL, http://host:port.
func (s *Server) Base() string { return "http://" + s.addr }

// Start runs the process again (after Kill or Terminate) and waits until
// it listens.
func (s *Server) Start() {
	s.t.Helper()
	logFile, err := os.CreateTemp(s.dir, "serve-*.log")
	if err != nil {
		s.t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(binary, append([]string{"serve", "--addr", s.addr, "--log-level", "WARN", "--data-dir", s.dir}, s.args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	done := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.done, s.err = cmd, done, nil
	s.logs = append(s.logs, logFile.Name())
	s.mu.Unlock()
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
		err := cmd.Wait()
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(done)
	}()
	select {
	case ok := <-listening:
		if !ok {
			s.t.Fatalf("serve exited before listening:\n%s", s.Log())
		}
	case <-time.After(60 * time.Second):
		s.t.Fatalf("serve did not listen within 60 s:\n%s", s.Log())
	}
}

// Signal sends sig to the current process.
func (s *Server) Signal(sig os.Signal) {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	cmd.Process.Signal(sig)
}

// Done is closed when the current process has exited.
func (s *Server) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// Err is the current process's Wait error once Done is closed: nil when
// it exited with status 0.
func (s *Server) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Kill ends the current process with SIGKILL, if it runs, and waits for
// it.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// Terminate ends the current process with SIGTERM (a graceful shutdown)
// and waits for it, failing the test after a minute.
func (s *Server) Terminate() {
	s.t.Helper()
	s.Signal(syscall.SIGTERM)
	select {
	case <-s.Done():
	case <-time.After(time.Minute):
		s.t.Fatal("serve did not shut down within a minute of SIGTERM")
	}
}

// Log returns the log of the current process.
func (s *Server) Log() string {
	s.mu.Lock()
	name := s.logs[len(s.logs)-1]
	s.mu.Unlock()
	b, _ := os.ReadFile(name)
	return string(b)
}

// logIfFailed shows the end of every start's log when the test failed,
// so that a failure in CI says what the server saw. It runs after Kill
// and before the data directory is removed.
func (s *Server) logIfFailed() {
	if !s.t.Failed() {
		return
	}
	const tail = 16 << 10
	for i, name := range s.LogFiles() {
		b, err := os.ReadFile(name)
		if err != nil {
			s.t.Logf("server start %d: its log: %v", i+1, err)
			continue
		}
		if len(b) > tail {
			b = append([]byte("…"), b[len(b)-tail:]...)
		}
		s.t.Logf("server start %d on %s, its log (WARN and above):\n%s", i+1, s.addr, b)
	}
}

// LogFiles returns the log files of every start, oldest first.
func (s *Server) LogFiles() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.logs...)
}

// PostgresStore returns the serve flags of a PostgreSQL store in a schema
// of its own, named prefix and a unique suffix and dropped at the test's
// end, on RUNSTREAM_TEST_POSTGRES_URL; without that variable it skips the
// test, saying what is skipped.
func PostgresStore(t testing.TB, prefix, what string) []string {
	t.Helper()
	url := os.Getenv("RUNSTREAM_TEST_POSTGRES_URL")
	if url == "" {
		t.Skipf("RUNSTREAM_TEST_POSTGRES_URL is not set: skipping %s", what)
	}
	schema := fmt.Sprintf("%s%d", prefix, time.Now().UnixNano())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := postgres.DropSchema(ctx, url, schema); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return []string{"--store", url, "--postgres-schema", schema}
}
