package runeventstest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// ThreadReaderSuite runs the conformance tests of
// runevents.ThreadReader.ListThreadEvents against the stores h opens,
// which must implement it: rows of every category after a seq, the run
// and category filters, owners, exact paging and argument checks; and,
// for the stores that implement runevents.ThreadJSONReader, envelopes
// byte for byte Record.AppendJSON's.
func ThreadReaderSuite(t *testing.T, h Harness) {
	t.Helper()
	if h.Open == nil {
		t.Fatal("runeventstest: Harness.Open is nil")
	}
	for _, tc := range threadReaderTests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := open(t, h)
			r, ok := s.(runevents.ThreadReader)
			if !ok {
				t.Fatalf("runeventstest: %T does not implement runevents.ThreadReader", s)
			}
			tc.run(t, s, r)
		})
	}
}

func listThread(t *testing.T, r runevents.ThreadReader, p runevents.ListThreadEventsParams) []runevents.Record {
	t.Helper()
	recs, err := r.ListThreadEvents(t.Context(), p)
	if err != nil {
		t.Fatalf("ListThreadEvents(%+v): %v", p, err)
	}
	return recs
}

// seedThread writes 60 rows over three runs, four categories and three
// owners (alice, bob and the internal writer) to thread t1, and rows of
// thread t2, and returns the rows of t1.
func seedThread(t *testing.T, s runevents.Store) []runevents.Record {
	t.Helper()
	runs := []string{"ra", "rb", "rc"}
	users := []string{alice, alice, bob, alice, ""}
	var events []runevents.NewEvent
	for i := range 60 {
		run := runs[(i/4)%len(runs)]
		var e runevents.NewEvent
		switch i % 5 {
		case 0, 3:
			e = msg("t1", run)
		case 1:
			e = trace("t1", run)
		case 2:
			e = delivery("t1", run, `{"presented":0,"paths":[],"by_tool":{}}`)
		case 4:
			e = withMeta(ev("t1", run, runevents.EventSubagentStep, runevents.CategorySubagent, `{"task_id":"x"}`), `{"task_id":"x"}`)
		}
		events = append(events, withUser(e, users[i%len(users)]))
	}
	rows := putBatch(t, s, events)
	putBatch(t, s, []runevents.NewEvent{msg("t2", "ra"), trace("t2", "ra")})
	return rows
}

// expectThread is ListThreadEvents computed from the written rows.
func expectThread(rows []runevents.Record, p runevents.ListThreadEventsParams) []int64 {
	var out []int64
	for _, r := range rows {
		if r.Seq <= p.AfterSeq || (p.BeforeSeq > 0 && r.Seq >= p.BeforeSeq) || !p.Owner.Sees(r.UserID) || (p.RunID != "" && r.RunID != p.RunID) || (p.Category != "" && r.Category != p.Category) {
			continue
		}
		if len(out) < p.Limit {
			out = append(out, r.Seq)
		}
	}
	return out
}

var threadReaderTests = []struct {
	name string
	run  func(t *testing.T, s runevents.Store, r runevents.ThreadReader)
}{
	{"LastThreadSeq", func(t *testing.T, s runevents.Store, r runevents.ThreadReader) {
		h, ok := r.(runevents.ThreadHead)
		if !ok {
			t.Skipf("%T does not implement runevents.ThreadHead", r)
		}
		head := func(thread string) int64 {
			t.Helper()
			seq, err := h.LastThreadSeq(t.Context(), thread)
			if err != nil {
				t.Fatalf("LastThreadSeq(%s): %v", thread, err)
			}
			return seq
		}
		if got := head("t1"); got != 0 {
			t.Errorf("head of an empty thread: %d, want 0", got)
		}
		seedThread(t, s)
		if got := head("t1"); got != 60 {
			t.Errorf("head after 60 rows of every owner: %d, want 60", got)
		}
		if got := head("t2"); got != 2 {
			t.Errorf("head of t2: %d, want 2", got)
		}
		if _, err := s.DeleteByThread(t.Context(), "t1", runevents.AnyOwner); err != nil {
			t.Fatal(err)
		}
		if got := head("t1"); got != 60 {
			t.Errorf("head after the thread's rows were deleted: %d, want 60 (seqs are never reused)", got)
		}
		if _, err := h.LastThreadSeq(t.Context(), "bad id!"); runstream.ErrorCodeOf(err) != runstream.CodeInvalidArgument {
			t.Errorf("LastThreadSeq of a bad id: %v, want INVALID_ARGUMENT", err)
		}
	}},
	{"FirstThreadOwner", func(t *testing.T, s runevents.Store, r runevents.ThreadReader) {
		o, ok := r.(runevents.ThreadOwner)
		if !ok {
			t.Skipf("%T does not implement runevents.ThreadOwner", r)
		}
		first := func(thread string) (string, bool) {
			t.Helper()
			user, found, err := o.FirstThreadOwner(t.Context(), thread)
			if err != nil {
				t.Fatalf("FirstThreadOwner(%s): %v", thread, err)
			}
			return user, found
		}
		if user, found := first("t1"); found {
			t.Errorf("owner of an empty thread: %q, want none", user)
		}
		rows := seedThread(t, s)
		// want is the owner of the lowest seq of t1 among rows not owned by gone.
		want := func(gone string) string {
			for _, r := range rows {
				if r.ThreadID == "t1" && r.UserID != gone {
					return r.UserID
				}
			}
			return ""
		}
		owner := want("\x00")
		if user, found := first("t1"); !found || user != owner {
			t.Errorf("owner of t1 = %q, %v; want %q", user, found, owner)
		}
		if _, err := s.DeleteByThread(t.Context(), "t1", runevents.OwnedBy(owner)); err != nil {
			t.Fatal(err)
		}
		if next := want(owner); next == "" || next == owner {
			t.Fatalf("seed: t1 has no row beside %q's", owner)
		} else if user, found := first("t1"); !found || user != next {
			t.Errorf("owner of t1 once %q's rows are deleted = %q, %v; want %q", owner, user, found, next)
		}
		if _, err := s.DeleteByThread(t.Context(), "t1", runevents.AnyOwner); err != nil {
			t.Fatal(err)
		}
		if user, found := first("t1"); found {
			t.Errorf("owner of t1 once its rows are deleted: %q, want none", user)
		}
		if _, _, err := o.FirstThreadOwner(t.Context(), "bad id!"); runstream.ErrorCodeOf(err) != runstream.CodeInvalidArgument {
			t.Errorf("FirstThreadOwner of a bad id: %v, want INVALID_ARGUMENT", err)
		}
	}},
	{"PutBatchOwned", func(t *testing.T, s runevents.Store, r runevents.ThreadReader) {
		o, ok := s.(runevents.OwnedAppender)
		if !ok {
			t.Skipf("%T does not implement runevents.OwnedAppender", s)
		}
		ctx := t.Context()
		count := func() int {
			t.Helper()
			return len(listThread(t, r, runevents.ListThreadEventsParams{ThreadID: "t1", Owner: runevents.AnyOwner, Limit: 1000}))
		}
		if _, err := o.PutBatchOwned(ctx, alice, []runevents.NewEvent{withUser(trace("t1", "ra"), alice)}); !errors.Is(err, runevents.ErrNotFirstOwner) {
			t.Errorf("PutBatchOwned to a thread without rows: %v, want ErrNotFirstOwner", err)
		}
		if n := count(); n != 0 {
			t.Fatalf("a refused PutBatchOwned stored %d rows", n)
		}
		putBatch(t, s, []runevents.NewEvent{withUser(msg("t1", "ra"), alice), withUser(trace("t1", "ra"), bob)})
		recs, err := o.PutBatchOwned(ctx, alice, []runevents.NewEvent{withUser(trace("t1", "ra"), alice), withUser(msg("t1", "rb"), alice)})
		if err != nil || len(recs) != 2 || recs[0].Seq != 3 || recs[1].Seq != 4 || recs[1].RunID != "rb" {
			t.Fatalf("PutBatchOwned to alice's thread as alice = %+v, %v; want seqs 3 and 4", recs, err)
		}
		if _, err := o.PutBatchOwned(ctx, bob, []runevents.NewEvent{withUser(trace("t1", "ra"), bob)}); !errors.Is(err, runevents.ErrNotFirstOwner) {
			t.Errorf("PutBatchOwned to alice's thread as bob (whose row is not the first): %v, want ErrNotFirstOwner", err)
		}
		if n := count(); n != 4 {
			t.Fatalf("t1 holds %d rows after a refused PutBatchOwned, want 4", n)
		}
		next := putBatch(t, s, []runevents.NewEvent{withUser(trace("t1", "ra"), alice)})
		if next[0].Seq != 5 {
			t.Errorf("the append after a refused one got seq %d, want 5: a refused append must not take seqs", next[0].Seq)
		}
		if _, err := s.DeleteByThread(ctx, "t1", runevents.OwnedBy(alice)); err != nil {
			t.Fatal(err)
		}
		if _, err := o.PutBatchOwned(ctx, alice, []runevents.NewEvent{withUser(trace("t1", "ra"), alice)}); !errors.Is(err, runevents.ErrNotFirstOwner) {
			t.Errorf("PutBatchOwned as alice once bob's row is the first: %v, want ErrNotFirstOwner", err)
		}
		if _, err := o.PutBatchOwned(ctx, bob, []runevents.NewEvent{withUser(trace("t1", "ra"), bob)}); err != nil {
			t.Errorf("PutBatchOwned as bob once his row is the first: %v", err)
		}
		if _, err := o.PutBatchOwned(ctx, "", []runevents.NewEvent{trace("t1", "ra")}); err == nil || errors.Is(err, runevents.ErrNotFirstOwner) {
			t.Errorf("PutBatchOwned without a user: %v, want an error other than ErrNotFirstOwner", err)
		}
	}},
	{"AllCategoriesAfterSeq", func(t *testing.T, s runevents.Store, r runevents.ThreadReader) {
		rows := seedThread(t, s)
		got := listThread(t, r, runevents.ListThreadEventsParams{ThreadID: "t1", Owner: runevents.AnyOwner, Limit: 1000})
		sameRecords(t, "every row of t1", got, rows)
		for _, after := range []int64{0, 1, 17, 59, 60, 61, 1000} {
			got := listThread(t, r, runevents.ListThreadEventsParams{ThreadID: "t1", Owner: runevents.AnyOwner, AfterSeq: after, Limit: 1000})
			if len(got) > 0 {
				sameRecord(t, fmt.Sprintf("first row after %d", after), got[0], rows[after])
			}
			if want := max(0, 60-int(after)); len(got) != want {
				t.Errorf("after %d: %d rows, want %d", after, len(got), want)
			}
		}
		if got := listThread(t, r, runevents.ListThreadEventsParams{ThreadID: "t-none", Owner: runevents.AnyOwner, Limit: 10}); len(got) != 0 {
			t.Errorf("unknown thread: %d rows", len(got))
		}
	}},
	{"Filters", func(t *testing.T, s runevents.Store, r runevents.ThreadReader) {
		rows := seedThread(t, s)
		for _, owner := range owners {
			for _, run := range []string{"", "ra", "rc", "missing"} {
				for _, cat := range []runevents.Category{"", runevents.CategoryMessage, runevents.CategoryTrace, runevents.CategorySubagent, runevents.CategoryWorkspace} {
					for _, after := range []int64{0, 7, 33} {
						for _, before := range []int64{0, 8, 20, 1000} {
							for _, limit := range []int{1, 2, 5, 100} {
								p := runevents.ListThreadEventsParams{ThreadID: "t1", Owner: owner.owner, AfterSeq: after, BeforeSeq: before, Limit: limit, RunID: run, Category: cat}
								got := listThread(t, r, p)
								if want := expectThread(rows, p); !equalSeqs(seqs(got), want) {
									t.Fatalf("%s run=%q category=%q after=%d before=%d limit=%d: %v, want %v", owner.name, run, cat, after, before, limit, seqs(got), want)
								}
							}
						}
					}
				}
			}
		}
	}},
	{"PagingIsExact", func(t *testing.T, s runevents.Store, r runevents.ThreadReader) {
		rows := seedThread(t, s)
		for _, owner := range owners {
			for _, cat := range []runevents.Category{"", runevents.CategoryMessage} {
				for _, limit := range []int{1, 3, 7} {
					all := expectThread(rows, runevents.ListThreadEventsParams{Owner: owner.owner, Category: cat, Limit: len(rows)})
					var got []int64
					var after int64
					for range len(rows) + 1 {
						page := listThread(t, r, runevents.ListThreadEventsParams{ThreadID: "t1", Owner: owner.owner, Category: cat, AfterSeq: after, Limit: limit})
						if len(page) > limit {
							t.Fatalf("page of %d rows with limit %d", len(page), limit)
						}
						if len(page) == 0 {
							break
						}
						got = append(got, seqs(page)...)
						after = page[len(page)-1].Seq
					}
					if !equalSeqs(got, all) {
						t.Errorf("%s category=%q paging by %d: %v, want %v", owner.name, cat, limit, got, all)
					}
				}
			}
		}
	}},
	{"SeesDeletes", func(t *testing.T, s runevents.Store, r runevents.ThreadReader) {
		rows := seedThread(t, s)
		if _, err := s.DeleteByRun(t.Context(), "t1", "rb", runevents.AnyOwner); err != nil {
			t.Fatal(err)
		}
		left := remaining(rows, func(r runevents.Record) bool { return r.RunID == "rb" })
		p := runevents.ListThreadEventsParams{ThreadID: "t1", Owner: runevents.AnyOwner, Limit: 1000}
		sameRecords(t, "rows after deleting rb", listThread(t, r, p), left)
		next := put(t, s, msg("t1", "rb"))
		if next.Seq != 61 {
			t.Errorf("seq after a delete = %d, want 61", next.Seq)
		}
		if got := listThread(t, r, runevents.ListThreadEventsParams{ThreadID: "t1", Owner: asAlice, AfterSeq: 60, Limit: 10}); !equalSeqs(seqs(got), []int64{61}) {
			t.Errorf("after 60: %v, want [61]", seqs(got))
		}
	}},
	{"BadArguments", func(t *testing.T, s runevents.Store, r runevents.ThreadReader) {
		seedThread(t, s)
		for name, p := range map[string]runevents.ListThreadEventsParams{
			"bad thread id":   {ThreadID: "t 1", Owner: asAlice, Limit: 1},
			"empty thread id": {Owner: asAlice, Limit: 1},
			"bad run id":      {ThreadID: "t1", RunID: "r/1", Owner: asAlice, Limit: 1},
			"zero owner":      {ThreadID: "t1", Limit: 1},
			"empty user":      {ThreadID: "t1", Owner: runevents.OwnedBy(""), Limit: 1},
			"zero limit":      {ThreadID: "t1", Owner: asAlice},
			"negative limit":  {ThreadID: "t1", Owner: asAlice, Limit: -1},
			"negative cursor": {ThreadID: "t1", Owner: asAlice, Limit: 1, AfterSeq: -1},
			"negative bound":  {ThreadID: "t1", Owner: asAlice, Limit: 1, BeforeSeq: -1},
		} {
			recs, err := r.ListThreadEvents(t.Context(), p)
			wantCode(t, err, runstream.CodeInvalidArgument, "ListThreadEvents with "+name)
			if len(recs) != 0 {
				t.Errorf("%s: %d rows returned with the error", name, len(recs))
			}
		}
	}},
	{"EnvelopesMatchRecords", func(t *testing.T, s runevents.Store, r runevents.ThreadReader) {
		j, ok := r.(runevents.ThreadJSONReader)
		if !ok {
			t.Skipf("%T does not implement runevents.ThreadJSONReader", r)
		}
		// Free-form fields with multibyte and JSON's special characters,
		// rows without an owner, writers in other zones.
		at := time.Date(2026, 12, 2, 7, 40, 0, 123456000, time.UTC)
		if _, err := s.PutBatch(t.Context(), []runevents.NewEvent{
			{ThreadID: "t-1", RunID: "r_1", UserID: "zoë,12:34", EventType: "étape:3,4", Category: "κατηγορία", CreatedAt: at.In(time.FixedZone("", 5*3600+30*60)),
				Content: json.RawMessage(`{"text":"héllo, \"wörld\": <1>&2 \u2028 ✓"}`), Metadata: json.RawMessage(`{"k":"ü,:"}`)},
			{ThreadID: "t-1", RunID: "r-2", UserID: "u", EventType: "ai_message", Category: "message", Content: json.RawMessage(`12`), CreatedAt: at.In(time.FixedZone("", -8*3600))},
			{ThreadID: "t-1", RunID: "r-2", UserID: `a"b\c<d>`, EventType: `x"y`, Category: "trace", Metadata: json.RawMessage(`{"task_id":"t"}`)},
			{ThreadID: "t-1", RunID: "r_1", UserID: "u", EventType: "human_message", Category: "message", Content: json.RawMessage(`"hi"`), CreatedAt: at},
			{ThreadID: "t-1", RunID: "r_1", EventType: "human_message", Category: "message", CreatedAt: at.In(time.FixedZone("", 3600))},
		}); err != nil {
			t.Fatalf("PutBatch: %v", err)
		}
		for _, p := range []runevents.ListThreadEventsParams{
			{ThreadID: "t-1", Owner: runevents.AnyOwner, Limit: 10},
			{ThreadID: "t-1", Owner: runevents.AnyOwner, Limit: 2, AfterSeq: 1},
			{ThreadID: "t-1", Owner: runevents.AnyOwner, Limit: 10, AfterSeq: 1, BeforeSeq: 4},
			{ThreadID: "t-1", Owner: runevents.OwnedBy("u"), Limit: 10},
			{ThreadID: "t-1", Owner: runevents.AnyOwner, Limit: 10, RunID: "r_1"},
			{ThreadID: "t-1", Owner: runevents.AnyOwner, Limit: 10, Category: runevents.CategoryMessage},
			{ThreadID: "t-1", Owner: runevents.AnyOwner, Limit: 10, Category: "trace"},
			{ThreadID: "t-2", Owner: runevents.AnyOwner, Limit: 10},
		} {
			var want, got []string
			for _, rec := range listThread(t, r, p) {
				want = append(want, fmt.Sprintf("%d %s %s", rec.Seq, rec.EventType, rec.AppendJSON(nil)))
			}
			err := j.ScanThreadJSON(t.Context(), p, func(seq int64, eventType string, envelope []byte) error {
				got = append(got, fmt.Sprintf("%d %s %s", seq, eventType, envelope))
				return nil
			})
			if err != nil {
				t.Fatalf("ScanThreadJSON(%+v): %v", p, err)
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("ScanThreadJSON(%+v):\n%s\nwant (ListThreadEvents and Record.AppendJSON):\n%s", p, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		}
		stop, calls := errors.New("stop"), 0
		err := j.ScanThreadJSON(t.Context(), runevents.ListThreadEventsParams{ThreadID: "t-1", Owner: runevents.AnyOwner, Limit: 10}, func(int64, string, []byte) error {
			calls++
			return stop
		})
		if err != stop || calls != 1 {
			t.Errorf("ScanThreadJSON with a failing fn: %v after %d calls, want fn's error after 1", err, calls)
		}
		err = j.ScanThreadJSON(t.Context(), runevents.ListThreadEventsParams{ThreadID: "t 1", Owner: runevents.AnyOwner, Limit: 10}, func(int64, string, []byte) error { return nil })
		wantCode(t, err, runstream.CodeInvalidArgument, "ScanThreadJSON of a bad thread id")
	}},
	{"ReturnsCopies", func(t *testing.T, s runevents.Store, r runevents.ThreadReader) {
		rows := seedThread(t, s)
		p := runevents.ListThreadEventsParams{ThreadID: "t1", Owner: runevents.AnyOwner, Limit: 5}
		for _, rec := range listThread(t, r, p) {
			rec.Content[0], rec.Metadata[0] = 'X', 'X'
		}
		sameRecords(t, "rows after changing returned ones", listThread(t, r, p), rows[:5])
	}},
}
