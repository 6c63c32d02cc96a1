package deerflowimport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/threadsvc"
)

// Target is where an import writes: runstream's stores, as serve opens
// them.
type Target struct {
	// Log imports the run events (eventlog.ThreadLog.ImportThread).
	Log *eventlog.ThreadLog
	// Threads reads what a thread holds already.
	Threads runevents.ThreadReader
	// Runs takes the run rows and feedback.
	Runs runevents.RunStore
}

// Options tune an import.
type Options struct {
	// DefaultOwner owns the rows, run rows and feedback that name no owner
	// and whose run row does not either.
	DefaultOwner string
	// SkipBadRows imports a thread without its refused rows instead of
	// leaving the thread out. The rows are reported either way.
	SkipBadRows bool
	// Progress, when not nil, gets a line every Every rows read and one
	// per phase.
	Progress io.Writer
	// Every is the number of rows between progress lines; 0 means 1000.
	Every int
}

// Summary counts what an import did. Problems lists every row it could
// not take and every conflict, with its location.
type Summary struct {
	RowsRead, Rows                             int
	Threads, ThreadsExtended, ThreadsUnchanged int
	ThreadsLeftOut                             int
	Runs, RunsUpdated, RunsUnchanged           int
	Feedback, FeedbackUnchanged                int
	Conflicts                                  int
	Problems                                   []Problem
}

// OK reports whether everything was imported or already present.
func (s Summary) OK() bool { return len(s.Problems) == 0 }

func (s Summary) String() string {
	return fmt.Sprintf("threads: %d imported, %d extended, %d unchanged, %d left out; rows: %d read, %d imported; runs: %d imported, %d updated, %d unchanged; feedback: %d imported, %d unchanged; %d conflicts, %d problems",
		s.Threads, s.ThreadsExtended, s.ThreadsUnchanged, s.ThreadsLeftOut, s.RowsRead, s.Rows, s.Runs, s.RunsUpdated, s.RunsUnchanged, s.Feedback, s.FeedbackUnchanged, s.Conflicts, len(s.Problems))
}

type importer struct {
	t        Target
	opt      Options
	sum      Summary
	owners   map[string]string // "thread/run" → owner of the run row
	reported int               // RowsRead at the last progress line
}

// Import reads every source and writes what it holds into t: first the
// run events of each thread, then the run rows, then the feedback. Each
// problem is reported to report (when not nil) as it is found and listed in
// the summary. The error is a failure of a source or of a store, which
// stops the import; what was written before stays (a later run skips it).
func Import(ctx context.Context, t Target, sources []Source, opt Options, report func(Problem)) (Summary, error) {
	if opt.Every <= 0 {
		opt.Every = 1000
	}
	im := &importer{t: t, opt: opt, owners: map[string]string{}}
	add := func(p Problem) {
		im.sum.Problems = append(im.sum.Problems, p)
		if report != nil {
			report(p)
		}
	}
	var runs []Run
	var feedback []Feedback
	for _, src := range sources {
		rs, err := src.Runs(add)
		if err != nil {
			return im.sum, err
		}
		runs = append(runs, rs...)
		fs, err := src.Feedback(add)
		if err != nil {
			return im.sum, err
		}
		feedback = append(feedback, fs...)
	}
	for _, r := range runs {
		if r.Row.OwnerID != "" {
			im.owners[r.Row.ThreadID+"/"+r.Row.RunID] = r.Row.OwnerID
		}
	}
	for _, src := range sources {
		im.progress("reading run events of the %s", src.Name())
		err := src.Threads(func(thread string, rows []Row, bad []Problem) error {
			for _, p := range bad {
				add(p)
			}
			err := im.thread(ctx, thread, rows, len(bad) > 0, add)
			im.sum.RowsRead += len(rows) + len(bad)
			if im.sum.RowsRead-im.reported >= opt.Every {
				im.reported = im.sum.RowsRead
				im.progress("%d rows read, %d imported, %d threads imported, %d unchanged", im.sum.RowsRead, im.sum.Rows, im.sum.Threads, im.sum.ThreadsUnchanged)
			}
			return err
		})
		if err != nil {
			return im.sum, err
		}
	}
	im.progress("%d run rows, %d feedback rows", len(runs), len(feedback))
	for _, r := range runs {
		if err := im.run(ctx, r, add); err != nil {
			return im.sum, err
		}
	}
	for _, f := range feedback {
		if err := im.feedback(ctx, f, add); err != nil {
			return im.sum, err
		}
	}
	return im.sum, nil
}

func (im *importer) progress(format string, args ...any) {
	if im.opt.Progress != nil {
		fmt.Fprintf(im.opt.Progress, "deerflow import: "+format+"\n", args...)
	}
}

// thread imports the rows of one thread, or finds them there already;
// unreadable reports that some of its rows could not be read.
func (im *importer) thread(ctx context.Context, id string, rows []Row, unreadable bool, add func(Problem)) error {
	for i := range rows {
		if !rows[i].Owned {
			rows[i].Event.UserID = im.ownerOf(id, rows[i].Event.RunID)
		}
	}
	at := "thread " + id
	var checked []runevents.ImportEvent
	if !unreadable || im.opt.SkipBadRows {
		var err error
		if checked, err = im.check(rows, add); err != nil {
			return err
		}
	}
	if len(checked) == 0 {
		im.sum.ThreadsLeftOut++
		add(Problem{at, errors.New("not imported: rows of it were refused (--skip-bad-rows imports the others)")})
		return nil
	}
	existing, err := im.existing(ctx, id)
	if err != nil {
		return err
	}
	if len(existing) > 0 {
		n, err := im.compare(at, existing, checked, add)
		if err != nil || n == 0 {
			return err
		}
		// The source has rows the thread gained since an import: its tail.
		checked = checked[len(checked)-n:]
	}
	recs, err := im.t.Log.ImportThread(ctx, checked)
	switch {
	case runstream.ErrorCodeOf(err) == runstream.CodeConflict:
		im.sum.Conflicts++
		add(Problem{at, err})
		return nil
	case err != nil:
		return fmt.Errorf("import %s: %w", at, err)
	}
	if len(existing) > 0 {
		im.sum.ThreadsExtended++
	} else {
		im.sum.Threads++
	}
	im.sum.Rows += len(recs)
	return nil
}

// check returns the rows' events checked and redacted, reporting refused
// rows; nil when some were refused and SkipBadRows is off (or none is
// left).
func (im *importer) check(rows []Row, add func(Problem)) ([]runevents.ImportEvent, error) {
	for {
		events := make([]runevents.ImportEvent, len(rows))
		for i, r := range rows {
			events[i] = r.Event
		}
		checked, err := im.t.Log.CheckImport(events)
		if err == nil {
			return checked, nil
		}
		bad := refused(err)
		if bad == nil {
			return nil, err
		}
		for i, msg := range bad {
			add(Problem{rows[i].Loc, fmt.Errorf("%s", msg)})
		}
		if !im.opt.SkipBadRows {
			return nil, nil
		}
		kept := rows[:0:0]
		for i, r := range rows {
			if _, ok := bad[i]; !ok {
				kept = append(kept, r)
			}
		}
		if len(kept) == 0 {
			return nil, nil
		}
		rows = kept
	}
}

// refused returns the messages of the rows err refuses, by index; nil
// when err is not about rows.
func refused(err error) map[int]string {
	e := runstream.AsError(err)
	switch e.Code {
	case runstream.CodePayloadTooLarge:
		if i, ok := e.Details["index"].(int); ok {
			_, msg, _ := strings.Cut(e.Message, "] ") // "events[i] has …"
			return map[int]string{i: "the row " + msg + " (--max-row-bytes)"}
		}
	case runstream.CodeValidationFailed:
		problems, _ := e.Details["problems"].([]contracts.Problem)
		out := map[int]string{}
		for _, p := range problems {
			rest, ok := strings.CutPrefix(p.Path, "/events/")
			if !ok {
				return nil
			}
			num, sub, _ := strings.Cut(rest, "/")
			i, err := strconv.Atoi(num)
			if err != nil {
				return nil
			}
			msg := p.Message
			if sub != "" {
				msg = "/" + sub + ": " + msg
			}
			if prev, ok := out[i]; ok {
				msg = prev + "; " + msg
			}
			out[i] = msg
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

// existing returns every row the thread holds, by seq.
func (im *importer) existing(ctx context.Context, thread string) ([]runevents.Record, error) {
	var out []runevents.Record
	var after int64
	for {
		page, err := im.t.Threads.ListThreadEvents(ctx, runevents.ListThreadEventsParams{ThreadID: thread, Owner: runevents.AnyOwner, AfterSeq: after, Limit: 1000})
		if err != nil {
			return nil, fmt.Errorf("read thread %s: %w", thread, err)
		}
		out = append(out, page...)
		if len(page) < 1000 {
			return out, nil
		}
		after = page[len(page)-1].Seq
	}
}

// compare finds a thread that holds rows already unchanged when they are
// the rows the import would store, and a conflict when they are not even
// the first of them; it returns how many rows of the source follow those
// the thread holds (its tail, to import), 0 otherwise.
func (im *importer) compare(at string, existing []runevents.Record, events []runevents.ImportEvent, add func(Problem)) (int, error) {
	want, err := runevents.PrepareImport(events, time.Now(), 0)
	if err != nil {
		return 0, fmt.Errorf("prepare %s: %w", at, err)
	}
	for i, rec := range existing {
		if i < len(want) && sameRecord(rec, want[i]) {
			continue
		}
		im.sum.Conflicts++
		add(Problem{at, fmt.Errorf("conflict: runstream holds %d rows of this thread, the source %d, first different at seq %d; left as it is", len(existing), len(want), rec.Seq)})
		return 0, nil
	}
	if len(existing) == len(want) {
		im.sum.ThreadsUnchanged++
	}
	return len(want) - len(existing), nil
}

func sameRecord(a, b runevents.Record) bool {
	return a.Seq == b.Seq && a.RunID == b.RunID && a.EventType == b.EventType && a.Category == b.Category &&
		a.UserID == b.UserID && a.CreatedAt.Equal(b.CreatedAt) && jsonEqual(a.Content, b.Content) && jsonEqual(a.Metadata, b.Metadata)
}

// jsonEqual compares two JSON texts as values.
func jsonEqual(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var va, vb any
	return json.Unmarshal(a, &va) == nil && json.Unmarshal(b, &vb) == nil && reflect.DeepEqual(va, vb)
}

func (im *importer) ownerOf(thread, run string) string {
	if o := im.owners[thread+"/"+run]; o != "" {
		return o
	}
	return im.opt.DefaultOwner
}

// run writes a run row, redacted, or finds it there already, or updates
// it when the source's is newer (updated_at later, same owner and
// creation).
func (im *importer) run(ctx context.Context, r Run, add func(Problem)) error {
	if r.Row.OwnerID == "" {
		r.Row.OwnerID = im.opt.DefaultOwner
	}
	row, err := threadsvc.RedactRun(r.Row)
	if err != nil {
		add(Problem{r.Loc, err})
		return nil
	}
	want, err := runevents.PrepareRunRow(row, time.Now())
	if err != nil {
		add(Problem{r.Loc, err})
		return nil
	}
	got, err := im.t.Runs.GetRun(ctx, want.ThreadID, want.RunID, runevents.AnyOwner)
	switch {
	case runstream.ErrorCodeOf(err) == runstream.CodeNotFound:
		if _, err := im.t.Runs.PutRun(ctx, want); err != nil {
			if runstream.ErrorCodeOf(err) == runstream.CodeInvalidArgument {
				add(Problem{r.Loc, err})
				return nil
			}
			return fmt.Errorf("%s: %w", r.Loc, err)
		}
		im.sum.Runs++
		return nil
	case err != nil:
		return fmt.Errorf("%s: %w", r.Loc, err)
	}
	switch {
	case sameRun(got, want):
		im.sum.RunsUnchanged++
		return nil
	case got.OwnerID == want.OwnerID && got.CreatedAt.Equal(want.CreatedAt) && want.UpdatedAt.After(got.UpdatedAt):
		// The source's row is newer: the run went on in DeerFlow, unless
		// runstream's row has finished (RunStatus.MayBecome), which keeps
		// its status: a conflict like the one below.
		_, err := im.t.Runs.PutRun(ctx, want)
		if err == nil {
			im.sum.RunsUpdated++
			return nil
		}
		if runstream.ErrorCodeOf(err) != runstream.CodeConflict {
			return fmt.Errorf("%s: %w", r.Loc, err)
		}
	}
	im.sum.Conflicts++
	add(Problem{r.Loc, fmt.Errorf("conflict: runstream holds another row for run %s of thread %s, as new as the source's or newer; left as it is", want.RunID, want.ThreadID)})
	return nil
}

func sameRun(a, b runevents.ThreadRun) bool {
	return a.OwnerID == b.OwnerID && a.Status == b.Status && a.OperationKind == b.OperationKind && a.ModelName == b.ModelName &&
		a.AssistantID == b.AssistantID && a.MultitaskStrategy == b.MultitaskStrategy && a.MessageCount == b.MessageCount &&
		a.StopReason == b.StopReason && a.CreatedAt.Equal(b.CreatedAt) && a.UpdatedAt.Equal(b.UpdatedAt) &&
		jsonEqual(a.Metadata, b.Metadata) && jsonEqual(a.Kwargs, b.Kwargs) && sameUsage(a.Usage, b.Usage)
}

func sameUsage(a, b runevents.Usage) bool {
	if len(a.ByModel) == 0 && len(b.ByModel) == 0 {
		a.ByModel, b.ByModel = nil, nil
	}
	return reflect.DeepEqual(a, b)
}

// feedback writes a feedback row, redacted, with its id and time
// (runevents.FeedbackImporter), or finds it there already: the same user's
// on the same run and message.
func (im *importer) feedback(ctx context.Context, f Feedback, add func(Problem)) error {
	fi, ok := im.t.Runs.(runevents.FeedbackImporter)
	if !ok {
		return fmt.Errorf("the run store %T cannot import feedback", im.t.Runs)
	}
	if f.Row.UserID == "" {
		f.Row.UserID = im.ownerOf(f.Row.ThreadID, f.Row.RunID)
	}
	row, err := threadsvc.RedactFeedback(f.Row)
	if err != nil {
		add(Problem{f.Loc, err})
		return nil
	}
	got, created, err := fi.ImportFeedback(ctx, row)
	switch code := runstream.ErrorCodeOf(err); {
	case err == nil:
	case code == runstream.CodeConflict:
		im.sum.Conflicts++
		add(Problem{f.Loc, err})
		return nil
	case code == runstream.CodeInvalidArgument || code == runstream.CodeNotFound:
		add(Problem{f.Loc, err})
		return nil
	default:
		return fmt.Errorf("%s: %w", f.Loc, err)
	}
	if created {
		im.sum.Feedback++
		return nil
	}
	if got.ID == row.ID && jsonEqual(got.Rating, row.Rating) && got.Comment == row.Comment && slices.Equal(got.Tags, row.Tags) {
		im.sum.FeedbackUnchanged++
		return nil
	}
	im.sum.Conflicts++
	add(Problem{f.Loc, fmt.Errorf("conflict: runstream holds other feedback (%s) of this user on run %s; left as it is", got.ID, f.Row.RunID)})
	return nil
}
