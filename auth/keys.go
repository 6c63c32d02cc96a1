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

// keyEntry is one line of a keys file.
type keyEntry struct {
	user string
	hash [sha256.Size]byte
}

// Keys authenticates static API keys against a keys file: one
// "user-id sha256:HEX" per line (HashKey's form), blank lines and lines
// starting with # ignored. Several keys may map to one user (rotation).
// Keys is safe for concurrent use.
type Keys struct {
	path    string
	entries atomic.Pointer[[]keyEntry]
}

// LoadKeys reads the keys file at path.
func LoadKeys(path string) (*Keys, error) {
	k := &Keys{path: path}
	if err := k.Reload(); err != nil {
		return nil, err
	}
	return k, nil
}

// Reload re-reads the keys file. On error the keys in use stay.
func (k *Keys) Reload() error {
	data, err := os.ReadFile(k.path)
	if err != nil {
		return fmt.Errorf("read the keys file: %w", err)
	}
	entries, err := parseKeys(data)
	if err != nil {
		return fmt.Errorf("keys file %s: %w", k.path, err)
	}
	k.entries.Store(&entries)
	return nil
}

// Len returns the number of keys loaded.
func (k *Keys) Len() int { return len(*k.entries.Load()) }

func parseKeys(data []byte) ([]keyEntry, error) {
	var entries []keyEntry
	seen := map[[sha256.Size]byte]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("line %d: want \"user-id sha256:HEX\"", n)
		}
		hexHash, ok := strings.CutPrefix(fields[1], hashPrefix)
		raw, err := hex.DecodeString(hexHash)
		if !ok || err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("line %d: the hash must be sha256: and 64 hex digits (runstream auth hash-key)", n)
		}
		e := keyEntry{user: fields[0]}
		copy(e.hash[:], raw)
		if seen[e.hash] {
			return nil, fmt.Errorf("line %d: the same key is listed twice", n)
		}
		seen[e.hash] = true
		entries = append(entries, e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, errors.New("no keys")
	}
	return entries, nil
}

// Authenticate implements Authenticator. The key's hash is compared with
// every stored hash in constant time, all of them every time, so the
// answer's timing tells nothing about the stored keys.
func (k *Keys) Authenticate(credential string) (Identity, error) {
	if len(credential) > maxCredentialBytes {
		return Identity{}, errInvalid()
	}
	sum := sha256.Sum256([]byte(credential))
	user := ""
	for _, e := range *k.entries.Load() {
		if subtle.ConstantTimeCompare(sum[:], e.hash[:]) == 1 {
			user = e.user
		}
	}
	if user == "" {
		return Identity{}, errInvalid()
	}
	return Identity{User: user}, nil
}
