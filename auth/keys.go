package auth

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
)

// API keys are stored as "sha256:" and the hex SHA-256 of the key. A fast
// hash is enough because the keys are not passwords: NewKey makes 256
// random bits, and HashKey refuses keys shorter than MinKeyLength, so
// the stored hash cannot be reversed by guessing; a slow hash (argon2,
// bcrypt) would only add work to every request.
const hashPrefix = "sha256:"

// MinKeyLength is the shortest API key HashKey accepts, in bytes.
const MinKeyLength = 32

// NewKey returns a new API key: "rsk_" and 256 random bits in base64url.
func NewKey() string {
	b := make([]byte, 32)
	rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return "rsk_" + base64.RawURLEncoding.EncodeToString(b)
}

// HashKey returns the form of key that a keys file stores. It refuses a
// key shorter than MinKeyLength or holding white space.
func HashKey(key string) (string, error) {
	if len(key) < MinKeyLength {
		return "", fmt.Errorf("an API key must be at least %d bytes long (use NewKey)", MinKeyLength)
	}
	if strings.ContainsAny(key, " \t\r\n") {
		return "", errors.New("an API key must not contain white space")
	}
	return hashPrefix + hashHex(key), nil
}

func hashHex(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// keyIDContext separates a key's fingerprint (KeyID) from its stored
// hash.
const keyIDContext = "runstream-key-id-v1."

// keyID returns the fingerprint of the key whose SHA-256 is hash: the
// first 16 bytes, in hex, of the SHA-256 of keyIDContext and hash. It is
// derived from the stored hash, so every instance with the same keys
// file computes the same one, and it is a hash of that hash, so a session
// value that carries it reveals neither the key nor its line of the file.
func keyID(hash [sha256.Size]byte) string { return fingerprint(keyIDContext, hash[:]) }

// fingerprint returns the first 16 bytes, in hex, of the SHA-256 of
// context and material: a key's KeyID, which tells keys apart without
// revealing them.
func fingerprint(context string, material []byte) string {
	h := sha256.New()
	h.Write([]byte(context))
	h.Write(material)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// keyEntry is one line of a keys file.
type keyEntry struct {
	user string
	hash [sha256.Size]byte
	id   string // keyID(hash)
}

// keySet is the keys in use: the file's entries, and the user of each
// KeyID.
type keySet struct {
	entries []keyEntry
	users   map[string]string
}

func newKeySet(entries []keyEntry) *keySet {
	set := &keySet{entries: entries, users: make(map[string]string, len(entries))}
	for _, e := range entries {
		set.users[e.id] = e.user
	}
	return set
}

// holds reports whether id's KeyID is one of id.User's keys in the set.
func (set *keySet) holds(id Identity) bool {
	user, ok := set.users[id.KeyID] // a KeyID is never empty
	return ok && user == id.User
}

// Keys authenticates static API keys against a keys file: one
// "user-id sha256:HEX" per line (HashKey's form), blank lines and lines
// starting with # ignored. Several keys may map to one user (rotation).
// Keys is a Revocable: a key removed from the file at a Reload ends what
// was opened with it (see AfterRevoke). Keys is safe for concurrent use.
type Keys struct {
	path    string
	keys    atomic.Pointer[keySet]
	revoked revocations // the AfterRevoke callbacks
}

// LoadKeys reads the keys file at path: a broken line, or a file with no
// key, is an error.
func LoadKeys(path string) (*Keys, error) {
	k := &Keys{path: path}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the keys file: %w", err)
	}
	entries, err := parseKeys(data)
	if err == nil && len(entries) == 0 {
		err = errors.New("no keys")
	}
	if err != nil {
		return nil, fmt.Errorf("keys file %s: %w", path, err)
	}
	k.keys.Store(newKeySet(entries))
	return k, nil
}

// Reload re-reads the keys file, whose keys replace those in use, so that
// a key removed from it is revoked whatever else the file holds: a file
// with no key revokes them all, and a broken line is left out (with the
// others applied) and reported as the error. Only a file that cannot be
// read keeps the keys in use. Before it returns, Reload calls the
// AfterRevoke callbacks of the keys it removed.
func (k *Keys) Reload() error {
	data, err := os.ReadFile(k.path)
	if err != nil {
		return fmt.Errorf("read the keys file: %w", err)
	}
	entries, err := parseKeys(data)
	set := newKeySet(entries)
	for _, f := range k.revoked.swap(func() { k.keys.Store(set) }, k.Holds) {
		f()
	}
	if err != nil {
		return fmt.Errorf("keys file %s: %w (the other lines' keys are in use)", k.path, err)
	}
	return nil
}

// Holds implements Revocable: it reports whether id.KeyID is one of
// id.User's keys now. Once a key is removed from the file (and the file
// reloaded), the sessions issued from it are refused, while those issued
// from the user's other keys are not.
func (k *Keys) Holds(id Identity) bool { return k.keys.Load().holds(id) }

// AfterRevoke implements Revocable: f is called by the Reload after
// which Holds(id) is false, or at once, before AfterRevoke returns, when
// it is false already. f must not block: Reload calls the callbacks of
// the keys it removed one after the other.
func (k *Keys) AfterRevoke(id Identity, f func()) (stop func()) {
	return k.revoked.after(k.Holds, id, f)
}

// Watched returns the number of AfterRevoke callbacks registered and not
// yet called nor stopped: each open stream authenticated by a key holds
// one, so it shows whether streams that ended let theirs go.
func (k *Keys) Watched() int { return k.revoked.len() }

// Len returns the number of keys loaded.
func (k *Keys) Len() int { return len(k.keys.Load().entries) }

// parseKeys returns the keys of the file's good lines, and an error that
// names its broken lines, if any.
func parseKeys(data []byte) ([]keyEntry, error) {
	entries := []keyEntry{}
	var broken []error
	seen := map[[sha256.Size]byte]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			broken = append(broken, fmt.Errorf("line %d: want \"user-id sha256:HEX\"", n))
			continue
		}
		hexHash, ok := strings.CutPrefix(fields[1], hashPrefix)
		raw, err := hex.DecodeString(hexHash)
		if !ok || err != nil || len(raw) != sha256.Size {
			broken = append(broken, fmt.Errorf("line %d: the hash must be sha256: and 64 hex digits (runstream auth hash-key)", n))
			continue
		}
		e := keyEntry{user: fields[0]}
		copy(e.hash[:], raw)
		e.id = keyID(e.hash)
		if seen[e.hash] {
			broken = append(broken, fmt.Errorf("line %d: the same key is listed twice", n))
			continue
		}
		seen[e.hash] = true
		entries = append(entries, e)
	}
	if err := sc.Err(); err != nil {
		broken = append(broken, err) // a line too long: the rest is unread
	}
	return entries, errors.Join(broken...)
}

// Authenticate implements Authenticator: the Identity of a key names it
// (KeyID), for Holds and AfterRevoke. The key's hash is compared with
// every stored hash in constant time, all of them every time, so the
// answer's timing tells nothing about the stored keys.
func (k *Keys) Authenticate(credential string) (Identity, error) {
	if len(credential) > maxCredentialBytes {
		return Identity{}, errInvalid()
	}
	sum := sha256.Sum256([]byte(credential))
	var match *keyEntry
	entries := k.keys.Load().entries
	for i := range entries {
		if subtle.ConstantTimeCompare(sum[:], entries[i].hash[:]) == 1 {
			match = &entries[i]
		}
	}
	if match == nil {
		return Identity{}, errInvalid()
	}
	return Identity{User: match.user, KeyID: match.id}, nil
}
