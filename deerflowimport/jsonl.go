package deerflowimport

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/runstream/runstream/redact"
)

// jsonlSource reads DeerFlow's JSONL store: <dir>/threads/<thread_id>/
// runs/<run_id>.jsonl, one record per line. It has no run rows or
// feedback.
type jsonlSource struct {
	dir string
}

// OpenJSONL opens the JSONL store in dir (the directory holding threads/,
// DeerFlow's ".deer-flow" by default).
func OpenJSONL(dir string) (Source, error) {
	info, err := os.Stat(filepath.Join(dir, "threads"))
	if err != nil || !info.IsDir() {
		return nil, fmt.Errorf("%s: no threads directory: not a DeerFlow JSONL store", dir)
	}
	return &jsonlSource{dir: dir}, nil
}

func (s *jsonlSource) Name() string { return "JSONL store " + s.dir }

func (s *jsonlSource) Close() error { return nil }

func (s *jsonlSource) Runs(func(Problem)) ([]Run, error) { return nil, nil }

func (s *jsonlSource) Feedback(func(Problem)) ([]Feedback, error) { return nil, nil }

// Threads reads each thread directory (in name order): every line of
// every run file, split on '\n' only, blank lines skipped. A line that is
// not a record, or names another thread, is reported; of rows repeating a
// seq, the first in file name order is kept and the others reported.
func (s *jsonlSource) Threads(fn func(string, []Row, []Problem) error) error {
	threads, err := os.ReadDir(filepath.Join(s.dir, "threads"))
	if err != nil {
		return err
	}
	for _, d := range threads {
		if !d.IsDir() {
			continue
		}
		var bad []Problem
		rows, err := s.thread(d.Name(), func(p Problem) { bad = append(bad, p) })
		if err != nil {
			return err
		}
		if len(rows) > 0 || len(bad) > 0 {
			if err := fn(d.Name(), rows, bad); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *jsonlSource) thread(id string, report func(Problem)) ([]Row, error) {
	runsDir := filepath.Join(s.dir, "threads", id, "runs")
	files, err := os.ReadDir(runsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rows []Row
	for _, f := range files {
		if f.IsDir() || !strings.HasSuffix(f.Name(), ".jsonl") {
			continue
		}
		rel := filepath.ToSlash(filepath.Join("threads", id, "runs", f.Name()))
		data, err := os.ReadFile(filepath.Join(runsDir, f.Name()))
		if err != nil {
			return nil, err
		}
		for i, line := range bytes.Split(data, []byte("\n")) {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			loc := rel + ":" + strconv.Itoa(i+1)
			ev, owned, err := decodeLine(line)
			switch {
			case err != nil:
				report(Problem{loc, err})
				continue
			case ev.ThreadID != id:
				report(Problem{loc, fmt.Errorf("thread_id %s in the directory of thread %s", redact.Quote(ev.ThreadID), id)})
				continue
			}
			rows = append(rows, Row{Loc: loc, Event: ev, Owned: owned})
		}
	}
	return dedupSeqs(rows, report), nil
}

// dedupSeqs sorts rows by seq (stable: the first read wins a tie) and
// reports the rows repeating a seq.
func dedupSeqs(rows []Row, report func(Problem)) []Row {
	slices.SortStableFunc(rows, func(a, b Row) int { return cmp.Compare(a.Event.Seq, b.Event.Seq) })
	var out []Row
	for _, r := range rows {
		if n := len(out); n > 0 && r.Event.Seq == out[n-1].Event.Seq {
			report(Problem{r.Loc, fmt.Errorf("seq %d repeats the seq of %s", r.Event.Seq, out[n-1].Loc)})
			continue
		}
		out = append(out, r)
	}
	return out
}
