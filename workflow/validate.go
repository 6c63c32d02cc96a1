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

// CheckNewRun rejects, with CodeInvalidArgument, the arguments of
// Store.CreateRun that are wrong whatever is stored: a run without id or
// owner, with an id or owner longer than MaxIDBytes, or with a status that
// is not a run status ("" is queued), and first events that CheckEvents
// refuses. Every backend calls it before it writes.
func CheckNewRun(r Run, events []NewEvent) error {
	const op = "create run"
	switch {
	case r.ID == "":
		return runstream.Errorf(runstream.CodeInvalidArgument, "%s: id is required", op)
	case r.OwnerID == "":
		return runstream.Errorf(runstream.CodeInvalidArgument, "%s: owner is required", op)
	case r.Status != "" && !r.Status.Valid():
		return runstream.Errorf(runstream.CodeInvalidArgument, "%s: unknown status %q", op, r.Status)
	}
	if err := CheckIDLength(op, "id", r.ID); err != nil {
		return err
	}
	if err := CheckIDLength(op, "owner", r.OwnerID); err != nil {
		return err
	}
	if len(events) > 0 {
		return CheckEvents(events)
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

// MaxListLimit is the largest page a listing of workflows or runs returns.
const MaxListLimit = 1000

// checkList rejects, with CodeInvalidArgument, a listing without a valid
// owner or with a limit outside 1..MaxListLimit.
func checkList(owner runstream.Owner, limit int) error {
	if err := runstream.CheckOwner(owner); err != nil {
		return err
	}
	if limit < 1 || limit > MaxListLimit {
		return runstream.Errorf(runstream.CodeInvalidArgument, "limit %d is outside 1..%d", limit, MaxListLimit)
	}
	return nil
}

// Validate rejects, with CodeInvalidArgument, a listing without a valid
// owner or with a limit outside 1..MaxListLimit. Every backend calls it
// before it reads.
func (p ListWorkflowsParams) Validate() error {
	return checkList(p.Owner, p.Limit)
}

// Validate rejects, with CodeInvalidArgument, what ListWorkflowsParams's
// Validate rejects and a status filter that is not a run status. Every
// backend calls it before it reads.
func (p ListRunsParams) Validate() error {
	if err := checkList(p.Owner, p.Limit); err != nil {
		return err
	}
	if p.Status != "" && !p.Status.Valid() {
		return runstream.Errorf(runstream.CodeInvalidArgument, "list runs: unknown status %q", p.Status)
	}
	return nil
}

// Validate rejects, with CodeInvalidArgument, resume arguments that are
// wrong whatever the run and its token: an invalid owner, no time of
// request, and events or node outputs that CheckEvents or CheckNodeOutputs
// refuse. Every backend calls it before it touches the run, so a refused
// call consumes nothing.
func (p ResumeParams) Validate() error {
	if err := runstream.CheckOwner(p.Owner); err != nil {
		return err
	}
	if p.Now.IsZero() {
		return runstream.Errorf(runstream.CodeInvalidArgument, "resume: the time of the request is required")
	}
	if err := CheckEvents(p.Events); err != nil {
		return err
	}
	return CheckNodeOutputs(p.NodeOutputs)
}

// CheckEventPage rejects, with CodeInvalidArgument, the page of a
// Store.ListEvents call with a negative cursor or a limit outside
// 1..MaxEventPageLimit. Every backend calls it before it reads.
func CheckEventPage(afterSeq int64, limit int) error {
	if afterSeq < 0 {
		return runstream.Errorf(runstream.CodeInvalidArgument, "list events: afterSeq %d is negative", afterSeq)
	}
	if limit < 1 || limit > MaxEventPageLimit {
		return runstream.Errorf(runstream.CodeInvalidArgument, "list events: limit %d is outside 1..%d", limit, MaxEventPageLimit)
	}
	return nil
}
