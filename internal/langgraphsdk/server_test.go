package langgraphsdk_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/runstream/runstream/internal/binarytest"
)

func TestMain(m *testing.M) { binarytest.Main(m) }

// startServer runs serve on a free address with the store args, in a
// data directory of the test, and waits until it listens. The server
// restarts on the same address and store (Kill, then Start); the logs of
// all its starts are shown when the test fails.
func startServer(t *testing.T, store []string) *binarytest.Server {
	t.Helper()
	s := binarytest.Start(t, t.TempDir(), binarytest.FreeAddr(t), store...)
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			for _, name := range s.LogFiles() {
				b, _ := os.ReadFile(name)
				t.Logf("%s:\n%s", name, b)
			}
		}
	})
	return s
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
		return binarytest.PostgresStore(t, "rs_lgsdk_", "the PostgreSQL run of the LangGraph SDK test")
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
