package runeventstest

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/runstream/runstream/runevents"
)

var concurrencyTests = []test{
	{"Puts", func(t *testing.T, s runevents.Store) {
		const writers, perWriter = 100, 200
		got := make([][]runevents.Record, writers)
		errs := make([]error, writers)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				run := fmt.Sprintf("r%d", w)
				for range perWriter {
					rec, err := s.Put(t.Context(), trace("t1", run))
					if err != nil {
						errs[w] = err
						return
					}
					got[w] = append(got[w], rec)
				}
			})
		}
		wg.Wait()
		var all []int64
		for w := range writers {
			if errs[w] != nil {
				t.Fatalf("writer %d: %v", w, errs[w])
			}
			own := seqs(got[w])
			if !slices.IsSorted(own) {
				t.Errorf("writer %d got seqs out of order: %v", w, own)
			}
			all = append(all, own...)
		}
		slices.Sort(all)
		if !equalSeqs(all, span(1, writers*perWriter)) {
			t.Errorf("seqs of %d concurrent Puts are not exactly 1..%d (first %v)", len(all), writers*perWriter, all[:min(10, len(all))])
		}
		for w := range writers {
			sameRecords(t, fmt.Sprintf("run of writer %d", w), runRows(t, s, "t1", fmt.Sprintf("r%d", w), asAlice), got[w])
		}
	}},
	{"BatchesWithReader", func(t *testing.T, s runevents.Store) {
		const writers, batches, size = 20, 10, 25
		got := make([][]runevents.Record, writers)
		errs := make([]error, writers)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				run := fmt.Sprintf("r%d", w)
				events := make([]runevents.NewEvent, size)
				for i := range events {
					events[i] = msg("t1", run)
				}
				for range batches {
					recs, err := s.PutBatch(t.Context(), events)
					if err != nil {
						errs[w] = err
						return
					}
					got[w] = append(got[w], recs...)
				}
			})
		}
		// A reader following the thread must never see a later seq before
		// an earlier one: what it sees is always 1..k, whole batches only.
		var done atomic.Bool
		readerErr := make(chan error, 1)
		go func() {
			defer close(readerErr)
			for !done.Load() {
				recs, err := s.ListMessages(t.Context(), runevents.ListMessagesParams{ThreadID: "t1", Owner: asAlice, Limit: writers * batches * size, AfterSeq: runevents.Seq(0)})
				if err != nil {
					readerErr <- err
					return
				}
				if seen := seqs(recs); !equalSeqs(seen, span(1, int64(len(seen)))) || len(seen)%size != 0 {
					readerErr <- fmt.Errorf("a reader saw %d rows that are not 1..k of whole batches (around %v)", len(seen), firstGap(seen))
					return
				}
			}
		}()
		wg.Wait()
		done.Store(true)
		if err := <-readerErr; err != nil {
			t.Error(err)
		}
		var all []int64
		for w := range writers {
			if errs[w] != nil {
				t.Fatalf("writer %d: %v", w, errs[w])
			}
			for b := 0; b < len(got[w]); b += size {
				if batch := seqs(got[w][b : b+size]); !equalSeqs(batch, span(batch[0], batch[0]+size-1)) {
					t.Errorf("writer %d batch %d: seqs %v are not consecutive", w, b/size, batch)
				}
			}
			all = append(all, seqs(got[w])...)
			sameRecords(t, fmt.Sprintf("run of writer %d", w), runRows(t, s, "t1", fmt.Sprintf("r%d", w), asAlice), got[w])
		}
		slices.Sort(all)
		if !equalSeqs(all, span(1, writers*batches*size)) {
			t.Errorf("seqs of concurrent batches are not exactly 1..%d", writers*batches*size)
		}
	}},
	{"ThreadsIndependent", func(t *testing.T, s runevents.Store) {
		const threads, perThread = 8, 50
		errs := make([]error, threads)
		var wg sync.WaitGroup
		for th := range threads {
			wg.Go(func() {
				thread := fmt.Sprintf("t%d", th)
				for i := range perThread {
					rec, err := s.Put(t.Context(), trace(thread, "r1"))
					if err == nil && rec.Seq != int64(i+1) {
						err = fmt.Errorf("Put #%d on %s got seq %d", i+1, thread, rec.Seq)
					}
					if err != nil {
						errs[th] = err
						return
					}
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	}},
}

// firstGap returns the seqs around the first place where seen is not 1..k.
func firstGap(seen []int64) []int64 {
	for i, seq := range seen {
		if seq != int64(i+1) {
			return seen[max(i-2, 0):min(i+3, len(seen))]
		}
	}
	return seen[max(len(seen)-3, 0):]
}
