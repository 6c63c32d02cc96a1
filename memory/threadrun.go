package memory

import (
	"bytes"
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/runevents"
)

// RunStore is the in-memory runevents.RunStore: thread run rows and
// feedback. The zero value is not usable; call NewRunStore.
//
// Rows are keyed by (thread, run). FindRun, when several threads hold the
// same run id, returns the oldest visible row (by CreatedAt, then thread
// id). Feedback ids are "fb_" and 32 random hex digits.
type RunStore struct {
	cfg config

	mu       sync.RWMutex
	runs     map[threadRunKey]runevents.ThreadRun
	feedback map[feedbackKey]runevents.Feedback
}

var _ runevents.RunStore = (*RunStore)(nil)

type threadRunKey struct{ thread, run string }

type feedbackKey struct{ thread, run, user, message string }

// NewRunStore returns an empty run store. Of the options only WithClock
// applies: it stamps CreatedAt and UpdatedAt when the writer gives none.
func NewRunStore(opts ...Option) *RunStore {
	cfg := config{now: time.Now}
	for _, o := range opts {
		o(&cfg)
	}
	return &RunStore{cfg: cfg, runs: map[threadRunKey]runevents.ThreadRun{}, feedback: map[feedbackKey]runevents.Feedback{}}
}

// PutRun creates or updates the run row.
func (s *RunStore) PutRun(_ context.Context, r runevents.ThreadRun) (runevents.ThreadRun, error) {
	r, err := runevents.PrepareRunRow(r, s.cfg.now())
	if err != nil {
		return runevents.ThreadRun{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := threadRunKey{r.ThreadID, r.RunID}
	if old, ok := s.runs[key]; ok {
		if old.OwnerID != r.OwnerID {
			return runevents.ThreadRun{}, errThreadRunNotFound(r.RunID)
		}
		if !old.Status.MayBecome(r.Status) {
			return runevents.ThreadRun{}, runevents.ErrRunFinished(r.RunID, old.Status, r.Status)
		}
		r.CreatedAt = old.CreatedAt
	}
	s.runs[key] = r
	return cloneThreadRun(r), nil
}

// putStatus creates the row r or sets the stored row's status and
// updated_at to r's, unguarded by RunStatus.MayBecome: a chunk push's. r
// is a valid row with its times set; false when another owner holds the
// row, which is left as it is.
func (s *RunStore) putStatus(r runevents.ThreadRun) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := threadRunKey{r.ThreadID, r.RunID}
	old, ok := s.runs[key]
	switch {
	case !ok:
		s.runs[key] = cloneThreadRun(r)
	case old.OwnerID != r.OwnerID:
		return false
	default:
		old.Status, old.UpdatedAt = r.Status, r.UpdatedAt
		s.runs[key] = old
	}
	return true
}

func cloneThreadRun(r runevents.ThreadRun) runevents.ThreadRun {
	r.Metadata = bytes.Clone(r.Metadata)
	r.Kwargs = bytes.Clone(r.Kwargs)
	r.Usage.ByModel = maps.Clone(r.Usage.ByModel)
	return r
}

func errThreadRunNotFound(runID string) error {
	return runstream.Errorf(runstream.CodeNotFound, "run %s not found", runID)
}

// GetRun returns the row of (threadID, runID) visible to owner.
func (s *RunStore) GetRun(_ context.Context, threadID, runID string, owner runevents.Owner) (runevents.ThreadRun, error) {
	if err := firstError(runevents.ValidateID("thread_id", threadID), runevents.ValidateID("run_id", runID), runevents.CheckOwner(owner)); err != nil {
		return runevents.ThreadRun{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.runs[threadRunKey{threadID, runID}]
	if !ok || !owner.Sees(r.OwnerID) {
		return runevents.ThreadRun{}, errThreadRunNotFound(runID)
	}
	return cloneThreadRun(r), nil
}

// FindRun returns the oldest row of runID visible to owner.
func (s *RunStore) FindRun(_ context.Context, runID string, owner runevents.Owner) (runevents.ThreadRun, error) {
	if err := firstError(runevents.ValidateID("run_id", runID), runevents.CheckOwner(owner)); err != nil {
		return runevents.ThreadRun{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var found []runevents.ThreadRun
	for key, r := range s.runs {
		if key.run == runID && owner.Sees(r.OwnerID) {
			found = append(found, r)
		}
	}
	if len(found) == 0 {
		return runevents.ThreadRun{}, errThreadRunNotFound(runID)
	}
	return cloneThreadRun(slices.MinFunc(found, compareThreadRuns)), nil
}

// compareThreadRuns orders runs oldest first, then by thread and run id.
func compareThreadRuns(a, b runevents.ThreadRun) int {
	return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ThreadID, b.ThreadID), cmp.Compare(a.RunID, b.RunID))
}

// ListRuns returns the thread's runs visible to owner, oldest first (ties
// by run id).
func (s *RunStore) ListRuns(_ context.Context, threadID string, owner runevents.Owner) ([]runevents.ThreadRun, error) {
	if err := firstError(runevents.ValidateID("thread_id", threadID), runevents.CheckOwner(owner)); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []runevents.ThreadRun
	for key, r := range s.runs {
		if key.thread == threadID && owner.Sees(r.OwnerID) {
			out = append(out, cloneThreadRun(r))
		}
	}
	slices.SortFunc(out, compareThreadRuns)
	return out, nil
}

// ListRunsNewest returns at most limit of the thread's runs visible to
// owner, newest first (ties by run id, descending), after the offset
// newest.
func (s *RunStore) ListRunsNewest(ctx context.Context, threadID string, owner runevents.Owner, limit, offset int) ([]runevents.ThreadRun, error) {
	runs, err := s.ListRuns(ctx, threadID, owner)
	if err != nil || limit <= 0 {
		return nil, err
	}
	slices.Reverse(runs)
	runs = runs[min(len(runs), max(offset, 0)):]
	return runs[:min(len(runs), limit)], nil
}

// PutFeedback creates or replaces f.UserID's feedback on the run and
// f.MessageID. The id and CreatedAt of an existing feedback are kept;
// f.ID is ignored.
func (s *RunStore) PutFeedback(_ context.Context, f runevents.Feedback) (runevents.Feedback, error) {
	f, err := f.Prepare()
	if err != nil {
		return runevents.Feedback{}, err
	}
	now := s.cfg.now().UTC().Truncate(time.Microsecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	key := feedbackKey{f.ThreadID, f.RunID, f.UserID, f.MessageID}
	if old, ok := s.feedback[key]; ok {
		f.ID, f.CreatedAt = old.ID, old.CreatedAt
	} else {
		f.ID, f.CreatedAt = runevents.NewFeedbackID(), now
	}
	f.UpdatedAt = now
	s.feedback[key] = f
	return cloneFeedback(f), nil
}

func cloneFeedback(f runevents.Feedback) runevents.Feedback {
	f.Rating = bytes.Clone(f.Rating)
	f.Tags = slices.Clone(f.Tags)
	return f
}

// ListFeedback returns the feedback on the given runs visible to owner,
// by run id: of each run the one Feedback.ShownBefore the others.
func (s *RunStore) ListFeedback(_ context.Context, threadID string, runIDs []string, owner runevents.Owner) (map[string]runevents.Feedback, error) {
	errs := []error{runevents.ValidateID("thread_id", threadID), runevents.CheckOwner(owner)}
	for _, id := range runIDs {
		errs = append(errs, runevents.ValidateID("run_id", id))
	}
	if err := firstError(errs...); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string]runevents.Feedback{}
	for _, id := range runIDs {
		for key, f := range s.feedback {
			if key.thread != threadID || key.run != id || !owner.Sees(key.user) {
				continue
			}
			if old, ok := out[id]; !ok || f.ShownBefore(old) {
				out[id] = cloneFeedback(f)
			}
		}
	}
	return out, nil
}

// DeleteFeedback deletes the feedback on the run visible to owner and
// returns how many.
func (s *RunStore) DeleteFeedback(_ context.Context, threadID, runID string, owner runevents.Owner) (int, error) {
	if err := firstError(runevents.ValidateID("thread_id", threadID), runevents.ValidateID("run_id", runID), runevents.CheckOwner(owner)); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for key := range s.feedback {
		if key.thread == threadID && key.run == runID && owner.Sees(key.user) {
			delete(s.feedback, key)
			n++
		}
	}
	return n, nil
}

// ListRunFeedback returns every feedback on the run visible to owner,
// oldest first (ties by id).
func (s *RunStore) ListRunFeedback(_ context.Context, threadID, runID string, owner runevents.Owner) ([]runevents.Feedback, error) {
	if err := firstError(runevents.ValidateID("thread_id", threadID), runevents.ValidateID("run_id", runID), runevents.CheckOwner(owner)); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []runevents.Feedback
	for key, f := range s.feedback {
		if key.thread == threadID && key.run == runID && owner.Sees(key.user) {
			out = append(out, cloneFeedback(f))
		}
	}
	slices.SortFunc(out, func(a, b runevents.Feedback) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// DeleteFeedbackByID deletes the feedback id on the run if owner sees it,
// and returns how many (0 or 1).
func (s *RunStore) DeleteFeedbackByID(_ context.Context, threadID, runID, id string, owner runevents.Owner) (int, error) {
	if err := firstError(runevents.ValidateID("thread_id", threadID), runevents.ValidateID("run_id", runID), runevents.CheckOwner(owner)); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, f := range s.feedback {
		if f.ID == id && key.thread == threadID && key.run == runID && owner.Sees(key.user) {
			delete(s.feedback, key)
			return 1, nil
		}
	}
	return 0, nil
}
