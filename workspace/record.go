package workspace

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/runstream/runstream/runevents"
)

// Appender appends a batch of events of one thread (journal.Sink and the
// remote producer's sink are Appenders).
type Appender interface {
	Append(ctx context.Context, events []runevents.NewEvent) error
}

// Record compares the roots with the pre-run snapshot before and, when
// something changed, appends the run's workspace_changes event: content
// Summary.String(), metadata {"workspace_changes": Changes}. It scans twice
// (reference §5.7): metadata first, then the text of the changed paths
// only. It returns the changes (zero when nothing changed) and whether an
// event was appended. before is closed in every case, its cache removed.
func Record(ctx context.Context, app Appender, threadID, runID string, cfg Config, before *Snapshot) (Changes, bool, error) {
	defer before.Close()
	c := cfg.prepared()
	meta, err := c.scan(ctx, textMode{})
	if err != nil {
		return Changes{}, false, fmt.Errorf("workspace: record: %w", err)
	}
	changed := map[string]bool{}
	for _, p := range Changed(before, meta) {
		changed[p] = true
	}
	if len(changed) == 0 {
		return Changes{}, false, nil
	}
	after, err := c.scan(ctx, textMode{want: true, only: changed})
	if err != nil {
		return Changes{}, false, fmt.Errorf("workspace: record: %w", err)
	}
	ch := Compare(before, after, c.Limits)
	if !ch.Summary.HasChanges() {
		return ch, false, nil
	}
	content, err := json.Marshal(ch.Summary.String())
	if err != nil {
		return ch, false, err
	}
	metadata, err := json.Marshal(map[string]any{"workspace_changes": ch})
	if err != nil {
		return ch, false, err
	}
	e := runevents.NewEvent{ThreadID: threadID, RunID: runID, EventType: runevents.EventWorkspaceChanges,
		Category: runevents.CategoryWorkspace, Content: content, Metadata: metadata, CreatedAt: time.Now().UTC()}
	if err := app.Append(ctx, []runevents.NewEvent{e}); err != nil {
		return ch, false, fmt.Errorf("workspace: record: %w", err)
	}
	return ch, true, nil
}
