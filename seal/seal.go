// Package seal encrypts the one secret a stored workflow event must hold,
// the resume token of run.awaiting_input, with a server key (AES-256-GCM),
// so that the store's files, dumps and backups hold no usable token.
//
// [WorkflowStore] wraps a workflow.Store: it seals the token of every
// run.awaiting_input it appends and opens it in every envelope it returns
// (appends and ListEvents), so the event log, the engine, the services and
// the streams above it see the plain token, and the wire is unchanged.
// Opening happens in that one place.
//
// A sealed token is the text "sealed:v1:" followed by the base64url (no
// padding) of a 12-byte random nonce and the AES-GCM ciphertext of the
// token, with the run id as additional data: a sealed value moved to
// another run does not open.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// KeySize is the size of a seal key in bytes (AES-256).
const KeySize = 32

// prefix starts every sealed value.
const prefix = "sealed:v1:"

// Sealer seals and opens values with one key. It is safe for concurrent
// use.
type Sealer struct {
	aead cipher.AEAD
}

// New returns a Sealer with key, which must have KeySize bytes.
func New(key []byte) (*Sealer, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("seal key: %d bytes, want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("seal key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("seal key: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// NewRandom returns a Sealer with a new random key, for a store that
// lives only as long as the process (memory).
func NewRandom() *Sealer {
	s, err := New(NewKey())
	if err != nil {
		panic(err) // a KeySize key always makes a cipher
	}
	return s
}

// NewKey returns KeySize random bytes.
func NewKey() []byte {
	key := make([]byte, KeySize)
	rand.Read(key)
	return key
}

// ParseKey decodes a key written as base64 (standard or URL alphabet,
// with or without padding; surrounding white space is ignored).
func ParseKey(text string) ([]byte, error) {
	text = strings.TrimSpace(text)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if key, err := enc.DecodeString(text); err == nil {
			if len(key) != KeySize {
				return nil, fmt.Errorf("seal key: %d bytes, want %d", len(key), KeySize)
			}
			return key, nil
		}
	}
	return nil, errors.New("seal key: not base64")
}

// FormatKey encodes a key as ParseKey reads it.
func FormatKey(key []byte) string { return base64.StdEncoding.EncodeToString(key) }

// LoadKeyFile reads the key of the file at path (base64, see ParseKey).
// When create is true and the file does not exist, it writes a new random
// key there first, with mode 0600, and creates its directory (0700).
func LoadKeyFile(path string, create bool) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && create {
		if err := writeKeyFile(path); err != nil {
			return nil, err
		}
		raw, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read the seal key file: %w", err)
	}
	key, err := ParseKey(string(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return key, nil
}

// writeKeyFile creates path with a new key. Of two processes creating it
// at once, one writes it and the other reads that one.
func writeKeyFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create the seal key file: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".seal-key-*")
	if err != nil {
		return fmt.Errorf("create the seal key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err == nil {
		_, err = tmp.WriteString(FormatKey(NewKey()) + "\n")
		if err == nil {
			err = tmp.Sync()
		}
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			// Link, unlike Rename, never replaces a key another process
			// wrote meanwhile.
			err = os.Link(tmp.Name(), path)
			if errors.Is(err, fs.ErrExist) {
				err = nil
			}
		}
	} else {
		tmp.Close()
	}
	if err != nil {
		return fmt.Errorf("create the seal key file: %w", err)
	}
	return nil
}

// Seal returns plain sealed, bound to context (the additional data).
func (s *Sealer) Seal(plain, context string) string {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plain)+s.aead.Overhead())
	rand.Read(nonce)
	out := s.aead.Seal(nonce, nonce, []byte(plain), []byte(context))
	return prefix + base64.RawURLEncoding.EncodeToString(out)
}

// IsSealed reports whether v is a sealed value.
func IsSealed(v string) bool { return strings.HasPrefix(v, prefix) }

// Open returns the plain text of a value Seal returned for the same
// context. It fails for a value that is not sealed, was sealed with
// another key or context, or was altered.
func (s *Sealer) Open(sealed, context string) (string, error) {
	if !IsSealed(sealed) {
		return "", errors.New("open: not a sealed value")
	}
	raw, err := base64.RawURLEncoding.DecodeString(sealed[len(prefix):])
	if err != nil || len(raw) < s.aead.NonceSize() {
		return "", errors.New("open: malformed sealed value")
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, raw[:n], raw[n:], []byte(context))
	if err != nil {
		return "", fmt.Errorf("open: %w", err)
	}
	return string(plain), nil
}
