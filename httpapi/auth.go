package httpapi

import (
	"context"
	"net/http"

	"github.com/runstream/runstream"
)

// LocalUser is the one user of the "none" auth mode.
const LocalUser = "local"

type userKey struct{}

// authenticate resolves the caller with cfg.Authenticate and stores the
// user in the request context. Requests it refuses answer UNAUTHENTICATED.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, err := s.cfg.Authenticate(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if user == "" {
			s.writeError(w, r, runstream.Errorf(runstream.CodeUnauthenticated, "authentication required"))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, user)))
	})
}

// userOf returns the authenticated caller of the request.
func userOf(r *http.Request) string {
	user, _ := r.Context().Value(userKey{}).(string)
	return user
}

// ownerOf returns the Owner a request reads with: its caller's rows only.
func ownerOf(r *http.Request) runstream.Owner { return runstream.OwnedBy(userOf(r)) }
