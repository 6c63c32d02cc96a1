// Package apitest serves the HTTP API on a local listener for tests and
// stops it, streams included, when the test ends.
package apitest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/runstream/runstream/sse"
)

// Streams ends the SSE streams that a handler took over from net/http,
// which httptest.Server does not track: *httpapi.Server.
type Streams interface {
	Shutdown(ctx context.Context) error
}

// Server is an httptest.Server whose CloseClientConnections also closes
// the connections that streams took over.
type Server struct {
	*httptest.Server

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// Serve starts a Server with h, which is api or wraps it. When the test
// ends it ends api's streams, closes the client connections and stops the
// server; cleanups registered before Serve (a store's Close, a hub's
// cancel) therefore run once nothing serves anymore.
func Serve(t testing.TB, h http.Handler, api Streams) *Server {
	t.Helper()
	s := &Server{Server: httptest.NewUnstartedServer(h), conns: make(map[net.Conn]struct{})}
	s.Config.ConnState = s.track
	s.Start()
	t.Cleanup(func() {
		if err := api.Shutdown(context.Background()); err != nil {
			t.Errorf("shut the API's streams down: %v", err)
		}
		s.CloseClientConnections()
		s.Close()
	})
	return s
}

// track remembers every connection until net/http closes it; a connection
// taken over (hijacked) stays, for CloseClientConnections.
func (s *Server) track(c net.Conn, state http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch state {
	case http.StateNew:
		s.conns[c] = struct{}{}
	case http.StateClosed:
		delete(s.conns, c)
	}
}

// CloseClientConnections closes every connection to the server, those
// that streams took over included: the clients see them dropped.
func (s *Server) CloseClientConnections() {
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
		delete(s.conns, c)
	}
	s.mu.Unlock()
	s.Server.CloseClientConnections()
}

// ReadToEnd reads r until its stream ends and returns the error that
// ended it (io.EOF: a clean end, io.ErrUnexpectedEOF: an aborted
// connection). It fails the test if the stream is still open after
// within.
func ReadToEnd(t testing.TB, r *sse.Reader, within time.Duration) error {
	t.Helper()
	ended := make(chan error, 1)
	go func() {
		for {
			if _, err := r.Next(); err != nil {
				ended <- err
				return
			}
		}
	}()
	select {
	case err := <-ended:
		return err
	case <-time.After(within):
		t.Fatalf("the stream is still open after %s", within)
		return nil
	}
}

// Get sends a GET of url with header's fields (name, value, …) and returns
// the response, whose body is closed when the test ends: a stream's, say,
// which the test reads with sse.NewReader.
func Get(t testing.TB, url string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}
