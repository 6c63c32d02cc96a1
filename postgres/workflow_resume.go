package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

// Resume consumes the token whose hash is p.Hash and appends p.Events,
// storing p.NodeOutputs, in one transaction that holds the run's row lock.
// The consume is one compare-and-set statement; the token is judged
// before the run (see the workflowtest package doc), and a refused call
// consumes, appends and stores nothing.
func (s *WorkflowStore) Resume(ctx context.Context, p workflow.ResumeParams) ([]workflow.Envelope, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := storableEvents(p.Events); err != nil {
		return nil, err
	}
	if err := storableNodeOutputs(p.NodeOutputs); err != nil {
		return nil, err
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	if !lookupable(p.RunID) || !ownerStorable(p.Owner) {
		return nil, workflow.RunNotFound(p.RunID)
	}
	var envs []workflow.Envelope
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		r, err := scanRun(tx.QueryRow(ctx, `SELECT `+lockedRunColumns+` FROM workflow_runs WHERE id = $1 AND `+ownerCond+` FOR UPDATE`,
			ownerArgs(p.RunID, p.Owner)...))
		if errors.Is(err, pgx.ErrNoRows) {
			return workflow.RunNotFound(p.RunID)
		}
		if err != nil {
			return err
		}
		run := &r
		at := p.Now.UTC().Truncate(time.Microsecond)
		tag, err := tx.Exec(ctx, `UPDATE workflow_resume_tokens SET consumed_at = $3
			WHERE run_id = $1 AND hash = $2 AND consumed_at IS NULL AND expires_at > $3`, p.RunID, p.Hash, at)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return unusableToken(ctx, tx, p.RunID, p.Hash)
		}
		if run.Status != workflow.StatusAwaitingInput {
			return workflow.NotAwaitingInput(p.RunID, run.Status)
		}
		var w runWrites
		envs = w.apply(run, p.Events, storeNow())
		if err := w.send(ctx, tx); err != nil {
			return err
		}
		outputs := nodeOutputs{}
		outputs.add(p.RunID, p.NodeOutputs)
		return outputs.send(ctx, tx)
	})
	if err != nil {
		return nil, txError(err, "resume")
	}
	return envs, nil
}

// unusableToken tells why the compare-and-set of a resume matched no
// token: none of the run has the hash, it was consumed, or it expired.
func unusableToken(ctx context.Context, tx pgx.Tx, runID string, hash []byte) error {
	var consumed *time.Time
	err := tx.QueryRow(ctx, `SELECT consumed_at FROM workflow_resume_tokens WHERE run_id = $1 AND hash = $2`,
		runID, hash).Scan(&consumed)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return runstream.Errorf(runstream.CodeWorkflowResumeTokenInvalid, "resume: the token does not match run %q", runID)
	case err != nil:
		return err
	case consumed != nil:
		return runstream.Errorf(runstream.CodeWorkflowResumeTokenUsed, "resume: the token of run %q was already used", runID)
	}
	return runstream.Errorf(runstream.CodeWorkflowResumeTokenExpired, "resume: the token of run %q has expired", runID)
}
