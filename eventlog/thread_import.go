package eventlog

import (
	"context"
	"strconv"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/runevents"
)

// CheckImport checks and redacts the rows of one thread of another system
// exactly as Append checks a batch, except that the batch limits do not
// apply (a thread is imported whole) and each row keeps its own owner and
// seq. It returns redacted copies, or CodeValidationFailed with
// details.problems at /events/<index> for every row refused, or
// CodePayloadTooLarge naming the first row above the event size limit, as
// sent or once redacted.
func (l *ThreadLog) CheckImport(events []runevents.ImportEvent) ([]runevents.ImportEvent, error) {
	var problems []contracts.Problem
	out := make([]runevents.ImportEvent, len(events))
	for i, e := range events {
		if err := l.checkEventSize(i, e.NewEvent, ""); err != nil {
			return nil, err
		}
		problems = l.checkAndRedact(problems, "/events/"+strconv.Itoa(i), &e.NewEvent, events[0].ThreadID)
		out[i] = e
	}
	if err := problemsError(problems); err != nil {
		return nil, err
	}
	// Redaction markers may be longer than what they replace: what is
	// stored keeps to the limit too.
	for i, e := range out {
		if err := l.checkEventSize(i, e.NewEvent, " once redacted"); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ImportThread checks and redacts events with CheckImport and stores them,
// seqs kept, through the store's runevents.Importer in one transaction
// (the thread must be empty: CodeConflict otherwise), then publishes the
// stored records. A store without the capability refuses with
// CodeUnavailable.
func (l *ThreadLog) ImportThread(ctx context.Context, events []runevents.ImportEvent) ([]runevents.Record, error) {
	store, ok := l.store.(runevents.Importer)
	if !ok {
		return nil, runstream.Errorf(runstream.CodeUnavailable, "this store does not support imports")
	}
	events, err := l.CheckImport(events)
	if err != nil {
		return nil, err
	}
	ctx, err = started(ctx)
	if err != nil {
		return nil, err
	}
	recs, err := store.ImportThread(ctx, events)
	if err != nil {
		return nil, err
	}
	l.publish(recs)
	return recs, nil
}
