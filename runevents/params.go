package runevents

import (
	"sort"

	"github.com/runstream/runstream"
)

// Validate checks p: thread id, owner, positive limit.
func (p ListMessagesParams) Validate() error {
	return firstError(ValidateID("thread_id", p.ThreadID), CheckOwner(p.Owner), CheckLimit(p.Limit))
}

// Validate checks p: thread and run ids, owner, positive limit.
func (p ListMessagesByRunParams) Validate() error {
	return firstError(ValidateID("thread_id", p.ThreadID), ValidateID("run_id", p.RunID), CheckOwner(p.Owner), CheckLimit(p.Limit))
}

// Validate checks p: thread and run ids, owner, positive limit.
func (p ListEventsParams) Validate() error {
	return firstError(ValidateID("thread_id", p.ThreadID), ValidateID("run_id", p.RunID), CheckOwner(p.Owner), CheckLimit(p.Limit))
}

// Validate checks p: thread id, every run id, owner.
func (p LastVisibleAIParams) Validate() error {
	errs := []error{ValidateID("thread_id", p.ThreadID), CheckOwner(p.Owner)}
	for _, id := range p.RunIDs {
		errs = append(errs, ValidateID("run_id", id))
	}
	return firstError(errs...)
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Window applies the cursor rules of the package doc to rows that are
// ascending by seq and already filtered: it keeps AfterSeq < seq <
// BeforeSeq, then the first limit rows when after is set, else the last
// limit rows. It returns a sub-slice of rows.
func Window(rows []Record, after, before *int64, limit int) []Record {
	lo, hi := 0, len(rows)
	if after != nil {
		lo = sort.Search(len(rows), func(i int) bool { return rows[i].Seq > *after })
	}
	if before != nil {
		hi = sort.Search(len(rows), func(i int) bool { return rows[i].Seq >= *before })
	}
	if hi < lo {
		hi = lo
	}
	rows = rows[lo:hi]
	if len(rows) <= limit {
		return rows
	}
	if after != nil {
		return rows[:limit]
	}
	return rows[len(rows)-limit:]
}

func runstreamInvalid(msg string) error {
	return runstream.Errorf(runstream.CodeInvalidArgument, "%s", msg)
}
