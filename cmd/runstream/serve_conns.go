package main

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// silentConns tracks the connections of an http.Server that have not sent
// a request yet (http.StateNew), so that a shutdown can close them.
// http.Server.Shutdown waits up to five seconds for such a connection's
// first request, and a browser's preconnected socket may never send one:
// a shutdown then took five seconds, or failed when its timeout was
// shorter ("graceful shutdown: context deadline exceeded").
type silentConns struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func newSilentConns() *silentConns { return &silentConns{conns: map[net.Conn]struct{}{}} }

// track is the server's ConnState hook.
func (s *silentConns) track(c net.Conn, state http.ConnState) {
	if state == http.StateIdle {
		return // a connection leaves StateNew for Active, Closed or Hijacked only
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if state == http.StateNew {
		s.conns[c] = struct{}{}
	} else {
		delete(s.conns, c)
	}
}

// closeAfter waits grace, for a request already on its way, then closes
// the connections that have still sent none. Run it when the shutdown
// begins (http.Server.RegisterOnShutdown): the listener is closed, so no
// connection comes after.
func (s *silentConns) closeAfter(grace time.Duration) {
	time.Sleep(grace)
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
		delete(s.conns, c)
	}
}

// silentConnGrace is how long a shutdown lets a connection that has sent
// nothing yet send its first request: a second, or a quarter of the
// shutdown's timeout when that is shorter.
func silentConnGrace(shutdownTimeout time.Duration) time.Duration {
	return min(time.Second, shutdownTimeout/4)
}
