package journal

import (
	"context"
	"maps"
	"strings"
	"time"

	"github.com/runstream/runstream/runevents"
)

// ModelTokens is the token usage of one model within a run.
type ModelTokens struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
	// CacheReadTokens is set only when a call reported cache reads.
	CacheReadTokens int64 `json:"cache_read_tokens,omitempty"`
}

// Summary is the run-level summary the journal accumulates (reference
// §3.8): token usage while callbacks fire, never read back from events.
type Summary struct {
	TotalInputTokens  int64                  `json:"total_input_tokens"`
	TotalOutputTokens int64                  `json:"total_output_tokens"`
	TotalTokens       int64                  `json:"total_tokens"`
	LLMCallCount      int64                  `json:"llm_call_count"`
	LeadAgentTokens   int64                  `json:"lead_agent_tokens"`
	SubagentTokens    int64                  `json:"subagent_tokens"`
	MiddlewareTokens  int64                  `json:"middleware_tokens"`
	ByModel           map[string]ModelTokens `json:"token_usage_by_model"`
	// MessageCount counts the human input, each call's first AI messages and
	// every tool result recorded.
	MessageCount int64 `json:"message_count"`
	// FirstHumanMessage and LastAIMessage are texts of at most 2000
	// characters; LastAIMessage is the latest lead-agent AI text.
	FirstHumanMessage string `json:"first_human_message,omitempty"`
	LastAIMessage     string `json:"last_ai_message,omitempty"`
	// ErrorFallback is set when a model answered with an error fallback
	// message; the run should then end in status error.
	ErrorFallback string `json:"error_fallback,omitempty"`
}

// Usage returns the token accounting of s as a run row holds it (the row
// has no cache_read_tokens).
func (s Summary) Usage() runevents.Usage {
	u := runevents.Usage{TotalInputTokens: s.TotalInputTokens, TotalOutputTokens: s.TotalOutputTokens,
		TotalTokens: s.TotalTokens, LLMCallCount: s.LLMCallCount, LeadAgentTokens: s.LeadAgentTokens,
		SubagentTokens: s.SubagentTokens, MiddlewareTokens: s.MiddlewareTokens,
		ByModel: make(map[string]runevents.ModelUsage, len(s.ByModel))}
	for name, m := range s.ByModel {
		u.ByModel[name] = runevents.ModelUsage{InputTokens: m.InputTokens, OutputTokens: m.OutputTokens, TotalTokens: m.TotalTokens}
	}
	return u
}

// Summary returns a snapshot of the run-level summary.
func (j *Journal) Summary() Summary {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.snapshotLocked()
}

func (j *Journal) snapshotLocked() Summary {
	s := j.sum
	s.ByModel = maps.Clone(j.sum.ByModel)
	return s
}

func (j *Journal) countUsageLocked(callID, caller string, m Message) {
	if j.opts.DisableTokenUsage || m.UsageMetadata == nil || j.counted[callID] {
		return
	}
	u := m.UsageMetadata
	total := u.TotalTokens
	if total == 0 {
		total = u.InputTokens + u.OutputTokens
	}
	if total <= 0 {
		return
	}
	j.counted[callID] = true
	j.sum.LLMCallCount++
	var cacheRead int64
	if u.InputTokenDetails != nil {
		cacheRead = u.InputTokenDetails.CacheRead
	}
	j.addTokensLocked(caller, modelName(m), u.InputTokens, u.OutputTokens, total, cacheRead)
}

func modelName(m Message) string {
	for _, key := range []string{"model_name", "model"} {
		if s, ok := m.ResponseMetadata[key].(string); ok && s != "" {
			return s
		}
	}
	return "unknown"
}

func (j *Journal) addTokensLocked(caller, model string, in, out, total, cacheRead int64) {
	j.sum.TotalInputTokens += in
	j.sum.TotalOutputTokens += out
	j.sum.TotalTokens += total
	switch {
	case strings.HasPrefix(caller, callerSubagentPrefix):
		j.sum.SubagentTokens += total
	case strings.HasPrefix(caller, callerMiddlewarePrefix):
		j.sum.MiddlewareTokens += total
	default:
		j.sum.LeadAgentTokens += total
	}
	mt := j.sum.ByModel[model]
	mt.InputTokens += in
	mt.OutputTokens += out
	mt.TotalTokens += total
	if cacheRead > 0 {
		mt.CacheReadTokens += cacheRead
	}
	j.sum.ByModel[model] = mt
	j.scheduleProgressLocked()
}

// ExternalUsage is the token usage of a model call the journal did not
// observe, such as a subagent's.
type ExternalUsage struct {
	// SourceRunID identifies the call; each is counted once.
	SourceRunID     string
	Caller          string
	ModelName       string
	InputTokens     int64
	OutputTokens    int64
	TotalTokens     int64
	CacheReadTokens int64
}

// RecordExternalUsage adds usage records to the totals, the caller bucket
// and the model bucket, without counting model calls (reference §3.7).
// Records without a source run id, seen before, or with no tokens (a total
// <= 0, or input+output when the total is not positive) are skipped; a
// skipped record is not remembered. It does nothing with token usage
// disabled.
func (j *Journal) RecordExternalUsage(records []ExternalUsage) {
	if j.opts.DisableTokenUsage {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, r := range records {
		if r.SourceRunID == "" || j.external[r.SourceRunID] {
			continue
		}
		total := r.TotalTokens
		if total <= 0 {
			total = r.InputTokens + r.OutputTokens
		}
		if total <= 0 {
			continue
		}
		j.external[r.SourceRunID] = true
		model := r.ModelName
		if model == "" {
			model = "unknown"
		}
		j.addTokensLocked(r.Caller, model, r.InputTokens, r.OutputTokens, total, r.CacheReadTokens)
	}
}

// progressState paces progress reports.
type progressState struct {
	inFlight bool
	done     chan struct{} // closed when the report in flight ends
	dirty    bool
	timer    *time.Timer
	last     time.Time // of the last successful report
}

// scheduleProgressLocked reports a snapshot now, or marks the summary
// dirty and schedules one delayed report when the last report is less than
// the interval old or one is in flight.
func (j *Journal) scheduleProgressLocked() {
	if j.opts.Progress == nil || j.completed {
		return
	}
	p := &j.progress
	if p.inFlight || p.timer != nil {
		p.dirty = true
		return
	}
	if !p.last.IsZero() {
		if wait := j.opts.ProgressInterval - time.Since(p.last); wait > 0 {
			p.dirty = true
			j.armLocked(wait)
			return
		}
	}
	j.reportLocked()
}

func (j *Journal) armLocked(wait time.Duration) {
	j.progress.timer = time.AfterFunc(wait, func() {
		j.mu.Lock()
		defer j.mu.Unlock()
		if j.progress.timer == nil {
			return // cancelled by Flush
		}
		j.progress.timer = nil
		j.progress.dirty = false
		j.reportLocked()
	})
}

func (j *Journal) reportLocked() {
	p := &j.progress
	p.inFlight = true
	p.done = make(chan struct{})
	snap := j.snapshotLocked()
	j.wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), j.opts.FlushTimeout)
		err := j.opts.Progress(ctx, snap)
		cancel()
		j.mu.Lock()
		defer j.mu.Unlock()
		if err != nil {
			j.log.Warn("journal: progress report failed", "err", err)
		} else {
			p.last = time.Now()
		}
		p.inFlight = false
		close(p.done)
		if p.dirty && p.timer == nil && !j.progressClosed() {
			p.dirty = false
			j.armLocked(j.opts.ProgressInterval)
		}
	})
}

// progressClosed is a hook for Flush's cancellation: after Flush, the
// journal schedules no delayed report until usage is counted again.
func (j *Journal) progressClosed() bool { return j.progressStopped }

// settleProgress waits for a report in flight and cancels a delayed one.
func (j *Journal) settleProgress(ctx context.Context) error {
	for {
		j.mu.Lock()
		j.progressStopped = true
		if j.progress.timer != nil {
			j.progress.timer.Stop()
			j.progress.timer = nil
		}
		if !j.progress.inFlight {
			j.progressStopped = false
			j.mu.Unlock()
			return nil
		}
		done := j.progress.done
		j.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			j.mu.Lock()
			j.progressStopped = false
			j.mu.Unlock()
			return ctx.Err()
		}
	}
}
