package httpapi

import (
	"context"
	"github.com/runstream/runstream/redact"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/runstream/runstream"
	"github.com/runstream/runstream/auth"
)

// LocalUser is the one user of the "none" auth mode.
const LocalUser = "local"

// AuthConfig says how the API's callers prove who they are.
type AuthConfig struct {
	// Credentials verifies the bearer credential of the Authorization
	// header (an API key or a JWT). Nil: Config.Authenticate decides,
	// which by default makes every request the one local user.
	Credentials auth.Authenticator
	// Sessions issues the session cookies of POST /api/auth/session and
	// verifies them on later requests. Nil: sessions are off and the
	// session routes answer NOT_FOUND.
	Sessions *auth.Sessions
	// CookieSecure marks the session cookie Secure: set it when clients
	// reach the server over TLS (a terminating proxy included).
	CookieSecure bool
	// CORSOrigins are the origins ("https://app.example") that browsers
	// may call the API from with credentials, matched exactly. Empty:
	// CORS is off and only same-origin pages use the API.
	CORSOrigins []string
	// LocalOnly is for a server without authentication on a loopback
	// address (serve --auth none): it refuses what a web page of another
	// site can make a browser on this machine send to it, a request
	// addressed to a host name that is not a loopback one (the page's own
	// name, which its DNS points at 127.0.0.1: DNS rebinding) and a
	// state-changing request from another Origin than this server's own
	// or CORSOrigins.
	LocalOnly bool
}

// sessionCookie names the session cookie; it is scoped to /api/.
const sessionCookie = "runstream_session"

// urlCredentialParams are query parameters that would carry a credential
// in a URL, where proxies, browsers and logs keep it.
var urlCredentialParams = []string{"access_token", "token", "api_key"}

type userKey struct{}

// caller is who a request acts for.
type caller struct {
	auth.Identity
	// cookie is set when the session cookie authenticated the request.
	cookie bool
}

// authMetrics counts authentication outcomes: ok, missing, invalid,
// expired, url_credential, bad_origin. No user id is ever a label.
func newAuthMetrics(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runstream_auth_requests_total",
		Help: "API requests by authentication outcome.",
	}, []string{"outcome"})
	reg.MustRegister(c)
	return c
}

// refuseURLCredentials answers 400 to a request that carries a credential
// in its query string, before anything else reads or logs it (the access
// log records the path only).
func (s *Server) refuseURLCredentials(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.RawQuery != "" {
			for name := range r.URL.Query() {
				for _, p := range urlCredentialParams {
					if strings.EqualFold(name, p) {
						s.authOutcomes.WithLabelValues("url_credential").Inc()
						s.writeError(w, r, runstream.Errorf(runstream.CodeInvalidArgument,
							"credentials are refused in URLs: send an Authorization header, or use a session cookie (POST /api/auth/session)").
							WithDetail("parameter", p))
						return
					}
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// authenticate resolves the caller and stores it in the request context.
// A refused request answers 401 UNAUTHENTICATED with WWW-Authenticate; a
// state-changing request authenticated by the session cookie must come
// from an allowed Origin (403 PERMISSION_DENIED otherwise).
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.checkLocal(r); err != nil {
			s.authOutcomes.WithLabelValues("bad_origin").Inc()
			s.refuse(w, r, "bad_origin", err)
			return
		}
		c, outcome, err := s.identify(r)
		if err == nil && c.cookie && !safeMethod(r.Method) && !s.allowedOrigin(r, r.Header.Get("Origin")) {
			outcome = "bad_origin"
			err = runstream.Errorf(runstream.CodePermissionDenied, "a request authenticated by the session cookie must carry the Origin of an allowed page")
		}
		s.authOutcomes.WithLabelValues(outcome).Inc()
		if err != nil {
			s.refuse(w, r, outcome, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, c)))
	})
}

// checkLocal refuses, with AuthConfig.LocalOnly, a request addressed to a
// host that is not a loopback one, and a state-changing request whose
// Origin is another site's. A request without an Origin (curl, an SDK)
// is not a browser's cross-site one.
func (s *Server) checkLocal(r *http.Request) error {
	if !s.cfg.Auth.LocalOnly {
		return nil
	}
	if !LoopbackHost(r.Host) {
		return runstream.Errorf(runstream.CodePermissionDenied, "without authentication this server answers only requests addressed to a loopback host (localhost, 127.0.0.1, [::1]), not %s", redact.Quote(r.Host))
	}
	if origin := r.Header.Get("Origin"); origin != "" && !safeMethod(r.Method) && !s.allowedOrigin(r, origin) {
		return runstream.Errorf(runstream.CodePermissionDenied, "without authentication a state-changing request from a page must come from this server's own origin or an allowed one, not %s", redact.Quote(origin))
	}
	return nil
}

// LoopbackHost reports whether a host, with or without a port (a
// request's Host, a listen address), names this machine's loopback
// interface: localhost (or a name under .localhost), or a loopback IP
// address. An empty host (every interface) is not loopback.
func LoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// refuse writes err, with WWW-Authenticate when it is UNAUTHENTICATED.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, outcome string, err error) {
	if runstream.AsError(err).Code == runstream.CodeUnauthenticated {
		challenge := `Bearer realm="runstream"`
		if outcome == "invalid" || outcome == "expired" {
			challenge += `, error="invalid_token"`
		}
		w.Header().Set("WWW-Authenticate", challenge)
	}
	s.writeError(w, r, err)
}

// apiKeyHeader carries a credential as the Authorization header's bearer
// credential does, for clients (the LangGraph SDK) that send it there.
const apiKeyHeader = "X-Api-Key"

// identify returns the request's caller and the outcome's metric label.
// The Authorization header wins over X-Api-Key, which wins over the
// session cookie.
func (s *Server) identify(r *http.Request) (caller, string, error) {
	if s.cfg.Auth.Credentials == nil {
		user, err := s.cfg.Authenticate(r)
		if err == nil && user == "" {
			err = runstream.Errorf(runstream.CodeUnauthenticated, "authentication required")
		}
		if err != nil {
			return caller{}, "invalid", err
		}
		return caller{Identity: auth.Identity{User: user}}, "ok", nil
	}
	if h := r.Header.Get("Authorization"); h != "" {
		id, err := s.bearer(h)
		return caller{Identity: id}, outcomeOf(err), err
	}
	if keys := r.Header.Values(apiKeyHeader); len(keys) > 1 || len(keys) == 1 && strings.TrimSpace(keys[0]) != "" {
		// The LangGraph SDK's apiKey option sends the credential here; an
		// empty one is none.
		if len(keys) > 1 {
			return caller{}, "invalid", runstream.Errorf(runstream.CodeUnauthenticated, "more than one %s header", apiKeyHeader)
		}
		id, err := s.bearer("Bearer " + keys[0])
		return caller{Identity: id}, outcomeOf(err), err
	}
	if s.cfg.Auth.Sessions != nil {
		switch cookies := r.CookiesNamed(sessionCookie); len(cookies) {
		case 0:
		case 1:
			id, err := s.cfg.Auth.Sessions.Authenticate(cookies[0].Value)
			if err == nil {
				// A session made from a key since removed from the
				// keys file (or from no key) is refused: its user signs in
				// again.
				err = auth.CheckHeld(s.cfg.Auth.Credentials, id)
			}
			return caller{Identity: id, cookie: true}, outcomeOf(err), err
		default:
			// Which one the browser sent first is not the user's choice: a
			// sibling host may have set its own cookie ahead of theirs.
			return caller{}, "invalid", runstream.Errorf(runstream.CodeUnauthenticated, "more than one session cookie: sign in again")
		}
	}
	return caller{}, "missing", runstream.Errorf(runstream.CodeUnauthenticated,
		"authentication required: send Authorization: Bearer <credential>, or the session cookie")
}

// bearer verifies an Authorization header's bearer credential.
func (s *Server) bearer(header string) (auth.Identity, error) {
	scheme, cred, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(cred) == "" {
		return auth.Identity{}, runstream.Errorf(runstream.CodeUnauthenticated, "the Authorization header must be Bearer <credential>")
	}
	return s.cfg.Auth.Credentials.Authenticate(strings.TrimSpace(cred))
}

func outcomeOf(err error) string {
	switch {
	case err == nil:
		return "ok"
	case runstream.AsError(err).Details["reason"] == "expired":
		return "expired"
	default:
		return "invalid"
	}
}

// safeMethod reports whether method changes nothing (RFC 9110 §9.2.1).
func safeMethod(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

// callerOf returns the authenticated caller of the request.
func callerOf(r *http.Request) caller {
	c, _ := r.Context().Value(userKey{}).(caller)
	return c
}

// User returns the user id of a request that a Mount route authenticated.
func User(r *http.Request) string { return userOf(r) }

// CredentialExpires returns when the credential of a request that a Mount
// route authenticated expires (a JWT's exp, a session's end); zero when it
// does not. A stream of that request ends then, so that its client
// re-authenticates.
func CredentialExpires(r *http.Request) time.Time { return callerOf(r).Expires }

// AfterRevoke arranges for f to be called once the credential of a
// request that a Mount route authenticated is revoked: its API key, the
// key that verified its JWT, or the key of the credential its session was
// made from, removed from its file and the file reloaded
// (auth.Revocable). stop, called when f is no longer needed, unregisters
// it. Without authentication f is never called. A stream of that request ends
// then, as when its credential expires, so that its client
// re-authenticates: its reconnection with the revoked credential is
// refused with 401.
func (s *Server) AfterRevoke(r *http.Request, f func()) (stop func()) {
	return auth.AfterRevoke(s.cfg.Auth.Credentials, callerOf(r).Identity, f)
}

// userOf returns the authenticated caller's user id.
func userOf(r *http.Request) string { return callerOf(r).User }
