package auth

import (
	"encoding/base64"
	"time"

	"github.com/runstream/runstream"
)

// Identity is whom a verified credential acts for.
type Identity struct {
	// User is the caller's user id: the owner of the rows it writes and
	// the only rows it reads.
	User string
	// Expires is when the credential stops being valid; zero: it does not
	// expire (an API key). A stream opened with it ends then.
	Expires time.Time
	// KeyID names the key of the credential: the API key it is
	// (Keys.Authenticate), the key that verified it (JWT.Authenticate),
	// or the key of the credential a session was made from, for Revocable
	// to tell whether that key is still in its file. It is a fingerprint
	// of the key that reveals neither the key nor its stored hash, so a
	// session value carries it.
	KeyID string
}

// Authenticator verifies a credential presented by a caller.
type Authenticator interface {
	// Authenticate returns the Identity of credential, or an error with
	// CodeUnauthenticated whose message names no secret. It is safe for
	// concurrent use.
	Authenticate(credential string) (Identity, error)
}

// Revocable is an Authenticator whose credentials can be revoked while
// serving (Keys, JWT: a key removed from the keys file, which is then
// reloaded). The Identities it returns carry their credential's KeyID, as
// do the sessions issued from them, so that a session made from a revoked
// key is refused (Holds) and a stream opened with one ends (AfterRevoke).
type Revocable interface {
	// Holds reports whether id's credential is still valid: its KeyID is
	// one of id.User's keys now. An Identity without a KeyID (a session
	// issued before sessions were bound to their key) is not held.
	Holds(id Identity) bool
	// AfterRevoke arranges for f to be called once id's credential is
	// revoked: by the reload that removes it, or before AfterRevoke
	// returns when Holds(id) is false already. f is called at most once;
	// stop, called once the caller no longer needs f (a stream ended),
	// unregisters it.
	AfterRevoke(id Identity, f func()) (stop func())
}

// CheckHeld returns the error of any invalid credential when creds is a
// Revocable that no longer holds id (a session made from a key since
// removed, or from no key), and nil otherwise: credentials that are not
// revocable are held until they expire.
func CheckHeld(creds Authenticator, id Identity) error {
	if rv, ok := creds.(Revocable); ok && !rv.Holds(id) {
		return errInvalid()
	}
	return nil
}

// AfterRevoke is creds' Revocable.AfterRevoke for id; for credentials
// that are not revocable, f is never called and stop does nothing.
func AfterRevoke(creds Authenticator, id Identity, f func()) (stop func()) {
	rv, ok := creds.(Revocable)
	if !ok {
		return func() {}
	}
	return rv.AfterRevoke(id, f)
}

// maxCredentialBytes bounds a credential before any parsing.
const maxCredentialBytes = 16 << 10

// errInvalid is the answer to a credential that is not valid, whatever
// the reason: the caller learns nothing about which check failed.
func errInvalid() error {
	return runstream.Errorf(runstream.CodeUnauthenticated, "the credential is not valid")
}

// errExpired answers a credential that was valid and has expired, so a
// client knows to get a new one.
func errExpired() error {
	return runstream.Errorf(runstream.CodeUnauthenticated, "the credential has expired").WithDetail("reason", "expired")
}

// strictB64 decodes base64url without padding and refuses the encodings
// that are not canonical, so that a credential has one spelling.
var strictB64 = base64.RawURLEncoding.Strict()
