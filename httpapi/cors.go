package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/redact"
)

// ParseCORSOrigins parses a comma-separated list of origins
// (scheme://host[:port], no path) for AuthConfig.CORSOrigins. "*" and
// "null" are refused: credentials are never shared with any origin.
func ParseCORSOrigins(list string) ([]string, error) {
	var origins []string
	for o := range strings.SplitSeq(list, ",") {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		u, err := url.Parse(o)
		if o == "*" || o == "null" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return nil, fmt.Errorf("CORS origin %q: want scheme://host[:port], never * or null", o)
		}
		origins = append(origins, strings.ToLower(o))
	}
	return origins, nil
}

// allowedOrigin reports whether origin is the server's own (the request's
// host, over https when the server is behind TLS or its cookie is
// Secure) or one of the CORS allow-list.
func (s *Server) allowedOrigin(r *http.Request, origin string) bool {
	if origin == "" || origin == "null" {
		return false
	}
	origin = strings.ToLower(origin)
	if slices.Contains(s.cfg.Auth.CORSOrigins, origin) {
		return true
	}
	scheme := "http"
	if r.TLS != nil || s.cfg.Auth.CookieSecure {
		scheme = "https"
	}
	return origin == scheme+"://"+strings.ToLower(r.Host)
}

// corsAllowHeaders are the request headers a cross-origin page may send.
const corsAllowHeaders = "Authorization, X-Api-Key, Content-Type, Last-Event-ID, Idempotency-Key, X-Request-Id"

// cors answers preflights and marks the responses to the allow-listed
// origins of AuthConfig.CORSOrigins, with credentials and never "*". With
// no origins configured it does nothing: a cross-origin page cannot read
// any response, and preflights answer METHOD_NOT_ALLOWED.
func (s *Server) cors(next http.Handler) http.Handler {
	if len(s.cfg.Auth.CORSOrigins) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		w.Header().Add("Vary", "Origin")
		allowed := origin != "" && slices.Contains(s.cfg.Auth.CORSOrigins, strings.ToLower(origin))
		if allowed {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			// What a page may read: the request id, when to retry, how to
			// authenticate, where a join stream reconnects, and the run's
			// status when its stream opened (the SSE protocol's header).
			h.Set("Access-Control-Expose-Headers", "X-Request-Id, Retry-After, WWW-Authenticate, Location, X-Workflow-Run-Status")
		}
		if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
			next.ServeHTTP(w, r)
			return
		}
		if !allowed {
			s.writeError(w, r, runstream.Errorf(runstream.CodePermissionDenied, "origin %s is not allowed to call this API", redact.Quote(origin)))
			return
		}
		h := w.Header()
		h.Add("Vary", "Access-Control-Request-Method, Access-Control-Request-Headers")
		h.Set("Access-Control-Allow-Methods", "GET, HEAD, POST, PUT, DELETE")
		h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
		h.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
	})
}
