package runeventstest

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// seqsResponse is the response builder of the idempotent tests: status 201
// (200 for an if-absent append that found its row) and the seqs of the
// records as a JSON array.
func seqsResponse(recs []runevents.Record, created bool) (runevents.IdempotentResponse, error) {
	status := 201
	if !created {
		status = 200
	}
	body, err := json.Marshal(seqs(recs))
	return runevents.IdempotentResponse{Status: status, Body: body}, err
}

func keyed(user, key, body string, events ...runevents.NewEvent) runevents.IdempotentAppend {
	return runevents.IdempotentAppend{UserID: user, Key: key, RequestHash: requestHash(body), Events: events, Response: seqsResponse}
}

func appendIdem(t *testing.T, s runevents.IdempotentAppender, a runevents.IdempotentAppend) runevents.IdempotentResult {
	t.Helper()
	res, err := s.AppendIdempotent(t.Context(), a)
	if err != nil {
		t.Fatalf("AppendIdempotent(%s, %s): %v", a.UserID, a.Key, err)
	}
	return res
}

var errBuilder = errors.New("the response cannot be built")

var idempotentTests = []test{
	{"AppendsOnceAndReplays", func(t *testing.T, s runevents.Store) {
		a := implementation[runevents.IdempotentAppender](t, s, "idempotent appends")
		put(t, s, trace("t1", "r1"))
		first := appendIdem(t, a, keyed(alice, "k1", "b1", msg("t1", "r1"), trace("t1", "r1")))
		if first.Replayed || !equalSeqs(seqs(first.Appended), []int64{2, 3}) || first.Response.Status != 201 || string(first.Response.Body) != "[2,3]" {
			t.Fatalf("first = replayed %v, appended %v, response %d %s; want [2 3] appended and built from them",
				first.Replayed, seqs(first.Appended), first.Response.Status, first.Response.Body)
		}
		for range 2 {
			again := appendIdem(t, a, keyed(alice, "k1", "b1", msg("t1", "r1"), trace("t1", "r1")))
			if !again.Replayed || len(again.Appended) != 0 || again.Response.Status != 201 || string(again.Response.Body) != "[2,3]" {
				t.Fatalf("retry = replayed %v, appended %v, response %d %s; want the first response, nothing appended",
					again.Replayed, seqs(again.Appended), again.Response.Status, again.Response.Body)
			}
		}
		got, err := a.LookupIdempotent(t.Context(), alice, "k1", requestHash("b1"))
		if err != nil || got == nil || got.Status != 201 || string(got.Body) != "[2,3]" {
			t.Fatalf("LookupIdempotent = %+v, %v; want the first response", got, err)
		}
		if got := seqs(runRows(t, s, "t1", "r1", asAlice)); !equalSeqs(got, []int64{1, 2, 3}) {
			t.Errorf("rows %v; want [1 2 3]: the batch once", got)
		}
		// Appends after it continue the thread's seqs.
		if rec := put(t, s, trace("t1", "r1")); rec.Seq != 4 {
			t.Errorf("Put after the idempotent append got seq %d, want 4", rec.Seq)
		}
	}},
	{"AbsentKey", func(t *testing.T, s runevents.Store) {
		a := implementation[runevents.IdempotentAppender](t, s, "idempotent appends")
		got, err := a.LookupIdempotent(t.Context(), alice, "nope", requestHash("b"))
		if err != nil || got != nil {
			t.Fatalf("LookupIdempotent of an unknown key = %+v, %v; want nil", got, err)
		}
	}},
	{"HashMismatch", func(t *testing.T, s runevents.Store) {
		a := implementation[runevents.IdempotentAppender](t, s, "idempotent appends")
		appendIdem(t, a, keyed(alice, "k1", "b1", msg("t1", "r1")))
		_, err := a.AppendIdempotent(t.Context(), keyed(alice, "k1", "b2", msg("t1", "r1")))
		wantCode(t, err, runstream.CodeValidationFailed, "AppendIdempotent with another request under the key")
		_, err = a.LookupIdempotent(t.Context(), alice, "k1", requestHash("b2"))
		wantCode(t, err, runstream.CodeValidationFailed, "LookupIdempotent with another request's hash")
		if got := seqs(runRows(t, s, "t1", "r1", asAlice)); !equalSeqs(got, []int64{1}) {
			t.Errorf("rows %v; want [1]", got)
		}
	}},
	{"KeysPerUser", func(t *testing.T, s runevents.Store) {
		a := implementation[runevents.IdempotentAppender](t, s, "idempotent appends")
		appendIdem(t, a, keyed(alice, "k1", "b1", msg("t1", "r1")))
		res := appendIdem(t, a, keyed(bob, "k1", "b1", withUser(msg("t1", "r1"), bob)))
		if res.Replayed || string(res.Response.Body) != "[2]" {
			t.Fatalf("bob's append under alice's key: replayed %v, %s; want a new append [2]", res.Replayed, res.Response.Body)
		}
	}},
	{"FailedBuilderLeavesNothing", func(t *testing.T, s runevents.Store) {
		a := implementation[runevents.IdempotentAppender](t, s, "idempotent appends")
		bad := keyed(alice, "k1", "b1", msg("t1", "r1"), msg("t1", "r1"))
		bad.Response = func([]runevents.Record, bool) (runevents.IdempotentResponse, error) {
			return runevents.IdempotentResponse{}, errBuilder
		}
		if _, err := a.AppendIdempotent(t.Context(), bad); err == nil {
			t.Fatal("AppendIdempotent with a failing builder succeeded")
		}
		if rows := runRows(t, s, "t1", "r1", asAlice); len(rows) != 0 {
			t.Fatalf("%d rows after a failed append; want none", len(rows))
		}
		if got, err := a.LookupIdempotent(t.Context(), alice, "k1", requestHash("b1")); err != nil || got != nil {
			t.Fatalf("key after a failed append = %+v, %v; want absent", got, err)
		}
		res := appendIdem(t, a, keyed(alice, "k1", "b1", msg("t1", "r1"), msg("t1", "r1")))
		if res.Replayed || string(res.Response.Body) != "[1,2]" {
			t.Errorf("retry after the failure: replayed %v, %s; want the append [1,2]", res.Replayed, res.Response.Body)
		}
	}},
	{"InvalidBatchLeavesKeyFree", func(t *testing.T, s runevents.Store) {
		a := implementation[runevents.IdempotentAppender](t, s, "idempotent appends")
		_, err := a.AppendIdempotent(t.Context(), keyed(alice, "k1", "b1", msg("t1", "r1"), msg("t2", "r1")))
		wantCode(t, err, runstream.CodeInvalidArgument, "a batch of two threads")
		_, err = a.AppendIdempotent(t.Context(), keyed(alice, "", "b1", msg("t1", "r1")))
		wantCode(t, err, runstream.CodeInvalidArgument, "an empty key")
		if got, err := a.LookupIdempotent(t.Context(), alice, "k1", requestHash("b1")); err != nil || got != nil {
			t.Fatalf("key after a refused append = %+v, %v; want absent", got, err)
		}
	}},
	{"IfAbsent", func(t *testing.T, s runevents.Store) {
		a := implementation[runevents.IdempotentAppender](t, s, "idempotent appends")
		one := keyed(alice, "k1", "b1", delivery("t1", "r1", `"first"`))
		one.IfAbsent = true
		first := appendIdem(t, a, one)
		if first.Replayed || first.Response.Status != 201 || string(first.Response.Body) != "[1]" || len(first.Appended) != 1 {
			t.Fatalf("first if-absent = %+v; want created [1]", first)
		}
		if again := appendIdem(t, a, one); !again.Replayed || string(again.Response.Body) != "[1]" {
			t.Fatalf("retry = %+v; want the replay", again)
		}
		other := keyed(alice, "k2", "b2", delivery("t1", "r1", `"second"`))
		other.IfAbsent = true
		found := appendIdem(t, a, other)
		if found.Replayed || found.Response.Status != 200 || string(found.Response.Body) != "[1]" || len(found.Appended) != 0 {
			t.Fatalf("if-absent over the existing row = %+v; want 200 [1], nothing appended", found)
		}
		two := keyed(alice, "k3", "b3", delivery("t1", "r1", `"x"`), delivery("t1", "r1", `"y"`))
		two.IfAbsent = true
		_, err := a.AppendIdempotent(t.Context(), two)
		wantCode(t, err, runstream.CodeInvalidArgument, "if-absent with two events")
		if got := seqs(runRows(t, s, "t1", "r1", asAlice)); !equalSeqs(got, []int64{1}) {
			t.Errorf("rows %v; want [1]", got)
		}
	}},
	{"ConcurrentSameKey", func(t *testing.T, s runevents.Store) {
		a := implementation[runevents.IdempotentAppender](t, s, "idempotent appends")
		const callers = 50
		results := make([]runevents.IdempotentResult, callers)
		errs := make([]error, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				for {
					results[i], errs[i] = a.AppendIdempotent(t.Context(), keyed(alice, "k", "b", msg("t1", "r1"), msg("t1", "r1")))
					if runstream.ErrorCodeOf(errs[i]) != runstream.CodeUnavailable {
						return
					}
				}
			})
			if i%10 == 0 { // a few plain appends interleaved
				wg.Go(func() { s.Put(t.Context(), trace("t1", "r2")) })
			}
		}
		wg.Wait()
		appended := 0
		var body string
		for i := range callers {
			if errs[i] != nil {
				t.Fatalf("caller %d: %v", i, errs[i])
			}
			if !results[i].Replayed {
				appended++
			}
			if body == "" {
				body = string(results[i].Response.Body)
			} else if string(results[i].Response.Body) != body {
				t.Errorf("caller %d got %s, another %s", i, results[i].Response.Body, body)
			}
		}
		if appended != 1 {
			t.Errorf("%d callers appended; want exactly 1", appended)
		}
		rows := runRows(t, s, "t1", "r1", asAlice)
		if got, _ := json.Marshal(seqs(rows)); string(got) != body {
			t.Errorf("rows %s, response %s; want the batch once, as answered", got, body)
		}
	}},
}

// testIdempotentReopen checks that a completed key survives a restart
// with its rows: the retry after the reopen replays and appends nothing.
func testIdempotentReopen(t *testing.T, h Harness) {
	if h.OpenReopenable == nil {
		t.Log("Harness.OpenReopenable is nil: the backend is not durable, reopen not tested")
		return
	}
	s, reopen := h.OpenReopenable(t)
	a := implementation[runevents.IdempotentAppender](t, s, "idempotent appends")
	first := appendIdem(t, a, keyed(alice, "k1", "b1", msg("t1", "r1"), trace("t1", "r1")))
	s = reopen()
	t.Cleanup(func() { s.Close() })
	again := appendIdem(t, implementation[runevents.IdempotentAppender](t, s, "idempotent appends"), keyed(alice, "k1", "b1", msg("t1", "r1"), trace("t1", "r1")))
	if !again.Replayed || string(again.Response.Body) != string(first.Response.Body) {
		t.Fatalf("retry after reopen: replayed %v, %s; want %s", again.Replayed, again.Response.Body, first.Response.Body)
	}
	if got := seqs(runRows(t, s, "t1", "r1", asAlice)); !equalSeqs(got, []int64{1, 2}) {
		t.Errorf("rows %v after reopen and retry; want [1 2]", got)
	}
}
