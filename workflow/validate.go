package workflow

import "github.com/runstream/runstream"

// MaxIDBytes is the longest id (workflow, version, run, owner, artifact) a
// store accepts on write. Every backend enforces it, so an id that one
// store takes every store takes.
const MaxIDBytes = 128

// CheckIDLength rejects, with CodeInvalidArgument, an id longer than
// MaxIDBytes. op and name say which call and which id, for the message.
func CheckIDLength(op, name, id string) error {
	if len(id) > MaxIDBytes {
		return runstream.Errorf(runstream.CodeInvalidArgument, "%s: %s is longer than %d bytes", op, name, MaxIDBytes)
	}
	return nil
}

// Validate rejects, with CodeInvalidArgument, append arguments that are
// wrong whatever the run's state: the events (CheckEvents), the node
// outputs (CheckNodeOutputs), a resume token of another run or without hash
// or expiry, and artifacts without id, with a too long id, of another run,
// or given twice. Every backend calls it before it touches the run.
func (p AppendParams) Validate() error {
	if err := CheckEvents(p.Events); err != nil {
		return err
	}
	if err := CheckNodeOutputs(p.NodeOutputs); err != nil {
		return err
	}
	if p.IfStatus != "" && !p.IfStatus.Valid() {
		return runstream.Errorf(runstream.CodeInvalidArgument, "append: ifStatus %q is not a run status", p.IfStatus)
	}
	if t := p.ResumeToken; t != nil {
		switch {
		case t.RunID != "" && t.RunID != p.RunID:
			return runstream.Errorf(runstream.CodeInvalidArgument, "append: resume token of run %q given for run %q", t.RunID, p.RunID)
		case len(t.Hash) == 0:
			return runstream.Errorf(runstream.CodeInvalidArgument, "append: resume token has no hash")
		case t.ExpiresAt.IsZero():
			return runstream.Errorf(runstream.CodeInvalidArgument, "append: resume token has no expiry")
		}
	}
	seen := make(map[string]bool, len(p.Artifacts))
	for i, a := range p.Artifacts {
		switch {
		case a.ID == "":
			return runstream.Errorf(runstream.CodeInvalidArgument, "append: artifacts[%d]: id is required", i)
		case len(a.ID) > MaxIDBytes:
			return runstream.Errorf(runstream.CodeInvalidArgument, "append: artifacts[%d]: id is longer than %d bytes", i, MaxIDBytes)
		case a.RunID != "" && a.RunID != p.RunID:
			return runstream.Errorf(runstream.CodeInvalidArgument, "append: artifacts[%d]: of run %q given for run %q", i, a.RunID, p.RunID)
		case seen[a.ID]:
			return runstream.Errorf(runstream.CodeInvalidArgument, "append: artifacts[%d]: id %q given twice", i, a.ID)
		}
		seen[a.ID] = true
	}
	return nil
}
