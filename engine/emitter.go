package engine

import (
	"context"
	"encoding/json"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/workflow"
)

// Delta coalescing defaults and bounds (the protocol asks for 30–100 ms).
const (
	DefaultDeltaWindow   = 50 * time.Millisecond
	MinDeltaWindow       = 30 * time.Millisecond
	MaxDeltaWindow       = 100 * time.Millisecond
	DefaultDeltaMaxBytes = 1 << 10
	// maxDeltaChunk bounds the text of one stored delta, far below the
	// event size limit: longer text is split at a rune boundary.
	maxDeltaChunk = 64 << 10
)

// emitter writes the events of one run through the event log, fenced by
// the run's lease, and coalesces node.output.delta: deltas are merged per
// (node attempt, channel) and written when the oldest pending one is
// window old, when one channel holds maxBytes, or before any other event of
// the run, so the stored order is the order of the calls.
//
// After its first failed append (the lease was lost, the run ended
// elsewhere, the store failed) or after halt, the emitter writes nothing
// more and every call returns that error.
type emitter struct {
	log      *eventlog.WorkflowLog
	runID    string
	owner    string
	window   time.Duration
	maxBytes int
	// flushCtx bounds the appends of timer-driven flushes, which have no
	// caller; it is the run's writing context.
	flushCtx context.Context
	// onHalt is told of the first write failure, under the emitter's
	// mutex: it must not block or call the emitter.
	onHalt func(error)

	mu      sync.Mutex
	pending []*pendingDelta
	timer   *time.Timer
	// gen counts flushes, so a timer that fires after the flush it was
	// armed for does nothing.
	gen uint64
	err error
}

type pendingDelta struct {
	nodeID, nodeRunID, channel string
	text                       []byte
}

// delta queues text for (nodeID, nodeRunID, channel).
func (em *emitter) delta(ctx context.Context, nodeID, nodeRunID, channel, text string) error {
	em.mu.Lock()
	defer em.mu.Unlock()
	if em.err != nil {
		return em.err
	}
	if err := ctx.Err(); err != nil {
		return err // the caller's attempt ended; the run's writing goes on
	}
	for text != "" {
		chunk := text
		if len(chunk) > maxDeltaChunk {
			cut := maxDeltaChunk
			for cut > 0 && !utf8.RuneStart(chunk[cut]) {
				cut--
			}
			chunk = chunk[:cut]
		}
		text = text[len(chunk):]
		p := em.pendingFor(nodeID, nodeRunID, channel)
		p.text = append(p.text, chunk...)
		if len(p.text) >= em.maxBytes {
			if err := em.flushLocked(nil, workflow.AppendParams{}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (em *emitter) pendingFor(nodeID, nodeRunID, channel string) *pendingDelta {
	for _, p := range em.pending {
		if p.nodeID == nodeID && p.nodeRunID == nodeRunID && p.channel == channel {
			return p
		}
	}
	p := &pendingDelta{nodeID: nodeID, nodeRunID: nodeRunID, channel: channel}
	em.pending = append(em.pending, p)
	if len(em.pending) == 1 {
		gen := em.gen
		em.timer = time.AfterFunc(em.window, func() { em.timerFlush(gen) })
	}
	return p
}

func (em *emitter) timerFlush(gen uint64) {
	em.mu.Lock()
	defer em.mu.Unlock()
	if em.gen != gen || em.err != nil {
		return
	}
	em.flushLocked(nil, workflow.AppendParams{})
}

// emit appends events, after the pending deltas, in one batch. p carries
// what the batch stores besides events (resume token, node outputs);
// its RunID, Events and LeaseOwner are set here.
//
// ctx is the caller's: when it is done the batch is not written and its
// error returned, without stopping the run's writing (a node's attempt may
// end, by its timeout or a cancel, while the run goes on). The append
// itself runs under the run's writing context, so a node's context that
// ends during the append cannot make a committed write look failed.
func (em *emitter) emit(ctx context.Context, p workflow.AppendParams, events ...workflow.NewEvent) error {
	em.mu.Lock()
	defer em.mu.Unlock()
	if em.err != nil {
		return em.err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return em.flushLocked(events, p)
}

// flushLocked appends the pending deltas followed by events.
func (em *emitter) flushLocked(events []workflow.NewEvent, p workflow.AppendParams) error {
	em.gen++
	if em.timer != nil {
		em.timer.Stop()
		em.timer = nil
	}
	batch := make([]workflow.NewEvent, 0, len(em.pending)+len(events))
	for _, d := range em.pending {
		data, err := json.Marshal(struct {
			Channel string `json:"channel"`
			Delta   string `json:"delta"`
		}{d.channel, string(d.text)})
		if err != nil {
			return em.failLocked(err)
		}
		batch = append(batch, workflow.NewEvent{Event: workflow.EventNodeOutputDelta, NodeID: d.nodeID, NodeRunID: d.nodeRunID, Data: data})
	}
	em.pending = em.pending[:0]
	batch = append(batch, events...)
	if len(batch) == 0 {
		return nil
	}
	p.RunID, p.Events, p.LeaseOwner = em.runID, batch, em.owner
	if em.flushCtx.Err() != nil {
		return em.failLocked(context.Cause(em.flushCtx))
	}
	if _, err := em.log.Append(em.flushCtx, p); err != nil {
		return em.failLocked(err)
	}
	return nil
}

func (em *emitter) failLocked(err error) error {
	if em.err == nil {
		em.err = err
		em.pending = nil
		if em.onHalt != nil {
			em.onHalt(err)
		}
	}
	return em.err
}

// halt stops all writing and drops pending deltas; later calls return err.
func (em *emitter) halt(err error) {
	em.mu.Lock()
	defer em.mu.Unlock()
	if em.err == nil {
		em.err = err
	}
	em.pending = nil
	em.gen++
	if em.timer != nil {
		em.timer.Stop()
		em.timer = nil
	}
}
