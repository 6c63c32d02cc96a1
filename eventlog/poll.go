package eventlog

import (
	"context"
	"fmt"
	"strings"

	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/workflow"
)

// PollPage is the number of events one poll reads per stream.
const PollPage = 500

// Poller returns the hub's poll function: it reads a page of a stream's
// stored events after a seq, by stream key.
func Poller(workflows workflow.Store) live.PollFunc {
	return func(ctx context.Context, key string, after int64) ([]live.Event, error) {
		runID, ok := strings.CutPrefix(key, "workflow:")
		if !ok {
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
