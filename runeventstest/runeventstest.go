package runeventstest

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// Harness opens stores for the suite.
type Harness struct {
	// Open returns a new, empty store with default options. The suite
	// closes it. It is called once per subtest, from parallel subtests.
	Open func(t *testing.T) runevents.Store
	// OpenReopenable, if not nil, returns a new, empty store and a function
	// that closes it and opens a new store over the same data (same
	// directory, file or schema): the "reopen" step proving data survives a
	// restart. The suite calls reopen several times, each call closing the
	// store the previous one returned, and closes the last. nil for
	// non-durable backends (memory), which the suite then logs.
	OpenReopenable func(t *testing.T) (s runevents.Store, reopen func() runevents.Store)
}

// RunEventStore runs the conformance tests against the stores h opens: the
// semantics of the runevents package doc, one subtest per rule, grouped by
// method (Put, Content, PutIfAbsent, ListMessages, ListEvents,
// ListMessagesByRun, LastVisibleAISeqByRun, Delete, Owner, Concurrency,
// Idempotent: runevents.IdempotentAppender, and Import:
// runevents.Importer, each skipped for stores without it),
// then Reopen when h.OpenReopenable is set. Subtests of a group run in
// parallel, each on a store of its own; the heaviest one writes 20,000
// rows with 100 concurrent Puts.
func RunEventStore(t *testing.T, h Harness) {
	t.Helper()
	if h.Open == nil {
		t.Fatal("runeventstest: Harness.Open is nil")
	}
	for _, g := range []struct {
		name  string
		tests []test
	}{
		{"Put", putTests},
		{"Content", contentTests},
		{"PutIfAbsent", putIfAbsentTests},
		{"ListMessages", listMessagesTests},
		{"ListEvents", listEventsTests},
		{"ListMessagesByRun", listMessagesByRunTests},
		{"LastVisibleAISeqByRun", lastVisibleAITests},
		{"Delete", deleteTests},
		{"Owner", ownerTests},
		{"Concurrency", concurrencyTests},
		{"Idempotent", idempotentTests},
		{"Import", importTests},
	} {
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.run(t, open(t, h))
				})
			}
		})
	}
	t.Run("Reopen", func(t *testing.T) { testReopen(t, h) })
	t.Run("IdempotentReopen", func(t *testing.T) { testIdempotentReopen(t, h) })
}

// test is one conformance check on a fresh store.
type test struct {
	name string
	run  func(t *testing.T, s runevents.Store)
}

// open opens a store the test closes at cleanup.
func open(t *testing.T, h Harness) runevents.Store {
	t.Helper()
	s := h.Open(t)
	if s == nil {
		t.Fatal("runeventstest: Harness.Open returned nil")
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// Owners and a default event constructor used throughout the suite.
const (
	alice = "alice"
	bob   = "bob"
)

var (
	asAlice = runevents.OwnedBy(alice)
	asBob   = runevents.OwnedBy(bob)
)

// implementation returns store as an I, one of the optional interfaces a
// store may implement, or skips the test: what names what is then not
// tested.
func implementation[I any](t *testing.T, store any, what string) I {
	t.Helper()
	i, ok := store.(I)
	if !ok {
		t.Skipf("%T is not a %v: %s not tested", store, reflect.TypeFor[I](), what)
	}
	return i
}

// ev returns an event of alice with the given content (a JSON text, or ""
// for none).
func ev(thread, run string, typ runevents.EventType, cat runevents.Category, content string) runevents.NewEvent {
	e := runevents.NewEvent{ThreadID: thread, RunID: run, EventType: typ, Category: cat, UserID: alice}
	if content != "" {
		e.Content = json.RawMessage(content)
	}
	return e
}

// msg returns a message row (llm.ai.response) of alice.
func msg(thread, run string) runevents.NewEvent {
	return ev(thread, run, runevents.EventLLMAIResponse, runevents.CategoryMessage, `{"type":"ai","content":"hi"}`)
}

// trace returns a trace row (run.start) of alice.
func trace(thread, run string) runevents.NewEvent {
	return ev(thread, run, runevents.EventRunStart, runevents.CategoryTrace, `{"chain":null}`)
}

func withMeta(e runevents.NewEvent, meta string) runevents.NewEvent {
	e.Metadata = json.RawMessage(meta)
	return e
}

func withUser(e runevents.NewEvent, user string) runevents.NewEvent {
	e.UserID = user
	return e
}

func put(t *testing.T, s runevents.Store, e runevents.NewEvent) runevents.Record {
	t.Helper()
	rec, err := s.Put(t.Context(), e)
	if err != nil {
		t.Fatalf("Put(%s/%s %s): %v", e.ThreadID, e.RunID, e.EventType, err)
	}
	return rec
}

func putBatch(t *testing.T, s runevents.Store, events []runevents.NewEvent) []runevents.Record {
	t.Helper()
	recs, err := s.PutBatch(t.Context(), events)
	if err != nil {
		t.Fatalf("PutBatch(%d events): %v", len(events), err)
	}
	if len(recs) != len(events) {
		t.Fatalf("PutBatch(%d events) returned %d records", len(events), len(recs))
	}
	return recs
}

func listEvents(t *testing.T, s runevents.Store, p runevents.ListEventsParams) []runevents.Record {
	t.Helper()
	recs, err := s.ListEvents(t.Context(), p)
	if err != nil {
		t.Fatalf("ListEvents(%+v): %v", p, err)
	}
	return recs
}

func listMessages(t *testing.T, s runevents.Store, p runevents.ListMessagesParams) []runevents.Record {
	t.Helper()
	recs, err := s.ListMessages(t.Context(), p)
	if err != nil {
		t.Fatalf("ListMessages(%+v): %v", p, err)
	}
	return recs
}

func listMessagesByRun(t *testing.T, s runevents.Store, p runevents.ListMessagesByRunParams) []runevents.Record {
	t.Helper()
	recs, err := s.ListMessagesByRun(t.Context(), p)
	if err != nil {
		t.Fatalf("ListMessagesByRun(%+v): %v", p, err)
	}
	return recs
}

// runRows returns every row of a run visible to owner.
func runRows(t *testing.T, s runevents.Store, thread, run string, owner runevents.Owner) []runevents.Record {
	t.Helper()
	return listEvents(t, s, runevents.ListEventsParams{ThreadID: thread, RunID: run, Owner: owner, Limit: 1 << 20})
}

func seqs(recs []runevents.Record) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.Seq
	}
	return out
}

func equalSeqs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func span(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// wantCode fails unless err is a *runstream.Error with code.
func wantCode(t *testing.T, err error, code runstream.ErrorCode, what string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: got no error, want %s", what, code)
		return
	}
	var e *runstream.Error
	if !errors.As(err, &e) {
		t.Errorf("%s: error %v (%T) is not a *runstream.Error", what, err, err)
		return
	}
	if got := runstream.ErrorCodeOf(err); got != code {
		t.Errorf("%s: code %s, want %s (%v)", what, got, code, err)
	}
}

// sameRecord fails unless got equals want field by field; CreatedAt must be
// the same instant with the same offset.
func sameRecord(t *testing.T, what string, got, want runevents.Record) {
	t.Helper()
	if diff := recordDiff(got, want); diff != "" {
		t.Errorf("%s: %s\n got: %s\nwant: %s", what, diff, show(got), show(want))
	}
}

func sameRecords(t *testing.T, what string, got, want []runevents.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d records (seqs %v), want %d (seqs %v)", what, len(got), seqs(got), len(want), seqs(want))
		return
	}
	for i := range got {
		sameRecord(t, what, got[i], want[i])
	}
}

func recordDiff(got, want runevents.Record) string {
	_, gotOff := got.CreatedAt.Zone()
	_, wantOff := want.CreatedAt.Zone()
	switch {
	case got.ThreadID != want.ThreadID:
		return "thread_id differs"
	case got.RunID != want.RunID:
		return "run_id differs"
	case got.Seq != want.Seq:
		return "seq differs"
	case got.EventType != want.EventType:
		return "event_type differs"
	case got.Category != want.Category:
		return "category differs"
	case string(got.Content) != string(want.Content):
		return "content differs"
	case string(got.Metadata) != string(want.Metadata):
		return "metadata differs"
	case !got.CreatedAt.Equal(want.CreatedAt) || gotOff != wantOff:
		return "created_at differs"
	case got.UserID != want.UserID:
		return "user_id differs"
	}
	return ""
}

func show(r runevents.Record) string {
	b, _ := r.MarshalJSON()
	if len(b) > 400 {
		return string(b[:400]) + "…"
	}
	return string(b)
}
