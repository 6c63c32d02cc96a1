package langgraphsdk_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// binary is the runstream binary TestMain builds.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "runstream-langgraphsdk-")
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

// server is one runstream serve process on a fixed address, restartable.
type server struct {
	t    *testing.T
	dir  string
	addr string
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	logs []string // the log files of every start
}

// freeAddr returns a loopback address nothing listens on now, for a
// server that must come back on the same address after a restart.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServer runs serve on a free address with the store args and waits
// until it listens.
func startServer(t *testing.T, store []string) *server {
	t.Helper()
	s := &server{t: t, dir: t.TempDir(), addr: freeAddr(t), args: store}
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			for _, name := range s.logs {
				b, _ := os.ReadFile(name)
				t.Logf("%s:\n%s", name, b)
			}
		}
	})
	s.start()
	return s
}

func (s *server) base() string { return "http://" + s.addr }

// start runs the process and waits until it listens.
func (s *server) start() {
	s.t.Helper()
	logFile, err := os.CreateTemp(s.dir, "serve-*.log")
	if err != nil {
		s.t.Fatal(err)
	}
	defer logFile.Close()
	args := append([]string{"serve", "--addr", s.addr, "--log-level", "WARN", "--data-dir", s.dir}, s.args...)
	cmd := exec.Command(binary, args...)
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
	s.cmd, s.done = cmd, done
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
		cmd.Wait()
		close(done)
	}()
	select {
	case ok := <-listening:
		if !ok {
			s.t.Fatalf("serve exited before listening (log %s)", logFile.Name())
		}
	case <-time.After(60 * time.Second):
		s.t.Fatal("serve did not listen within 60 s")
	}
}

// kill ends the process with SIGKILL and waits for it.
func (s *server) kill() {
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

// shutdown ends the process with SIGTERM (a graceful shutdown) and waits
// for it.
func (s *server) shutdown() {
	s.t.Helper()
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(time.Minute):
		s.t.Fatal("serve did not shut down within a minute of SIGTERM")
	}
}

// restart kills the process and starts it again on the same address and
// store.
func (s *server) restart() {
	s.t.Helper()
	s.kill()
	s.start()
}

// storeArgs returns the serve flags of a fresh store: a SQLite file in a
// directory of the test, or a PostgreSQL schema of its own (dropped at the
// test's end), skipping without RUNSTREAM_TEST_POSTGRES_URL.
func storeArgs(t *testing.T, backend string) []string {
	t.Helper()
	switch backend {
	case "sqlite":
		return []string{"--store", "sqlite:" + filepath.Join(t.TempDir(), "runstream.db")}
	case "postgres":
		url := os.Getenv("RUNSTREAM_TEST_POSTGRES_URL")
		if url == "" {
			t.Skip("RUNSTREAM_TEST_POSTGRES_URL is not set: skipping the PostgreSQL run of the LangGraph SDK test")
		}
		schema := fmt.Sprintf("rs_lgsdk_%d", time.Now().UnixNano())
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

// proxy is a TCP proxy in front of a server, as nginx is in front of
// DeerFlow's gateway: cut closes every open connection (the SDK sees a
// network error mid-stream), and while the server is down it answers
// 502 Bad Gateway, which the SDK retries.
type proxy struct {
	t       *testing.T
	ln      net.Listener
	backend string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	bad   int           // 502 answers given
	badCh chan struct{} // closed and replaced on each 502
	wg    sync.WaitGroup
}

func startProxy(t *testing.T, backend string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, ln: ln, backend: backend, conns: map[net.Conn]struct{}{}, badCh: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) base() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(c)
		}()
	}
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// serve relays one client connection to a new connection to the backend.
func (p *proxy) serve(client net.Conn) {
	if !p.track(client) {
		client.Close()
		return
	}
	defer p.untrack(client)
	server, err := net.Dial("tcp", p.backend)
	if err != nil {
		if badGateway(client) {
			p.mu.Lock()
			p.bad++
			close(p.badCh)
			p.badCh = make(chan struct{})
			p.mu.Unlock()
		}
		return
	}
	if !p.track(server) {
		server.Close()
		return
	}
	defer p.untrack(server)
	done := make(chan struct{}, 2)
	go func() { io.Copy(server, client); done <- struct{}{} }()
	go func() { io.Copy(client, server); done <- struct{}{} }()
	<-done // either side closed or was cut: close both
	client.Close()
	server.Close()
	<-done
}

// badGateway reads the client's request and answers 502, as nginx does
// when its upstream refuses connections. It reports whether it answered.
func badGateway(c net.Conn) bool {
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return false
	}
	io.Copy(io.Discard, req.Body)
	_, err = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: 11\r\nConnection: close\r\n\r\nbad gateway")
	return err == nil
}

// waitBadGateway waits until the proxy has answered a 502.
func (p *proxy) waitBadGateway() {
	p.t.Helper()
	deadline := time.After(time.Minute)
	for {
		p.mu.Lock()
		bad, ch := p.bad, p.badCh
		p.mu.Unlock()
		if bad > 0 {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			p.t.Fatal("the proxy answered no 502: the SDK did not reconnect while the server was down")
		}
	}
}

// cut closes every open connection and reports how many there were.
func (p *proxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.conns)
	for c := range p.conns {
		c.Close()
	}
	return n
}
