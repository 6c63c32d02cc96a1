package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/runstream/runstream"
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

// errConditionFailed is wrapped by the error of an append conditional on
// the run's status (AppendParams.IfStatus) that the store refused with
// CodeConflict: the run's status is not the one required (its
// cancellation was requested), or its lease was lost, or it ended. Such a
// refusal does not halt the emitter; the caller decides what follows.
var errConditionFailed = errors.New("the conditional append was refused")

// emitter writes the events of one run through the event log, fenced by
// the run's lease, and coalesces node.output.delta: deltas are merged per
// (node attempt, channel) and written when the oldest pending one is
// window old, when one channel holds maxBytes, or before any other event of
// the run, so the stored order is the order of the calls. The one
// exception: the word a channel is writing waits for the text after it
// (deltatext.go), past other events, until its attempt ends, parks for
// input, or the run ends.
//
// After its first failed append (the lease was lost, the run ended
// elsewhere, the store failed) or after halt, the emitter writes nothing
// more and every call returns that error. The one exception is a
// conditional append refused with CodeConflict (errConditionFailed): it
// writes nothing and the emitter goes on.
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
	// streams keeps, per (node attempt, channel), what its text needs
	// across writes so that no secret is cut in two (deltatext.go).
	streams map[deltaKey]*deltaStream
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

// delta queues text for (nodeID, nodeRunID, channel). The text is made
// valid UTF-8 first: each run of invalid bytes becomes one U+FFFD (so a
// rune split across two calls is not joined again).
func (em *emitter) delta(ctx context.Context, nodeID, nodeRunID, channel, text string) error {
	em.mu.Lock()
	defer em.mu.Unlock()
	if em.err != nil {
		return em.err
	}
	if err := ctx.Err(); err != nil {
		return err // the caller's attempt ended; the run's writing goes on
	}
	// Invalid text may hold no rune start to cut a chunk at, and JSON
	// encoding would turn each of its bytes into a six-byte \ufffd escape.
	// Valid UTF-8 has a rune start among any utf8.UTFMax consecutive
	// bytes, so the cut below finds one in the chunk's last utf8.UTFMax
	// bytes, and the stored deltas join to the text.
	text = strings.ToValidUTF8(text, "\uFFFD")
	for text != "" {
		chunk := text
		if len(chunk) > maxDeltaChunk {
			// Bounded so that cut stays near maxDeltaChunk: every chunk
			// makes progress, whatever the text.
			cut := maxDeltaChunk
			for cut > maxDeltaChunk-utf8.UTFMax+1 && !utf8.RuneStart(chunk[cut]) {
				cut--
			}
			chunk = chunk[:cut]
		}
		text = text[len(chunk):]
		p := em.pendingFor(nodeID, nodeRunID, channel)
		p.text = append(p.text, chunk...)
		if len(p.text) >= em.maxBytes {
			if err := em.flushLocked(nil, workflow.AppendParams{}, false); err != nil {
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
	em.flushLocked(nil, workflow.AppendParams{}, false)
}

// emit appends events, after the pending deltas, in one batch; with no
// events it writes every delta pending or held. p carries
// what the batch stores besides events (resume token, node outputs, a
// status condition); its RunID, Events and LeaseOwner are set here.
//
// When p.IfStatus is set, the pending deltas are appended first in a batch
// of their own, without the condition, and the events follow in a
// conditional batch: a refusal of the events (an error wrapping
// errConditionFailed) then loses no delta and does not halt the emitter.
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
	return em.flushLocked(events, p, len(events) == 0)
}

// flushLocked appends the pending deltas followed by events (see emit for
// a conditional p). The deltas of an attempt that events end (of every
// attempt when the run ends, or when all is set) are written whole; the
// others hold back the word that may still grow (deltaStream).
func (em *emitter) flushLocked(events []workflow.NewEvent, p workflow.AppendParams, all bool) error {
	deltas, err := em.takeDeltasLocked(events, all)
	if err != nil {
		return em.failLocked(err)
	}
	if p.IfStatus != "" && len(deltas) > 0 {
		if err := em.appendLocked(deltas, workflow.AppendParams{}); err != nil {
			return err
		}
		deltas = nil
	}
	return em.appendLocked(append(deltas, events...), p)
}

// takeDeltasLocked empties the pending deltas into node.output.delta
// events: what each (node attempt, channel) may write now, and the whole
// held text of the attempts that events end.
func (em *emitter) takeDeltasLocked(events []workflow.NewEvent, all bool) ([]workflow.NewEvent, error) {
	em.gen++
	if em.timer != nil {
		em.timer.Stop()
		em.timer = nil
	}
	// The end of an attempt (or of the run) writes its held text, before
	// the event that ends it, and forgets its streams. Its other events
	// (progress, tools) let a held word wait: writing it would cut it.
	runEnds := all
	ended := map[string]bool{}
	for _, e := range events {
		switch {
		case e.Event.Terminal():
			runEnds = true
		case e.Event == workflow.EventNodeCompleted, e.Event == workflow.EventNodeFailed, e.Event == workflow.EventRunAwaitingInput:
			// An attempt that parks for input writes its text too: the
			// prompt's last word comes before the form.
			ended[e.NodeRunID] = true
		}
	}
	whole := func(k deltaKey) bool { return runEnds || ended[k.nodeRunID] }
	var batch []workflow.NewEvent
	add := func(nodeID string, k deltaKey, text []byte) error {
		st := em.streams[k]
		if st == nil {
			st = &deltaStream{nodeID: nodeID}
			if em.streams == nil {
				em.streams = map[deltaKey]*deltaStream{}
			}
			em.streams[k] = st
		}
		out, ok := st.next(text, whole(k))
		if !ok {
			return nil
		}
		data, err := json.Marshal(workflow.OutputDelta{Channel: k.channel, Delta: out})
		if err != nil {
			return err
		}
		batch = append(batch, workflow.NewEvent{Event: workflow.EventNodeOutputDelta, NodeID: nodeID, NodeRunID: k.nodeRunID, Data: data})
		return nil
	}
	for _, d := range em.pending {
		if err := add(d.nodeID, deltaKey{d.nodeRunID, d.channel}, d.text); err != nil {
			return nil, err
		}
	}
	em.pending = em.pending[:0]
	// The held text of the attempts events end, which got no text since
	// the last flush.
	var rest []deltaKey
	for k, st := range em.streams {
		if whole(k) && len(st.held) > 0 {
			rest = append(rest, k)
		}
	}
	slices.SortFunc(rest, func(a, b deltaKey) int {
		return cmp.Or(cmp.Compare(a.nodeRunID, b.nodeRunID), cmp.Compare(a.channel, b.channel))
	})
	for _, k := range rest {
		if err := add(em.streams[k].nodeID, k, nil); err != nil {
			return nil, err
		}
	}
	for k := range em.streams {
		if whole(k) {
			delete(em.streams, k)
		}
	}
	return batch, nil
}

// appendLocked appends batch, with p (see emit), under the run's writing
// context.
func (em *emitter) appendLocked(batch []workflow.NewEvent, p workflow.AppendParams) error {
	if len(batch) == 0 {
		return nil
	}
	p.RunID, p.Events, p.LeaseOwner = em.runID, batch, em.owner
	if em.flushCtx.Err() != nil {
		return em.failLocked(context.Cause(em.flushCtx))
	}
	if _, err := em.log.Append(em.flushCtx, p); err != nil {
		if p.IfStatus != "" && runstream.ErrorCodeOf(err) == runstream.CodeConflict {
			return fmt.Errorf("%w: %w", errConditionFailed, err)
		}
		if runstream.ErrorCodeOf(err) == runstream.CodePayloadTooLarge {
			// The log refused the batch before storing anything: the
			// run's writing goes on, and the node that wrote the event
			// fails with the bound's error.
			return limitError(LimitEventBytes, "an event is too large: %s", runstream.AsError(err).Message)
		}
		return em.failLocked(err)
	}
	return nil
}

func (em *emitter) failLocked(err error) error {
	if em.err == nil {
		em.err = err
		em.pending, em.streams = nil, nil
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
	em.pending, em.streams = nil, nil
	em.gen++
	if em.timer != nil {
		em.timer.Stop()
		em.timer = nil
	}
}
