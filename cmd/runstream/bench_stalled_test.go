package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestBenchStalledFollowersFlag(t *testing.T) {
	for _, args := range [][]string{
		{"--scenario", "latency", "--stalled-followers", "5"},
		{"--scenario", "thread-ingest", "--stalled-followers", "5"},
		{"--scenario", "thread-latency", "--stalled-followers", "-1"},
	} {
		m := &Main{Getenv: func(string) string { return "" }}
		err := m.bench(context.Background(), args, io.Discard, io.Discard)
		if !errors.Is(err, errUsage) {
			t.Errorf("bench %v: %v, want a usage error (before any server starts)", args, err)
		}
	}
}

func TestLatencyMillis(t *testing.T) {
	var d []time.Duration
	for i := 200; i >= 1; i-- { // unsorted on purpose
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	p50, p99, maximum := latencyMillis(d)
	if p50 != 101 || p99 != 199 || maximum != 200 {
		t.Errorf("latencyMillis = %v, %v, %v; want 101, 199, 200", p50, p99, maximum)
	}
	if i := slowest([]time.Duration{3, 9, 1, 9, 2}); i != 1 {
		t.Errorf("slowest = %d, want 1", i)
	}
	if p50, p99, maximum := latencyMillis(nil); p50 != 0 || p99 != 0 || maximum != 0 {
		t.Errorf("latencyMillis(nil) = %v, %v, %v; want zeros", p50, p99, maximum)
	}
}

func TestStreamEnded(t *testing.T) {
	for _, c := range []struct {
		err   error
		ended bool
		fails bool
	}{
		{io.EOF, true, false},
		{&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, true, false},
		{&net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, false, false},
		{errors.New("something else"), false, true},
	} {
		ended, err := streamEnded(c.err)
		if ended != c.ended || (err != nil) != c.fails {
			t.Errorf("streamEnded(%v) = %v, %v; want %v, error %v", c.err, ended, err, c.ended, c.fails)
		}
	}
}

// TestCountCut counts as cut the followers whose server closed the
// connection, and not those it keeps open.
func TestCountCut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var kept []net.Conn
	defer func() {
		for _, c := range kept {
			c.Close()
		}
	}()
	var followers []*stalledFollower
	for i := range 5 {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		followers = append(followers, &stalledFollower{conn: conn})
		server, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(server, "frame %d\n", i)
		if i%2 == 0 {
			server.Close() // cut
		} else {
			kept = append(kept, server)
		}
	}
	cut, err := countCut(followers, 200*time.Millisecond)
	if err != nil || cut != 3 {
		t.Fatalf("countCut = %d, %v; want 3 of 5", cut, err)
	}
	if _, err := followers[1].conn.Read(make([]byte, 1)); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("a follower read after countCut: %v, want it closed", err)
	}
}
