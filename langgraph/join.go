package langgraph

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/runchunks"
)

// A join stream replays a run's chunks from the store page by page. A
// chunk may be megabytes (a values state), so a page is bounded by bytes
// as well as by count: the first read takes firstReplayPage chunks (the
// stream starts at once), each next one replayPage, and every read stops
// past replayBytes of data (runchunks.Store.ReadChunks). What the stream
// has framed is written each flushBytes, in slices of flushBytes each
// within its own writeTimeout, so a slow reader is not cut for a page
// that takes long to send.
const (
	replayPage      = 64
	firstReplayPage = 4
	replayBytes     = 4 << 20
	flushBytes      = 256 << 10
)

// writeTimeout bounds each write to a joiner; a joiner that does not
// take a write in time is cut (it reconnects and resumes).
const writeTimeout = 10 * time.Second

// Modes filters a join stream by the SDK's stream_mode values. The empty
// Modes passes everything.
type Modes []string

// knownModes are the stream modes of the LangGraph API; "messages-tuple"
// is the SDK's name for the messages chunks.
var knownModes = []string{"values", "messages", "messages-tuple", "updates", "events", "debug", "custom", "tasks", "checkpoints"}

// ParseModes reads the stream_mode query values: each a mode name, a
// comma-separated list, or a JSON array of names (the SDK sends an array
// as its JSON text). A name that is not one of the LangGraph API's modes
// is VALIDATION_FAILED, as LangGraph answers 422 for it.
func ParseModes(values []string) (Modes, error) {
	var out Modes
	for _, v := range values {
		var list []string
		if !strings.HasPrefix(v, "[") || json.Unmarshal([]byte(v), &list) != nil {
			list = list[:0]
			for m := range strings.SplitSeq(v, ",") {
				if m = strings.TrimSpace(m); m != "" {
					list = append(list, m)
				}
			}
		}
		for _, m := range list {
			if !slices.Contains(knownModes, m) {
				return nil, runstream.Errorf(runstream.CodeValidationFailed, "stream_mode: each mode must be one of %s", strings.Join(knownModes, ", ")).
					WithDetail("parameter", "stream_mode").WithDetail("in", "query")
			}
			out = append(out, m)
		}
	}
	return out, nil
}

// Shows reports whether a chunk of event passes the filter. A subgraph's
// event "mode|namespace" is its mode's; "messages-tuple" selects the
// "messages" events, "messages" those and the "messages/…" ones; errors
// always pass.
func (m Modes) Shows(event string) bool {
	if len(m) == 0 || event == runchunks.ErrorEvent {
		return true
	}
	mode, _, _ := strings.Cut(event, "|")
	for _, want := range m {
		switch {
		case want == mode,
			want == "messages-tuple" && mode == "messages",
			want == "messages" && strings.HasPrefix(mode, "messages/"):
			return true
		}
	}
	return false
}

// ParseCursor reads Last-Event-ID: absent or -1 is the start (-1), N
// resumes after chunk N.
func ParseCursor(header string) (int64, error) {
	header = strings.TrimSpace(header)
	if header == "" {
		return -1, nil
	}
	n, err := strconv.ParseInt(header, 10, 64)
	if err != nil || n < -1 {
		return 0, runstream.Errorf(runstream.CodeValidationFailed, "Last-Event-ID must be -1 (from the start) or a chunk index").
			WithDetail("parameter", "Last-Event-ID")
	}
	return n, nil
}

// errAbort ends a join stream by aborting its connection: lifetime
// expiry and shutdown, after which the SDK must reconnect, never take the
// end of the body for the end of the run.
var errAbort = errors.New("join stream aborted")

// errDone ends a join stream cleanly: end or gap written.
var errDone = errors.New("join stream done")

// joiner writes one join stream.
type joiner struct {
	s      *Service
	w      http.ResponseWriter
	rc     *http.ResponseController
	run    runchunks.Run
	modes  Modes
	cursor int64 // the last chunk index delivered (-1: none)
	// requested is the cursor the client asked for, for the gap event.
	requested int64
	buf       []byte
	heartbeat *time.Timer
}

// Join serves the join stream of run (visible to the caller) after
// cursor: 200 with the Location the SDK reconnects to, the metadata
// frame, the chunks, then the end; a gap event when the cursor is below
// what is kept. It returns when the stream ended or the client left; once
// lifetime has passed and on Shutdown it aborts the connection (panics
// with http.ErrAbortHandler).
func (s *Service) Join(w http.ResponseWriter, r *http.Request, run runchunks.Run, cursor int64, modes Modes, lifetime time.Duration) {
	s.join(w, r, run, cursor, modes, lifetime, nil)
}

// join is Join, also aborted once revoked is closed (the caller's
// credential was revoked); a nil revoked is never closed.
func (s *Service) join(w http.ResponseWriter, r *http.Request, run runchunks.Run, cursor int64, modes Modes, lifetime time.Duration, revoked <-chan struct{}) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("Location", "/threads/"+run.ThreadID+"/runs/"+run.RunID+"/stream")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	// A cursor past the run's chunks (none can have been seen) is its
	// last: the stream goes on from there, and ends with the run.
	j := &joiner{s: s, w: w, rc: http.NewResponseController(w), run: run, modes: modes, cursor: min(cursor, run.NextIndex-1), requested: cursor,
		heartbeat: time.NewTimer(s.cfg.Heartbeat)}
	defer j.heartbeat.Stop()
	meta, _ := json.Marshal(map[string]string{"run_id": run.RunID, "thread_id": run.ThreadID})
	j.buf = append(append(append(j.buf, "event: metadata\ndata: "...), meta...), "\n\n"...)
	sub := s.hub.Subscribe(StreamKey(run.RunID), j.cursor+1)
	defer sub.Close()
	err := j.follow(r.Context(), sub, lifetime, revoked)
	if errors.Is(err, errAbort) {
		panic(http.ErrAbortHandler)
	}
}

// follow runs the stream until it ends; it is aborted (errAbort) after
// maxLifetime, on Shutdown and once revoked is closed.
func (j *joiner) follow(ctx context.Context, sub *live.Subscription, maxLifetime time.Duration, revoked <-chan struct{}) error {
	lifetime := time.NewTimer(maxLifetime)
	defer lifetime.Stop()
	err := j.catchUp(ctx)
	for err == nil {
		select {
		case <-ctx.Done(): // the client left, or the server cancels its requests
			if j.s.stop.Err() != nil {
				return errAbort
			}
			return nil
		case <-j.s.stop.Done():
			return errAbort
		case <-lifetime.C:
			return errAbort
		case <-revoked: // as on lifetime expiry: the client re-authenticates
			return errAbort
		case <-sub.Ready():
			err = j.deliverLive(ctx, sub)
		case <-j.heartbeat.C:
			j.buf = append(j.buf, ": heartbeat\n"...)
			err = j.flush()
		}
	}
	if errors.Is(err, errDone) {
		return nil
	}
	if errors.Is(err, errAbort) || j.s.stop.Err() != nil {
		return errAbort
	}
	if ctx.Err() == nil {
		j.s.cfg.Logger.Info("langgraph: join stream cut", "run_id", j.run.RunID, "cursor", j.cursor, "error", err)
	}
	return errAbort // a failed write or read: the client must not see a clean end
}

// deliverLive writes the subscription's events; a cut subscription or a
// missing index means the store is read after the cursor instead.
func (j *joiner) deliverLive(ctx context.Context, sub *live.Subscription) error {
	events, cut := sub.Take()
	if cut {
		return j.catchUp(ctx)
	}
	for _, ev := range events {
		if ev.Seq <= j.cursor+1 {
			continue
		}
		if ev.Seq != j.cursor+2 {
			if err := j.catchUp(ctx); err != nil {
				return err
			}
			continue
		}
		if ev.Terminal {
			return j.end()
		}
		if event, _ := ev.Attrs.(string); j.modes.Shows(event) {
			j.buf = append(j.buf, ev.Frame...)
		}
		j.cursor = ev.Seq - 1
	}
	return j.flush()
}

// catchUp reads the store after the cursor until it has no more, then
// writes the end when the run has ended, or a gap event when the cursor
// is below the chunks kept.
func (j *joiner) catchUp(ctx context.Context) error {
	page := firstReplayPage
	for {
		chunks, err := j.s.store.ReadChunks(ctx, j.run.RunID, j.cursor, page, replayBytes)
		if err != nil {
			return err
		}
		if len(chunks) > 0 && chunks[0].Index != j.cursor+1 {
			run, err := j.s.store.GetRun(ctx, j.run.RunID)
			if err != nil {
				return err
			}
			return j.gap(run)
		}
		read := 0
		for _, c := range chunks {
			read += len(c.Data)
			if j.modes.Shows(c.Event) {
				j.buf = chunkFrame(j.buf, c)
			}
			j.cursor = c.Index
			if len(j.buf) >= flushBytes {
				if err := j.flush(); err != nil {
					return err
				}
			}
		}
		if err := j.flush(); err != nil {
			return err
		}
		if len(chunks) == page || read >= replayBytes { // a full page: more may follow
			page = replayPage
			continue
		}
		run, err := j.s.store.GetRun(ctx, j.run.RunID)
		if err != nil {
			return err
		}
		switch {
		case run.Ended() && run.FirstIndex == run.NextIndex && j.cursor+1 < run.NextIndex:
			// Its chunks expired: the client reloads the durable state.
			return j.end()
		case j.cursor+1 < run.FirstIndex:
			return j.gap(run)
		case j.cursor+1 < run.NextIndex:
			continue // written meanwhile
		case run.Ended():
			return j.end()
		}
		return nil
	}
}

func (j *joiner) end() error {
	j.buf = append(j.buf, endFrame...)
	if err := j.flush(); err != nil {
		return err
	}
	return errDone
}

// gap writes DeerFlow's gap event: the cursor is older than what is kept.
func (j *joiner) gap(run runchunks.Run) error {
	body := map[string]any{
		"code":                        "stream_replay_gap",
		"run_id":                      run.RunID,
		"requested_event_id":          strconv.FormatInt(j.requested, 10),
		"earliest_available_event_id": nil,
		"latest_available_event_id":   nil,
		"recovery":                    "reload_durable_state",
	}
	if run.FirstIndex < run.NextIndex {
		body["earliest_available_event_id"] = strconv.FormatInt(run.FirstIndex, 10)
		body["latest_available_event_id"] = strconv.FormatInt(run.NextIndex-1, 10)
	}
	data, _ := json.Marshal(body)
	j.buf = append(append(append(j.buf, "event: gap\ndata: "...), data...), "\n\n"...)
	if err := j.flush(); err != nil {
		return err
	}
	return errDone
}

// flush writes the buffer, each flushBytes within writeTimeout.
func (j *joiner) flush() error {
	if len(j.buf) == 0 {
		return nil
	}
	for rest := j.buf; len(rest) > 0; {
		slice := rest[:min(len(rest), flushBytes)]
		rest = rest[len(slice):]
		j.rc.SetWriteDeadline(time.Now().Add(writeTimeout)) // unsupported by some writers: then writes just block
		if _, err := j.w.Write(slice); err != nil {
			return err
		}
	}
	if err := j.rc.Flush(); err != nil {
		return err
	}
	j.buf = j.buf[:0]
	j.heartbeat.Reset(j.s.cfg.Heartbeat)
	return nil
}
