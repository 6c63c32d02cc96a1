package httpapi

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/runstream/runstream/auth"
	"github.com/runstream/runstream/ssestream"
)

// StreamConfig bounds the SSE streams (see ssestream.Config).
type StreamConfig = ssestream.Config

// DefaultMaxStreamsPerUser is the default of StreamConfig.MaxPerUser.
const DefaultMaxStreamsPerUser = ssestream.DefaultMaxPerUser

// Shutdown ends the SSE streams, those that took their connection over
// from net/http included (http.Server.Shutdown neither closes nor waits
// for them), and answers later stream requests UNAVAILABLE. It returns
// when the streams have ended, or with ctx's error. Call it with or after
// http.Server.Shutdown.
func (s *Server) Shutdown(ctx context.Context) error { return s.streams.Shutdown(ctx) }

// serveStream answers a stream request with the follower of src from
// cursor (ssestream.Set.Serve): the caller's stream limit is counted in
// the metrics, the caller's credential bounds the stream's lifetime (it
// ends when the credential expires or is revoked, see AfterRevoke), a
// stream that takes its connection over writes its access log line when
// it ends, and what names the stream in logs. It returns an error, with
// nothing written and nothing subscribed, when the caller has too many
// streams open or the server is shutting down.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, src ssestream.Source, cursor int64, what slog.Attr) error {
	c := callerOf(r)
	// The options live as long as the stream: they keep the caller's
	// identity, not the request (its header, URL and copies would stay in
	// memory for every idle follower).
	return s.streams.Serve(w, r, src, cursor, ssestream.Options{
		User:    c.User,
		Expires: c.Expires,
		AfterRevoke: func(end func()) (stop func()) {
			return auth.AfterRevoke(s.cfg.Auth.Credentials, c.Identity, end)
		},
		Limited:  func(err error) { s.countLimit("streams", err) },
		Detach:   detachAccess,
		Logger:   s.logger,
		LogAttrs: []slog.Attr{slog.String("request_id", requestID(r.Context())), what},
	})
}
