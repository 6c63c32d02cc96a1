package httpapi

import (
	"math"
	"net/http"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/redact"
)

// The session routes let a browser follow streams: EventSource sends no
// Authorization header, so a page exchanges its credential for an
// HttpOnly cookie once, and the browser sends it on every /api/ request.
func (s *Server) sessionRoutes() {
	s.register("POST /api/auth/session", s.errorsOf(s.createSession), true)
	s.register("DELETE /api/auth/session", s.errorsOf(s.deleteSession), false)
}

// sessionView is the answer to POST /api/auth/session.
type sessionView struct {
	User      string    `json:"user"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// createSession verifies the Authorization header's credential (never a
// cookie: a session is renewed with a credential, so it cannot extend
// itself) and sets the session cookie, which expires with the session.
// A session names the key of the credential it was made from
// (auth.Identity.KeyID), so that removing that key from its file refuses
// the session (identify).
func (s *Server) createSession(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Auth.Sessions == nil || s.cfg.Auth.Credentials == nil {
		return runstream.Errorf(runstream.CodeNotFound, "sessions are not enabled on this server (--auth token or jwt)")
	}
	if err := s.checkSessionOrigin(r); err != nil {
		return err
	}
	header := r.Header.Get("Authorization")
	if header == "" {
		s.authOutcomes.WithLabelValues("missing").Inc()
		s.refuse(w, r, "missing", runstream.Errorf(runstream.CodeUnauthenticated, "authentication required: send Authorization: Bearer <credential>"))
		return nil
	}
	id, err := s.bearer(header)
	outcome := outcomeOf(err)
	s.authOutcomes.WithLabelValues(outcome).Inc()
	if err != nil {
		s.refuse(w, r, outcome, err)
		return nil
	}
	value, expires := s.cfg.Auth.Sessions.Issue(id)
	http.SetCookie(w, s.sessionCookie(value, expires))
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, sessionView{User: id.User, ExpiresAt: expires.UTC()})
	return nil
}

// deleteSession logs the browser out: its session cookie is deleted. The
// session value itself stays valid until it expires (sessions are
// stateless, see auth.Sessions), so they are kept short.
func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Auth.Sessions == nil {
		return runstream.Errorf(runstream.CodeNotFound, "sessions are not enabled on this server (--auth token or jwt)")
	}
	if err := s.checkSessionOrigin(r); err != nil {
		return err
	}
	ck := s.sessionCookie("", time.Unix(0, 0))
	ck.MaxAge = -1
	http.SetCookie(w, ck)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// checkSessionOrigin refuses a session request from a page of another,
// not allowed origin (a browser sends Origin on every POST and DELETE).
func (s *Server) checkSessionOrigin(r *http.Request) error {
	if o := r.Header.Get("Origin"); o != "" && !s.allowedOrigin(r, o) {
		s.authOutcomes.WithLabelValues("bad_origin").Inc()
		return runstream.Errorf(runstream.CodePermissionDenied, "origin %s may not manage sessions here", redact.Quote(o))
	}
	return nil
}

// sessionCookie is the session cookie holding value until expires:
// HttpOnly (no script reads it), SameSite=Strict (no other site's page
// sends it), scoped to /api/, and Secure when configured.
func (s *Server) sessionCookie(value string, expires time.Time) *http.Cookie {
	return &http.Cookie{
		Name:     sessionCookie,
		Value:    value,
		Path:     "/api/",
		Expires:  expires,
		MaxAge:   max(int(math.Ceil(time.Until(expires).Seconds())), 1), // not a second short of expires
		HttpOnly: true,
		Secure:   s.cfg.Auth.CookieSecure,
		SameSite: http.SameSiteStrictMode,
	}
}
