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
}

// Authenticator verifies a credential presented by a caller.
type Authenticator interface {
	// Authenticate returns the Identity of credential, or an error with
	// CodeUnauthenticated whose message names no secret. It is safe for
	// concurrent use.
	Authenticate(credential string) (Identity, error)
}

// UserChecker is an Authenticator that knows its users (API keys): a
// session issued to a user who no longer holds a credential is refused.
type UserChecker interface {
	HasUser(user string) bool
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
