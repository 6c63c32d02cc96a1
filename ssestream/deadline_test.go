package ssestream

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/runstream/runstream/live"
)

// deadlineRecorder is a streamWriter that records, for each send, when it
// came and the deadline it was given, and counts the deadline's changes.
type deadlineRecorder struct {
	sends   []time.Time
	given   []time.Time
	changes int
	sent    []string
}

func (d *deadlineRecorder) send(p []byte, deadline time.Time) error {
	if len(d.given) == 0 || !deadline.Equal(d.given[len(d.given)-1]) {
		d.changes++
	}
	d.sends = append(d.sends, time.Now())
	d.given = append(d.given, deadline)
	d.sent = append(d.sent, string(p))
	return nil
}

// Frequent writes move the write deadline once per eighth of WriteTimeout,
// not at every write, and every write still has between WriteTimeout and
// 9/8 of it before its deadline.
func TestWriteDeadlineMovesOncePerEighthOfWriteTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &deadlineRecorder{}
		f := &follower{out: rec, cfg: Config{WriteTimeout: 8 * time.Second}}
		f.cfg.setDefaults()
		f.heartbeat = time.NewTimer(time.Hour)
		defer f.heartbeat.Stop()
		// 100 writes a second for 10 seconds.
		for range 1000 {
			f.buf = append(f.buf, "data: x\n\n"...)
			if err := f.flush(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		for i, at := range rec.sends {
			if left := rec.given[i].Sub(at); left < 8*time.Second || left > 9*time.Second {
				t.Fatalf("write %d had %v before its deadline, want 8s to 9s", i, left)
			}
		}
		// One move at the start, then one per second (an eighth of 8s).
		if rec.changes > 11 {
			t.Errorf("the deadline moved %d times in 1000 writes over 10s, want at most 11", rec.changes)
		}
	})
}

// A stream whose writes come more often than Heartbeat gets no heartbeat;
// once silent, it gets one Heartbeat after its last write.
func TestHeartbeatCountsFromTheLastWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := openSource{newStoredSource(0)}
		rec := &deadlineRecorder{}
		f := &follower{out: rec, cfg: Config{Heartbeat: 15 * time.Second, MaxLifetime: 100 * time.Second},
			sub: src.Subscribe(0), src: src, dense: true, kind: "test"}
		f.cfg.setDefaults()
		done := make(chan error, 1)
		go func() { done <- f.run(t.Context()) }()
		// An event every 10s for 50s, then silence until the lifetime ends.
		for seq := int64(1); seq <= 5; seq++ {
			time.Sleep(10 * time.Second)
			src.hub.Publish("k", []live.Event{{Seq: seq, Frame: []byte("data: x\n\n")}})
		}
		if err := <-done; err != nil {
			t.Fatalf("run: %v", err)
		}
		var beats []time.Duration
		start := rec.sends[0]
		for i, p := range rec.sent {
			if strings.Contains(p, ": heartbeat\n") {
				beats = append(beats, rec.sends[i].Sub(start))
			}
		}
		// Heartbeats at 65s, 80s and 95s (the last event came at 50s).
		want := []time.Duration{65 * time.Second, 80 * time.Second, 95 * time.Second}
		if len(beats) != len(want) {
			t.Fatalf("heartbeats at %v, want at %v", beats, want)
		}
		for i := range want {
			if beats[i] != want[i] {
				t.Fatalf("heartbeats at %v, want at %v", beats, want)
			}
		}
	})
}
