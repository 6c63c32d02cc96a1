package ssestream

import (
	"io"
	"net"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkFlushTCP is a live follower's write of one 200-byte frame to a
// taken-over loopback TCP connection whose client reads everything: the
// write deadline, the chunk framing, the writev and the heartbeat timer.
func BenchmarkFlushTCP(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(io.Discard, c)
	}()
	conn, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	r := httptest.NewRequest("GET", "/", nil)
	f := &follower{out: newConnStream(conn, r, make(map[string][]string)), cfg: Config{}}
	f.cfg.setDefaults()
	f.heartbeat = time.NewTimer(f.cfg.Heartbeat)
	defer f.heartbeat.Stop()
	frame := make([]byte, 200)
	b.ReportAllocs()
	for b.Loop() {
		f.buf = append(f.buf, frame...)
		f.frames = 1
		if err := f.flush(); err != nil {
			b.Fatal(err)
		}
	}
}
