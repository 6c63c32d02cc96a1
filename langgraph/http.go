package langgraph

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/redact"
	"github.com/runstream/runstream/runchunks"
	"github.com/runstream/runstream/threadruns"
)

// HTTP is what the service's handlers need of the HTTP API that mounts
// them (httpapi.Server: Mount, User, WriteError).
type HTTP struct {
	// Mount registers an endpoint acting for an authenticated caller.
	Mount func(pattern string, h http.Handler)
	// User returns the caller of a mounted endpoint's request.
	User func(r *http.Request) string
	// WriteError answers an error with the unified error body.
	WriteError func(w http.ResponseWriter, r *http.Request, err error)
	// StoreOnly, when set, answers the join (action "stream") and the
	// cancel (action "cancel") of a run without a chunk stream, as the
	// thread API answers the runs runstream only stores
	// (threadsvc.Service.StoreOnlyRun: 409, or 404 for an unknown run).
	// Without it such a run is 404.
	StoreOnly func(ctx context.Context, user, threadID, runID, action string) error
	// Expires, when set, returns when the caller's credential expires
	// (zero: never); a join stream is aborted then, as on lifetime
	// expiry, so that the client re-authenticates and resumes.
	Expires func(r *http.Request) time.Time
	// AfterRevoke, when set, arranges for f to be called, at most once,
	// when the credential of r's caller is revoked (httpapi.Server.AfterRevoke: an
	// API key removed from the keys file) and returns the stop that
	// unregisters it; a join stream is aborted then, as when the
	// credential expires, and the client's reconnection is refused.
	AfterRevoke func(r *http.Request, f func()) (stop func())
	// Kit reads, checks and decodes the push body and writes the answers
	// as the API's other endpoints do (httpapi.ThreadKit: Content-Type,
	// duplicate keys, member names, depth, body deadline). Its ReadJSON,
	// Decode and WriteJSON are required; its User is not used (User
	// above is).
	Kit threadruns.Kit
	// AcquireStream counts a join against the limit of the user's
	// streams (httpapi.Server.AcquireStream), or answers RATE_LIMITED;
	// required.
	AcquireStream func(user string) (release func(), err error)
}

// Routes are the endpoints Mount registers.
var Routes = []string{
	"POST /api/runs/{run_id}/stream-chunks",
	"GET /api/runs/{run_id}/stream-control",
	"GET /api/threads/{thread_id}/runs/{run_id}/stream",
	"POST /api/threads/{thread_id}/runs/{run_id}/stream",
	"POST /api/threads/{thread_id}/runs/{run_id}/cancel",
	"GET /api/threads/{thread_id}/runs/{run_id}/join",
}

// Mount registers the service's endpoints (Routes) with h.
func (s *Service) Mount(h HTTP) {
	if h.Kit.ReadJSON == nil || h.Kit.Decode == nil || h.Kit.WriteJSON == nil {
		panic("langgraph: Mount needs HTTP.Kit's ReadJSON, Decode and WriteJSON (httpapi.ThreadKit)")
	}
	if h.AcquireStream == nil {
		panic("langgraph: Mount needs HTTP.AcquireStream (httpapi.Server.AcquireStream)")
	}
	a := &api{s: s, h: h}
	handlers := []func(http.ResponseWriter, *http.Request) error{a.push, a.control, a.join, a.join, a.cancel, a.join}
	for i, pattern := range Routes {
		handle := handlers[i]
		h.Mount(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := handle(w, r); err != nil {
				a.writeError(w, r, err)
			}
		}))
	}
}

type api struct {
	s *Service
	h HTTP
}

// writeError answers err with the unified error body; a CONFLICT also
// carries its details (expected_index, current_epoch, status) and a
// FastAPI-style "detail" at the top level, where DeerFlow's clients read
// them. Its message and details pass through redact.Echo, as every other
// error answer's do (a conflict's message names the run).
func (a *api) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := runstream.AsError(err)
	if e.Code != runstream.CodeConflict {
		a.h.WriteError(w, r, err)
		return
	}
	message, details := redact.Echo(e.Message), redact.EchoDetails(e.Details)
	body := map[string]any{"code": e.Code, "message": message, "retryable": false, "detail": message,
		"requestId": w.Header().Get("X-Request-Id")}
	if len(details) > 0 {
		body["details"] = details
	}
	for k, v := range details {
		body[k] = v
	}
	a.writeJSON(w, http.StatusConflict, body)
}

// writeJSON answers with v as JSON, with the Kit's writer.
func (a *api) writeJSON(w http.ResponseWriter, status int, v any) {
	a.h.Kit.WriteJSON(w, status, v)
}

// The path parameters are read as the thread API's run routes read them.
var (
	pathID       = threadruns.PathID
	threadAndRun = threadruns.ThreadAndRun
)

// push answers POST /api/runs/{run_id}/stream-chunks.
func (a *api) push(w http.ResponseWriter, r *http.Request) error {
	runID, err := pathID(r, "run_id")
	if err != nil {
		return err
	}
	req, err := a.readPush(r)
	if err != nil {
		return err
	}
	ans, err := a.s.Push(r.Context(), a.h.User(r), runID, req)
	if err != nil {
		return err
	}
	a.writeJSON(w, http.StatusOK, ans)
	return nil
}

// readPush reads, checks and decodes the push body with the Kit.
func (a *api) readPush(r *http.Request) (PushRequest, error) {
	var req PushRequest
	body, err := a.h.Kit.ReadJSON(r)
	if err != nil {
		return req, err
	}
	return req, a.h.Kit.Decode(body, &req)
}

// control answers GET /api/runs/{run_id}/stream-control?wait=25s; during
// a shutdown 503 with Retry-After (the writer of the error body sets it).
func (a *api) control(w http.ResponseWriter, r *http.Request) error {
	runID, err := pathID(r, "run_id")
	if err != nil {
		return err
	}
	wait, err := parseWait(r.URL.Query().Get("wait"))
	if err != nil {
		return err
	}
	seen, err := parseCancelSeen(r)
	if err != nil {
		return err
	}
	ans, err := a.s.Control(r.Context(), a.h.User(r), runID, wait, seen)
	if err != nil {
		return err
	}
	a.writeJSON(w, http.StatusOK, ans)
	return nil
}

// parseCancelSeen reads cancel_seen, the requested_at of the cancel the
// producer already has (RFC 3339); the zero time when absent.
func parseCancelSeen(r *http.Request) (time.Time, error) {
	v := r.URL.Query().Get("cancel_seen")
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, runstream.Errorf(runstream.CodeValidationFailed, "cancel_seen must be the requested_at of a cancel (RFC 3339)").WithDetail("parameter", "cancel_seen")
	}
	return t, nil
}

// parseWait reads a wait: a Go duration ("25s") or whole seconds; empty
// is 0.
func parseWait(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return d, nil
	}
	return 0, runstream.Errorf(runstream.CodeValidationFailed, "wait must be a duration such as 25s, or seconds").WithDetail("parameter", "wait")
}

// join answers GET (and POST) /api/threads/{thread_id}/runs/{run_id}/stream.
// A POST with action cancels first, as DeerFlow's gateway does: with
// wait=1 it answers 204 once the run ended, else it streams.
func (a *api) join(w http.ResponseWriter, r *http.Request) error {
	threadID, runID, err := threadAndRun(r)
	if err != nil {
		return err
	}
	cursor, err := ParseCursor(r.Header.Get("Last-Event-ID"))
	if err != nil {
		return err
	}
	modes, err := ParseModes(r.URL.Query()["stream_mode"])
	if err != nil {
		return err
	}
	user := a.h.User(r)
	action, err := threadruns.QueryAction(r)
	if err != nil {
		return err
	}
	wait, err := threadruns.QueryWait(r)
	if err != nil {
		return err
	}
	if r.Method == http.MethodPost && action != "" {
		outcome, err := a.s.Cancel(r.Context(), user, threadID, runID, action, wait)
		if err != nil {
			return a.storeOnly(r, err, threadID, runID, "cancel")
		}
		if outcome == CancelDone {
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
	}
	run, err := a.s.userRun(r.Context(), user, runID)
	if err == nil && run.ThreadID != threadID {
		err = runchunks.NotFound(runID)
	}
	if err != nil {
		return a.storeOnly(r, err, threadID, runID, "stream")
	}
	if a.s.stop.Err() != nil {
		w.Header().Set("Retry-After", "1")
		return shuttingDown()
	}
	release, err := a.h.AcquireStream(user)
	if err != nil {
		w.Header().Set("Retry-After", "1")
		return err
	}
	defer release()
	lifetime := a.s.cfg.MaxLifetime
	if a.h.Expires != nil {
		if at := a.h.Expires(r); !at.IsZero() {
			lifetime = max(min(lifetime, time.Until(at)), time.Millisecond)
		}
	}
	var revoked chan struct{} // nil: never closed
	if a.h.AfterRevoke != nil {
		revoked = make(chan struct{})
		stop := a.h.AfterRevoke(r, func() { close(revoked) }) // called at most once
		defer stop()
	}
	a.s.join(w, r, run, cursor, modes, lifetime, revoked)
	return nil
}

// storeOnly answers the join (action "stream") or cancel of a run without
// a chunk stream with HTTP.StoreOnly: 409 for a run runstream only stores,
// 404 for an unknown one; err, the chunk store's NOT_FOUND, without it.
func (a *api) storeOnly(r *http.Request, err error, threadID, runID, action string) error {
	if runstream.AsError(err).Code != runstream.CodeNotFound || a.h.StoreOnly == nil {
		return err
	}
	return a.h.StoreOnly(r.Context(), a.h.User(r), threadID, runID, action)
}

// cancel answers POST /api/threads/{thread_id}/runs/{run_id}/cancel:
// 202 once the request is stored, 204 with wait=1 once the run ended.
func (a *api) cancel(w http.ResponseWriter, r *http.Request) error {
	threadID, runID, err := threadAndRun(r)
	if err != nil {
		return err
	}
	action, err := threadruns.QueryAction(r)
	if err != nil {
		return err
	}
	if action == "" {
		action = "interrupt"
	}
	wait, err := threadruns.QueryWait(r)
	if err != nil {
		return err
	}
	outcome, err := a.s.Cancel(r.Context(), a.h.User(r), threadID, runID, action, wait)
	if err != nil {
		return a.storeOnly(r, err, threadID, runID, "cancel")
	}
	if outcome == CancelDone {
		w.WriteHeader(http.StatusNoContent)
	} else {
		w.WriteHeader(http.StatusAccepted)
	}
	return nil
}
