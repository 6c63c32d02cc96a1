package engine

import "time"

// Observer is told what the engine does, for metrics. Its methods are
// called from the engine's goroutines and must be quick. A nil
// Config.Observer observes nothing.
type Observer interface {
	// Claimed is called for each run the engine claims, with the status
	// the run had: "queued" for a run that starts, "running" or
	// "cancelling" for a run taken over (another worker's lease expired
	// or was released: a crash, a shutdown, a resume after input).
	Claimed(status string)
	// LeaseRenewed is called after each lease renewal: err is nil when
	// it was renewed.
	LeaseRenewed(err error)
	// NodeAttempted is called after each attempt of a node of type
	// nodeType: outcome is "completed", "failed", "parked" (it awaits
	// input) or "stopped" (the run was cancelled, lost or yielded).
	NodeAttempted(nodeType, outcome string, elapsed time.Duration)
	// NodeRetried is called once for each failed attempt that will be
	// retried, by the engine that writes its node.failed: when the
	// attempt fails, when a graceful shutdown interrupts it, or when the
	// engine that takes the run over finds it lost with its worker.
	NodeRetried(nodeType string)
}

type nopObserver struct{}

func (nopObserver) Claimed(string)                              {}
func (nopObserver) LeaseRenewed(error)                          {}
func (nopObserver) NodeAttempted(string, string, time.Duration) {}
func (nopObserver) NodeRetried(string)                          {}
