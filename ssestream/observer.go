package ssestream

import "time"

// Observer is told what the streams of a Set do, for metrics. kind is
// the Source's Kind. Its methods are called from the streams' goroutines
// and must be quick. A nil Config.Observer observes nothing.
type Observer interface {
	// Opened is called when a stream starts following; Closed when it
	// ends, with why: "done" (its terminal event, its lifetime, the
	// client left, a shutdown), "write_timeout" (the client did not take
	// a write within Config.WriteTimeout: a slow follower cut), or
	// "error" (a store read or a write failed).
	Opened(kind string)
	Closed(kind, reason string)
	// Wrote is called after each write to a client: frames is the number
	// of event frames in it (0 for a heartbeat), bytes its size.
	Wrote(kind string, frames, bytes int)
	// StoreRead is called after each read of the store by a follower
	// catching up (after its cursor, or after its subscription was cut).
	StoreRead(kind string, elapsed time.Duration, err error)
	// CatchUp is called when a follower reads the store instead of live
	// events: reason is "start" (the replay after the cursor), "cut"
	// (the hub cut its subscription: it fell behind) or "gap" (a live
	// event skipped a seq).
	CatchUp(kind, reason string)
}

type nopObserver struct{}

func (nopObserver) Opened(string)                          {}
func (nopObserver) Closed(string, string)                  {}
func (nopObserver) Wrote(string, int, int)                 {}
func (nopObserver) StoreRead(string, time.Duration, error) {}
func (nopObserver) CatchUp(string, string)                 {}
