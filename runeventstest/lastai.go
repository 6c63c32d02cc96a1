package runeventstest

import (
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

var lastVisibleAITests = []test{
	{"Rules", func(t *testing.T, s runevents.Store) {
		rows := []struct {
			run      string
			typ      runevents.EventType
			category runevents.Category
			meta     string
		}{
			{"r-plain", runevents.EventLLMAIResponse, runevents.CategoryMessage, `{"caller":"lead_agent"}`},        // 1
			{"r-mw", runevents.EventLLMAIResponse, runevents.CategoryMessage, `{"caller":"lead_agent"}`},           // 2
			{"r-mw", runevents.EventLLMAIResponse, runevents.CategoryMessage, `{"caller":"middleware:title"}`},     // 3: excluded
			{"r-legacy", runevents.EventLegacyAIMessage, runevents.CategoryMessage, `{}`},                          // 4: legacy alias
			{"r-nocaller", runevents.EventLLMAIResponse, runevents.CategoryMessage, `{"usage":{}}`},                // 5: no caller counts
			{"r-onlymw", runevents.EventLLMAIResponse, runevents.CategoryMessage, `{"caller":"middleware:x"}`},     // 6: excluded
			{"r-trace", runevents.EventLLMAIResponse, runevents.CategoryTrace, `{}`},                               // 7: not a message
			{"r-plain", runevents.EventLLMAIResponse, runevents.CategoryMessage, `{"caller":"subagent:x"}`},        // 8
			{"r-plain", runevents.EventLLMHumanInput, runevents.CategoryMessage, `{}`},                             // 9: not AI
			{"r-mixed", runevents.EventLegacyAIMessage, runevents.CategoryMessage, `{}`},                           // 10
			{"r-mixed", runevents.EventLLMAIResponse, runevents.CategoryMessage, `{"caller":"lead_agent"}`},        // 11
			{"r-unasked", runevents.EventLLMAIResponse, runevents.CategoryMessage, `{}`},                           // 12: not requested
			{"r-case", runevents.EventLLMAIResponse, runevents.CategoryMessage, `{"caller":"Middleware:x"}`},       // 13: the prefix is case-sensitive
			{"r-colon", runevents.EventLLMAIResponse, runevents.CategoryMessage, `{"caller":"middleware"}`},        // 14: no colon, no prefix
			{"r-numeric", runevents.EventLLMAIResponse, runevents.CategoryMessage, `{"caller":7}`},                 // 15
			{"r-mw", runevents.EventLLMAIResponse, runevents.CategoryMessage, `{"caller":"middleware:guardrail"}`}, // 16: excluded
		}
		var events []runevents.NewEvent
		for _, r := range rows {
			events = append(events, withMeta(ev("t1", r.run, r.typ, r.category, `{"type":"ai"}`), r.meta))
		}
		putBatch(t, s, events)
		got, err := s.LastVisibleAISeqByRun(t.Context(), runevents.LastVisibleAIParams{ThreadID: "t1", Owner: asAlice,
			RunIDs: []string{"r-plain", "r-mw", "r-legacy", "r-nocaller", "r-onlymw", "r-trace", "r-mixed", "r-numeric", "r-case", "r-colon", "r-empty"}})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int64{"r-plain": 8, "r-mw": 2, "r-legacy": 4, "r-nocaller": 5, "r-mixed": 11, "r-numeric": 15, "r-case": 13, "r-colon": 14}
		if !sameMap(got, want) {
			t.Errorf("LastVisibleAISeqByRun = %v, want %v", got, want)
		}
		for _, runs := range [][]string{nil, {}} {
			got, err := s.LastVisibleAISeqByRun(t.Context(), runevents.LastVisibleAIParams{ThreadID: "t1", Owner: asAlice, RunIDs: runs})
			if err != nil || len(got) != 0 {
				t.Errorf("no runs: %v, %v; want an empty map", got, err)
			}
		}
		got, err = s.LastVisibleAISeqByRun(t.Context(), runevents.LastVisibleAIParams{ThreadID: "t-none", Owner: asAlice, RunIDs: []string{"r-plain"}})
		if err != nil || len(got) != 0 {
			t.Errorf("unknown thread: %v, %v; want an empty map", got, err)
		}
		_, err = s.LastVisibleAISeqByRun(t.Context(), runevents.LastVisibleAIParams{ThreadID: "t1", Owner: asAlice, RunIDs: []string{"ok", "not ok"}})
		wantCode(t, err, runstream.CodeInvalidArgument, "LastVisibleAISeqByRun with a bad run id")
	}},
}

func sameMap(got, want map[string]int64) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			return false
		}
	}
	return true
}
