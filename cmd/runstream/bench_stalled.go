package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sync"
	"time"
)

// Stalled followers (--stalled-followers N, thread-latency and
// thread-saturation): the scenario runs twice on the same server, first
// as asked, then with N more followers of the same threads that open
// their stream and never read it, over sockets with a small receive
// buffer and small segments so that they stall after a few frames. The result gives the
// producers' POST latency of both runs and the ratio of their p99s, and
// how many of the stalled followers the server cut (closed) by the end.

// stalledFollower is a stream whose body is never read until check.
type stalledFollower struct {
	conn net.Conn
}

// openStalled opens n streams of the threads of p after cursor after, on
// sockets with a receive buffer of rcvbuf bytes and segments of an
// Ethernet path (stalledSocket), reads each response's head, and reads
// nothing more.
func openStalled(ctx context.Context, base string, p threadPlan, n, rcvbuf int, after int64) ([]*stalledFollower, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	d := net.Dialer{Control: stalledSocket(rcvbuf)}
	out := make([]*stalledFollower, 0, n)
	for i := range n {
		conn, err := d.DialContext(ctx, "tcp", u.Host)
		if err != nil {
			closeStalled(out)
			return nil, err
		}
		f := &stalledFollower{conn: conn}
		out = append(out, f)
		req := fmt.Sprintf("GET /api/threads/%s/stream?after=%d HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", p.thread(i%p.threads), after, u.Host)
		if _, err := conn.Write([]byte(req)); err != nil {
			closeStalled(out)
			return nil, err
		}
		// The head only: a small reader, dropped afterwards (what it read
		// past the head is at most a frame or two).
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 512), nil)
		if err != nil {
			closeStalled(out)
			return nil, fmt.Errorf("stalled follower %d: %w", i, err)
		}
		if resp.StatusCode != http.StatusOK {
			closeStalled(out)
			return nil, fmt.Errorf("stalled follower %d: %s", i, resp.Status)
		}
		conn.SetReadDeadline(time.Time{})
	}
	return out, nil
}

func closeStalled(fs []*stalledFollower) {
	for _, f := range fs {
		f.conn.Close()
	}
}

// cut reports whether the server ended the stream: it reads what is left
// until the connection ends (cut: true) or until it has been quiet for
// quiet (still open: false).
func (f *stalledFollower) cut(quiet time.Duration) (bool, error) {
	buf := make([]byte, 32<<10)
	for {
		f.conn.SetReadDeadline(time.Now().Add(quiet))
		_, err := f.conn.Read(buf)
		if err == nil {
			continue
		}
		return streamEnded(err)
	}
}

// streamEnded classifies the error that ended a read of a stalled
// follower: the server closed or reset the connection (true), or the read
// timed out with the connection still open (false); other errors are
// returned.
func streamEnded(err error) (bool, error) {
	var ne net.Error
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return false, nil
	case isConnEnd(err):
		return true, nil
	}
	return false, err
}

// countCut checks every stalled follower at once and returns how many the
// server cut, then closes them.
func countCut(fs []*stalledFollower, quiet time.Duration) (int, error) {
	defer closeStalled(fs)
	results := make([]bool, len(fs))
	errs := make([]error, len(fs))
	var wg sync.WaitGroup
	for i, f := range fs {
		wg.Go(func() { results[i], errs[i] = f.cut(quiet) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	cut := 0
	for _, c := range results {
		if c {
			cut++
		}
	}
	return cut, nil
}

// latencyMillis returns the p50, p99 and maximum of d in milliseconds,
// sorting d; zeros when d is empty.
func latencyMillis(d []time.Duration) (p50, p99, maximum float64) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	slices.Sort(d)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return ms(d[len(d)/2]), ms(d[len(d)*99/100]), ms(d[len(d)-1])
}

// slowest returns the index of the longest of d.
func slowest(d []time.Duration) int {
	i := 0
	for j, v := range d {
		if v > d[i] {
			i = j
		}
	}
	return i
}

// benchThreadStalled runs a thread scenario without, then with,
// cfg.stalled stalled followers on the same servers, and returns the
// second run's result with the first's attached.
func benchThreadStalled(ctx context.Context, servers []*benchServer, cfg benchConfig, rate float64) (benchResult, error) {
	without, err := benchThread(ctx, servers, cfg, rate, cfg.followers, 0)
	if err != nil {
		return benchResult{}, fmt.Errorf("without stalled followers: %w", err)
	}
	with, err := benchThread(ctx, servers, cfg, rate, cfg.followers, cfg.stalled)
	if err != nil {
		return benchResult{}, fmt.Errorf("with stalled followers: %w", err)
	}
	without.Scenario, without.Store = cfg.scenario+" without stalled followers", redactURL(cfg.store)
	with.Without = &without
	if without.PostP99Millis > 0 {
		with.PostP99Ratio = with.PostP99Millis / without.PostP99Millis
	}
	return with, nil
}
