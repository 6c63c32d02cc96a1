package streams

import (
	"fmt"

	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/sse"
	"github.com/runstream/runstream/workflow"
)

// WorkflowStreamKey is the hub key of a workflow run's stream.
func WorkflowStreamKey(runID string) string { return "workflow:" + runID }

// WorkflowFrames appends the live events of envs to dst.
func WorkflowFrames(dst []live.Event, envs []workflow.Envelope) ([]live.Event, error) {
	for _, env := range envs {
		ev, err := WorkflowFrame(env)
		if err != nil {
			return dst, err
		}
		dst = append(dst, ev)
	}
	return dst, nil
}

// WorkflowFrame renders a stored envelope as a live event with its SSE
// frame: id = seq, event = type, data = the envelope on one line.
func WorkflowFrame(env workflow.Envelope) (live.Event, error) {
	frame, err := AppendWorkflowFrame(make([]byte, 0, 320+len(env.Data)), env)
	if err != nil {
		return live.Event{}, err
	}
	return live.Event{Seq: env.Seq, Frame: frame, Terminal: env.Event.Terminal()}, nil
}

// AppendWorkflowFrame appends the SSE frame of a stored envelope to dst:
// id = seq, event = type, data = the envelope on one line, written in
// place (sse.AppendSeqFrame).
func AppendWorkflowFrame(dst []byte, env workflow.Envelope) ([]byte, error) {
	if !env.Event.Known() {
		return dst, fmt.Errorf("frame seq %d: unknown event %q", env.Seq, env.Event)
	}
	dst, err := sse.AppendSeqFrame(dst, env.Seq, string(env.Event), func(b []byte) ([]byte, error) {
		// Stored data is compact (prepare compacts it).
		return env.AppendStoredJSON(b), nil
	})
	if err != nil {
		return dst, fmt.Errorf("frame seq %d: %w", env.Seq, err)
	}
	return dst, nil
}
