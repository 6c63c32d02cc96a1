// Package auth verifies the credentials of runstream's API callers: static
// API keys (Keys), JSON Web Tokens signed with HS256, RS256 or ES256 (JWT)
// and the signed session cookies that browsers follow streams with
// (Sessions). Each turns a credential into an Identity (the user id and
// until when it may act) or refuses it with UNAUTHENTICATED.
//
// Everything here uses the standard library's crypto only. Keys and JWT
// key sets are read from files and can be re-read (Reload) while serving;
// a reload that fails keeps the keys in use. A key removed at a Reload
// (an API key, or a JWT verification key) is revoked with what was made
// from it: Identities, and the sessions issued from them, name their key
// (Identity.KeyID, a fingerprint), so that a Revocable (Keys, JWT)
// refuses those sessions and tokens and ends the streams they opened
// (AfterRevoke).
package auth
