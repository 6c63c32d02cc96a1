package streams

import (
	"context"
	"fmt"
	"strings"

	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/workflow"
)

// PollPage is the number of events one poll reads per stream.
const PollPage = 500

// Poller returns the hub's poll function for workflow streams: it reads a
// page of a stream's stored events after a seq, by stream key.
func Poller(workflows workflow.Store) live.PollFunc { return StreamPoller(workflows, nil) }

// StreamPoller returns the hub's poll function for workflow keys
// ("workflow:<run>", read from workflows) and thread keys (ThreadStream
// keys, read from threads with the owner and filters of the key). A nil
// store refuses its keys.
func StreamPoller(workflows workflow.Store, threads runevents.ThreadReader) live.PollFunc {
	return func(ctx context.Context, key string, after int64) ([]live.Event, error) {
		if strings.HasPrefix(key, "thread:") && threads != nil {
			return pollThread(ctx, threads, key, after)
		}
		runID, ok := strings.CutPrefix(key, "workflow:")
		if !ok || workflows == nil {
			return nil, fmt.Errorf("poll: unknown stream key %q", key)
		}
		envs, err := workflows.ListEvents(ctx, runID, after, PollPage)
		if err != nil {
			return nil, fmt.Errorf("poll %s: %w", key, err)
		}
		events, err := WorkflowFrames(make([]live.Event, 0, len(envs)), envs)
		if err != nil {
			return nil, fmt.Errorf("poll %s: %w", key, err)
		}
		return events, nil
	}
}

// Kinds of streams, as metrics label them (KindOf, ssestream.Source).
const (
	KindWorkflow = "workflow"
	KindThread   = "thread"
)

// KindOf returns the kind of a hub key: KindWorkflow, KindThread, or
// "other" for a key of neither form. It never returns part of the key.
func KindOf(key string) string {
	switch {
	case strings.HasPrefix(key, "workflow:"):
		return KindWorkflow
	case strings.HasPrefix(key, "thread:"):
		return KindThread
	}
	return "other"
}
