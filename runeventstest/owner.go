package runeventstest

import (
	"strings"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// seedOwners writes rows of alice, bob and the internal writer ("")
// interleaved over runs ra and rb of thread t1, and returns them.
func seedOwners(t *testing.T, s runevents.Store) []runevents.Record {
	t.Helper()
	users := []string{alice, bob, "", alice, alice, bob}
	var events []runevents.NewEvent
	for i := range 30 {
		run := twoRuns[i/3%2]
		e := msg("t1", run)
		switch i % 4 {
		case 1:
			e = trace("t1", run)
		case 3:
			e = withMeta(msg("t1", run), `{"caller":"middleware:x"}`)
		}
		events = append(events, withUser(e, users[i%len(users)]))
	}
	return putBatch(t, s, events)
}

// expectView is viewThread computed from the written rows.
func expectView(rows []runevents.Record, owner runevents.Owner) threadView {
	v := threadView{runs: map[string][]runevents.Record{}, lastAI: map[string]int64{}}
	for _, r := range rows {
		if !owner.Sees(r.UserID) {
			continue
		}
		v.runs[r.RunID] = append(v.runs[r.RunID], r)
		if r.Category != runevents.CategoryMessage {
			continue
		}
		v.messages = append(v.messages, r)
		if caller, _ := r.MetadataString("caller"); r.EventType.IsAIResponse() && !strings.HasPrefix(caller, runevents.MiddlewareCallerPrefix) {
			v.lastAI[r.RunID] = r.Seq
		}
	}
	v.count = len(v.messages)
	return v
}

func remaining(rows []runevents.Record, gone func(runevents.Record) bool) []runevents.Record {
	var out []runevents.Record
	for _, r := range rows {
		if !gone(r) {
			out = append(out, r)
		}
	}
	return out
}

var owners = []struct {
	name  string
	owner runevents.Owner
}{
	{"alice", asAlice}, {"bob", asBob}, {"carol", runevents.OwnedBy("carol")}, {"any", runevents.AnyOwner},
}

var ownerTests = []test{
	{"ReadsSeeOwnRows", func(t *testing.T, s runevents.Store) {
		rows := seedOwners(t, s)
		for _, o := range owners {
			want := expectView(rows, o.owner)
			sameView(t, "view of "+o.name, viewThread(t, s, "t1", twoRuns, o.owner), want)
		}
	}},
	{"CursorsOverOwnRows", func(t *testing.T, s runevents.Store) {
		rows := seedOwners(t, s)
		isMsg := func(r runevents.Record) bool { return r.Category == runevents.CategoryMessage && r.UserID == alice }
		for _, c := range []struct{ after, before *int64 }{{nil, nil}, {nil, runevents.Seq(20)}, {runevents.Seq(3), nil}, {runevents.Seq(3), runevents.Seq(25)}} {
			for _, limit := range []int{1, 2, 3} {
				got := listMessages(t, s, runevents.ListMessagesParams{ThreadID: "t1", Owner: asAlice, Limit: limit, AfterSeq: c.after, BeforeSeq: c.before})
				if want := naiveWindow(rows, isMsg, c.after, c.before, limit); !equalSeqs(seqs(got), want) {
					t.Errorf("alice's messages after=%s before=%s limit=%d: %v, want %v", ptr(c.after), ptr(c.before), limit, seqs(got), want)
				}
				byRun := listMessagesByRun(t, s, runevents.ListMessagesByRunParams{ThreadID: "t1", RunID: "rb", Owner: asAlice, Limit: limit, AfterSeq: c.after, BeforeSeq: c.before})
				isRunMsg := func(r runevents.Record) bool { return isMsg(r) && r.RunID == "rb" }
				if want := naiveWindow(rows, isRunMsg, c.after, c.before, limit); !equalSeqs(seqs(byRun), want) {
					t.Errorf("alice's messages of rb after=%s before=%s limit=%d: %v, want %v", ptr(c.after), ptr(c.before), limit, seqs(byRun), want)
				}
			}
		}
		isEvent := func(r runevents.Record) bool { return r.RunID == "ra" && r.UserID == bob }
		got := listEvents(t, s, runevents.ListEventsParams{ThreadID: "t1", RunID: "ra", Owner: asBob, Limit: 2})
		if want := naiveWindow(rows, isEvent, runevents.Seq(0), nil, 2); !equalSeqs(seqs(got), want) {
			t.Errorf("bob's first two events of ra: %v, want %v", seqs(got), want)
		}
	}},
	{"DeletesOwnRows", func(t *testing.T, s runevents.Store) {
		rows := seedOwners(t, s)
		if n, err := s.DeleteByRun(t.Context(), "t1", "ra", runevents.OwnedBy("carol")); err != nil || n != 0 {
			t.Errorf("DeleteByRun by carol = %d, %v; want 0", n, err)
		}
		if n, err := s.DeleteByThread(t.Context(), "t1", runevents.OwnedBy("carol")); err != nil || n != 0 {
			t.Errorf("DeleteByThread by carol = %d, %v; want 0", n, err)
		}
		sameView(t, "after carol's deletes", viewThread(t, s, "t1", twoRuns, runevents.AnyOwner), expectView(rows, runevents.AnyOwner))

		bobsRA := func(r runevents.Record) bool { return r.RunID == "ra" && r.UserID == bob }
		rows = deleteAndCheck(t, s, rows, bobsRA, func() (int, error) { return s.DeleteByRun(t.Context(), "t1", "ra", asBob) })
		alices := func(r runevents.Record) bool { return r.UserID == alice }
		rows = deleteAndCheck(t, s, rows, alices, func() (int, error) { return s.DeleteByThread(t.Context(), "t1", asAlice) })
		everything := func(runevents.Record) bool { return true }
		deleteAndCheck(t, s, rows, everything, func() (int, error) { return s.DeleteByThread(t.Context(), "t1", runevents.AnyOwner) })
	}},
	{"ZeroOwnerRefused", func(t *testing.T, s runevents.Store) {
		put(t, s, msg("t1", "r1"))
		for _, zero := range []runevents.Owner{{}, runevents.OwnedBy("")} {
			ctx := t.Context()
			_, err := s.ListMessages(ctx, runevents.ListMessagesParams{ThreadID: "t1", Owner: zero, Limit: 10})
			wantCode(t, err, runstream.CodeInvalidArgument, "ListMessages without owner")
			_, err = s.ListMessagesByRun(ctx, runevents.ListMessagesByRunParams{ThreadID: "t1", RunID: "r1", Owner: zero, Limit: 10})
			wantCode(t, err, runstream.CodeInvalidArgument, "ListMessagesByRun without owner")
			_, err = s.ListEvents(ctx, runevents.ListEventsParams{ThreadID: "t1", RunID: "r1", Owner: zero, Limit: 10})
			wantCode(t, err, runstream.CodeInvalidArgument, "ListEvents without owner")
			_, err = s.LastVisibleAISeqByRun(ctx, runevents.LastVisibleAIParams{ThreadID: "t1", RunIDs: []string{"r1"}, Owner: zero})
			wantCode(t, err, runstream.CodeInvalidArgument, "LastVisibleAISeqByRun without owner")
			_, err = s.CountMessages(ctx, "t1", zero)
			wantCode(t, err, runstream.CodeInvalidArgument, "CountMessages without owner")
			_, err = s.DeleteByRun(ctx, "t1", "r1", zero)
			wantCode(t, err, runstream.CodeInvalidArgument, "DeleteByRun without owner")
			_, err = s.DeleteByThread(ctx, "t1", zero)
			wantCode(t, err, runstream.CodeInvalidArgument, "DeleteByThread without owner")
		}
		_, err := s.CountMessages(t.Context(), "t/1", asAlice)
		wantCode(t, err, runstream.CodeInvalidArgument, "CountMessages with a bad thread id")
		_, err = s.DeleteByThread(t.Context(), "", asAlice)
		wantCode(t, err, runstream.CodeInvalidArgument, "DeleteByThread with an empty thread id")
		_, err = s.DeleteByRun(t.Context(), "t1", "r 1", asAlice)
		wantCode(t, err, runstream.CodeInvalidArgument, "DeleteByRun with a bad run id")
		if got := runRows(t, s, "t1", "r1", runevents.AnyOwner); len(got) != 1 {
			t.Errorf("%d rows after refused deletes, want 1", len(got))
		}
	}},
}

// deleteAndCheck runs del, which must delete exactly the rows gone
// selects, and checks every owner's view of what remains.
func deleteAndCheck(t *testing.T, s runevents.Store, rows []runevents.Record, gone func(runevents.Record) bool, del func() (int, error)) []runevents.Record {
	t.Helper()
	left := remaining(rows, gone)
	n, err := del()
	if err != nil || n != len(rows)-len(left) {
		t.Errorf("delete = %d, %v; want %d", n, err, len(rows)-len(left))
	}
	for _, o := range owners {
		sameView(t, "view of "+o.name+" after delete", viewThread(t, s, "t1", twoRuns, o.owner), expectView(left, o.owner))
	}
	return left
}
