package sqlite

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

// CreateRun stores r and appends its first events, in one transaction.
// The workflow must be the run owner's (else CodeWorkflowNotFound) and the
// version the workflow's (else CodeWorkflowVersionNotFound).
func (s *WorkflowStore) CreateRun(ctx context.Context, r workflow.Run, events []workflow.NewEvent) (workflow.Run, []workflow.Envelope, error) {
	if err := workflow.CheckNewRun(r, events); err != nil {
		return workflow.Run{}, nil, err
	}
	now := storeNow()
	r = cloneRun(r)
	r.Status = cmp.Or(r.Status, workflow.StatusQueued)
	r.LastSeq = 0
	r.CreatedAt = orNow(r.CreatedAt, now)
	r.UpdatedAt = orNow(r.UpdatedAt, r.CreatedAt)
	r.StartedAt, r.FinishedAt, r.LeaseExpiresAt = truncated(r.StartedAt), truncated(r.FinishedAt), truncated(r.LeaseExpiresAt)
	events = cloneEvents(events)

	var (
		out  workflow.Run
		envs []workflow.Envelope
	)
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := s.checkWorkflowOwner(ctx, tx, r.WorkflowID, runstream.OwnedBy(r.OwnerID)); err != nil {
			return err
		}
		var versionOf string
		err := tx.StmtContext(ctx, s.versionWorkflow).QueryRowContext(ctx, r.VersionID).Scan(&versionOf)
		switch {
		case errors.Is(err, sql.ErrNoRows) || err == nil && versionOf != r.WorkflowID:
			return runstream.Errorf(runstream.CodeWorkflowVersionNotFound, "workflow %q has no version %q", r.WorkflowID, r.VersionID)
		case err != nil:
			return sqlError("sqlite: create run: look up version", err)
		}
		// The row is inserted as the events leave it, before them (they
		// reference it).
		out = r
		envs = placeEvents(&out, events, now)
		ok, err := execChanged(ctx, tx, s.insertRun, "sqlite: create run",
			out.ID, out.WorkflowID, out.VersionID, out.OwnerID, string(out.Status),
			nullJSON(out.Input), nullJSON(out.Output), nullJSON(out.Error), out.LastSeq,
			micros(out.CreatedAt), micros(out.UpdatedAt), nullMicros(out.StartedAt), nullMicros(out.FinishedAt),
			out.LeaseOwner, nullMicros(out.LeaseExpiresAt))
		if err != nil {
			return err
		}
		if !ok {
			return runstream.Errorf(runstream.CodeConflict, "create run: run %q exists", r.ID)
		}
		return s.insertEnvelopes(ctx, tx, envs)
	})
	if err != nil {
		return workflow.Run{}, nil, err
	}
	return cloneRun(out), envs, nil
}

// Append appends p.Events to a run, all or nothing, with the resume token,
// artifacts and node outputs of the batch. It checks its arguments, then the run
// (CodeWorkflowRunNotFound), the lease and terminal state (CodeConflict),
// and artifact ids the run already has (CodeConflict).
func (s *WorkflowStore) Append(ctx context.Context, p workflow.AppendParams) ([]workflow.Envelope, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	now := storeNow()
	events := cloneEvents(p.Events)
	var tokenArgs []any
	if t := p.ResumeToken; t != nil {
		actions, err := json.Marshal(nonNil(t.Actions))
		if err != nil {
			return nil, runstream.Wrap(err, runstream.CodeInvalidArgument, "append: resume token actions")
		}
		tokenArgs = []any{p.RunID, bytes.Clone(t.Hash), t.NodeID, t.NodeRunID, string(actions),
			nullJSON(t.FormSchema), micros(truncated(t.ExpiresAt))}
	}
	artifactArgs := make([][]any, len(p.Artifacts))
	for i, a := range p.Artifacts {
		artifactArgs[i] = []any{p.RunID, a.ID, a.NodeID, a.Name, a.MimeType, a.SizeBytes, a.SHA256, micros(orNow(a.CreatedAt, now))}
	}
	outputs := nodeOutputRows(p.NodeOutputs)

	var envs []workflow.Envelope
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		run, err := s.lockedRun(ctx, tx, p.RunID, runstream.AnyOwner)
		if err != nil {
			return err
		}
		if err := p.Accepts(run); err != nil {
			return err
		}
		for i, args := range artifactArgs {
			ok, err := execChanged(ctx, tx, s.insertArtifact, "sqlite: append: insert artifact", args...)
			if err != nil {
				return err
			}
			if !ok {
				return runstream.Errorf(runstream.CodeConflict, "append: run %q has an artifact %q", p.RunID, p.Artifacts[i].ID)
			}
		}
		if tokenArgs != nil {
			if _, err := execChanged(ctx, tx, s.dropPendingTokens, "sqlite: append: replace resume token", p.RunID); err != nil {
				return err
			}
			if _, err := execChanged(ctx, tx, s.putToken, "sqlite: append: insert resume token", tokenArgs...); err != nil {
				return err
			}
		}
		if err := putNodeOutputs(ctx, tx, p.RunID, outputs); err != nil {
			return err
		}
		envs, err = s.appendLocked(ctx, tx, &run, events, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return envs, nil
}

// Resume consumes the token whose hash is p.Hash and appends p.Events, and
// stores p.NodeOutputs, in one transaction. The token is judged before the run: an unknown hash
// fails with CodeWorkflowResumeTokenInvalid, a consumed one with
// CodeWorkflowResumeTokenUsed, an expired one (p.Now >= ExpiresAt) with
// CodeWorkflowResumeTokenExpired; only a usable token on a run that is not
// awaiting input fails with CodeWorkflowRunNotAwaitingInput. A failed call
// consumes nothing and appends nothing.
//
// The consume is one compare-and-set statement; the hash is compared by
// the primary key's index, which reveals nothing useful about a token, as
// the hash of a guess cannot be steered.
func (s *WorkflowStore) Resume(ctx context.Context, p workflow.ResumeParams) ([]workflow.Envelope, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	now := storeNow()
	at := micros(truncated(p.Now))
	events := cloneEvents(p.Events)
	outputs := nodeOutputRows(p.NodeOutputs)
	hash := p.Hash
	if hash == nil {
		hash = []byte{} // never stored: Append requires a hash
	}

	var envs []workflow.Envelope
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		run, err := s.lockedRun(ctx, tx, p.RunID, p.Owner)
		if err != nil {
			return err
		}
		consumed, err := execChanged(ctx, tx, s.consumeToken, "sqlite: resume: consume token", at, p.RunID, hash, at)
		if err != nil {
			return err
		}
		if !consumed {
			return s.tokenRefused(ctx, tx, p.RunID, hash)
		}
		if run.Status != workflow.StatusAwaitingInput {
			return workflow.NotAwaitingInput(p.RunID, run.Status)
		}
		if err := putNodeOutputs(ctx, tx, p.RunID, outputs); err != nil {
			return err
		}
		envs, err = s.appendLocked(ctx, tx, &run, events, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return envs, nil
}

// tokenRefused tells why no token of the run with hash could be consumed.
func (s *WorkflowStore) tokenRefused(ctx context.Context, tx *sql.Tx, runID string, hash []byte) error {
	var used bool
	err := tx.StmtContext(ctx, s.tokenUsed).QueryRowContext(ctx, runID, hash).Scan(&used)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return runstream.Errorf(runstream.CodeWorkflowResumeTokenInvalid, "resume: the token does not match run %q", runID)
	case err != nil:
		return sqlError("sqlite: resume: look up token", err)
	case used:
		return runstream.Errorf(runstream.CodeWorkflowResumeTokenUsed, "resume: the token of run %q was already used", runID)
	}
	return runstream.Errorf(runstream.CodeWorkflowResumeTokenExpired, "resume: the token of run %q has expired", runID)
}

// lockedRun reads the run row, without its input, in a write transaction,
// which holds the database's write lock until it ends: the row, and so the
// run's seq counter, cannot change under the caller. A run owner does not
// see is not found, as a missing one is.
func (s *WorkflowStore) lockedRun(ctx context.Context, tx *sql.Tx, id string, owner runstream.Owner) (workflow.Run, error) {
	r, err := scanRun(tx.StmtContext(ctx, s.lockRun).QueryRowContext(ctx, ownerArgs(id, owner)...))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return workflow.Run{}, workflow.RunNotFound(id)
	case err != nil:
		return workflow.Run{}, sqlError("sqlite: look up run", err)
	}
	return r, nil
}

// appendLocked appends checked events to r, read by lockedRun in tx, and
// writes back the run row they leave.
func (s *WorkflowStore) appendLocked(ctx context.Context, tx *sql.Tx, r *workflow.Run, events []workflow.NewEvent, now time.Time) ([]workflow.Envelope, error) {
	envs := placeEvents(r, events, now)
	if err := s.insertEnvelopes(ctx, tx, envs); err != nil {
		return nil, err
	}
	_, err := execChanged(ctx, tx, s.updateRun, "sqlite: append: update run",
		string(r.Status), nullJSON(r.Output), nullJSON(r.Error), r.LastSeq,
		micros(r.UpdatedAt), nullMicros(r.StartedAt), nullMicros(r.FinishedAt),
		r.LeaseOwner, nullMicros(r.LeaseExpiresAt), r.ID)
	if err != nil {
		return nil, err
	}
	return envs, nil
}

// placeEvents builds the envelopes of events at the next seqs of r and
// applies them to r.
func placeEvents(r *workflow.Run, events []workflow.NewEvent, now time.Time) []workflow.Envelope {
	envs := make([]workflow.Envelope, len(events))
	for i, e := range events {
		envs[i] = workflow.NewEnvelope(*r, r.LastSeq+1, e, now)
		workflow.ApplyEvent(r, envs[i])
	}
	return envs
}

func (s *WorkflowStore) insertEnvelopes(ctx context.Context, tx *sql.Tx, envs []workflow.Envelope) error {
	if len(envs) == 0 {
		return nil
	}
	insert := tx.StmtContext(ctx, s.insertEvent)
	for _, e := range envs {
		_, offset := e.Timestamp.Zone()
		if _, err := insert.ExecContext(ctx, e.RunID, e.Seq, string(e.Event), e.NodeID, e.NodeRunID,
			micros(e.Timestamp), offset, string(e.Data)); err != nil {
			return sqlError("sqlite: append: insert event", err)
		}
	}
	return nil
}

// cloneEvents copies the events' data, so that the envelopes returned do
// not share memory with the caller's arguments.
func cloneEvents(events []workflow.NewEvent) []workflow.NewEvent {
	out := make([]workflow.NewEvent, len(events))
	for i, e := range events {
		e.Data = bytes.Clone(e.Data)
		out[i] = e
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
