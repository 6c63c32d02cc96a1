package sqlite

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/runstream/runstream/runevents"
)

// TestRowArgsSharedColumns checks that rows sharing a column's value with
// the previous row share its argument, and that a row differing from the
// previous one in any of those columns gets its own value.
func TestRowArgsSharedColumns(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 19, 0, 0, 123456000, time.UTC)
	t1 := t0.Add(time.Microsecond)
	rec := func(thread, run, user, typ, cat string, at time.Time) runevents.Record {
		return runevents.Record{ThreadID: thread, RunID: run, UserID: user,
			EventType: runevents.EventType(typ), Category: runevents.Category(cat),
			Content: json.RawMessage(`"x"`), Metadata: json.RawMessage(`{}`), CreatedAt: at}
	}
	recs := []runevents.Record{
		rec("t1", "r1", "u1", "human_message", "message", t0),
		rec("t1", "r1", "u1", "human_message", "message", t0),
		rec("t2", "r2", "u2", "ai_message", "trace", t1),
		rec("t2", "r1", "u1", "ai_message", "message", t0),
	}
	args := rowArgs(recs)
	if len(args) != len(recs)*insertColumns {
		t.Fatalf("rowArgs: %d arguments for %d rows, want %d", len(args), len(recs), len(recs)*insertColumns)
	}
	for i, r := range recs {
		row := args[i*insertColumns : (i+1)*insertColumns]
		want := []any{r.ThreadID, r.RunID, r.UserID, string(r.EventType), string(r.Category),
			string(r.Content), string(r.Metadata), nil, 0, nil, r.CreatedAt.Format(runevents.CreatedAtLayout)}
		for c, w := range want {
			if row[c] != w {
				t.Errorf("row %d column %d = %#v, want %#v", i, c, row[c], w)
			}
		}
	}
}
