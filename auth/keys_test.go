package auth_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/auth"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func wantUnauthenticated(t *testing.T, what string, id auth.Identity, err error) {
	t.Helper()
	if err == nil || runstream.AsError(err).Code != runstream.CodeUnauthenticated || id.User != "" {
		t.Errorf("%s: %+v, %v; want UNAUTHENTICATED", what, id, err)
	}
}

func TestKeys(t *testing.T) {
	t.Parallel()
	aliceKey, bobKey := auth.NewKey(), auth.NewKey()
	aliceHash, err := auth.HashKey(aliceKey)
	if err != nil {
		t.Fatal(err)
	}
	bobHash, _ := auth.HashKey(bobKey)
	path := writeFile(t, "keys", "# users\n\nalice "+aliceHash+"\n  bob   "+bobHash+"  \n")
	keys, err := auth.LoadKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	for key, user := range map[string]string{aliceKey: "alice", bobKey: "bob"} {
		id, err := keys.Authenticate(key)
		if err != nil || id.User != user || !id.Expires.IsZero() {
			t.Errorf("Authenticate(%s's key) = %+v, %v", user, id, err)
		}
	}
	for _, bad := range []string{"", aliceHash, strings.TrimPrefix(aliceHash, "sha256:"), aliceKey + "x", aliceKey[1:]} {
		id, err := keys.Authenticate(bad)
		wantUnauthenticated(t, "key "+bad, id, err)
	}

	// Reload: bob's key is revoked whatever else the file holds. A broken
	// line is reported and left out, the good ones apply; a file with no
	// key revokes them all.
	if err := os.WriteFile(path, []byte("alice "+aliceHash+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := keys.Reload(); err != nil {
		t.Fatal(err)
	}
	id, err := keys.Authenticate(bobKey)
	wantUnauthenticated(t, "revoked key", id, err)
	if err := os.WriteFile(path, []byte("alice "+aliceHash+"\nbob nothex\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := keys.Reload(); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("Reload of a file with a broken line 2: %v", err)
	}
	if id, err := keys.Authenticate(aliceKey); err != nil || id.User != "alice" {
		t.Errorf("alice's good line after the reload: %+v, %v", id, err)
	}
	if err := os.WriteFile(path, []byte("# every key revoked\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := keys.Reload(); err != nil {
		t.Errorf("Reload of a file with no key: %v", err)
	}
	id, err = keys.Authenticate(aliceKey)
	wantUnauthenticated(t, "a key of an emptied file", id, err)
}

func TestKeysFileErrors(t *testing.T) {
	t.Parallel()
	hash, _ := auth.HashKey(auth.NewKey())
	for name, content := range map[string]string{
		"empty":         "# nothing\n",
		"one field":     "alice\n",
		"three fields":  "alice " + hash + " extra\n",
		"no prefix":     "alice " + strings.TrimPrefix(hash, "sha256:") + "\n",
		"short hash":    "alice sha256:abcd\n",
		"duplicate key": "alice " + hash + "\nbob " + hash + "\n",
	} {
		if _, err := auth.LoadKeys(writeFile(t, "keys", content)); err == nil {
			t.Errorf("%s: LoadKeys accepted %q", name, content)
		}
	}
	if _, err := auth.LoadKeys(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("LoadKeys accepted a missing file")
	}
}

func TestHashKey(t *testing.T) {
	t.Parallel()
	h, err := auth.HashKey(strings.Repeat("k", 32))
	// sha256 of 32 "k": a fixed vector, so the stored form never changes.
	if err != nil || h != "sha256:5e318f8cf9cbe249a30812b8ca132d691ded7a91991413558db5758575f5e01f" {
		t.Errorf("HashKey = %q, %v", h, err)
	}
	for _, bad := range []string{"", "short", strings.Repeat("k", 31), strings.Repeat("k", 32) + " x"} {
		if _, err := auth.HashKey(bad); err == nil {
			t.Errorf("HashKey(%q) accepted", bad)
		}
	}
	if a, b := auth.NewKey(), auth.NewKey(); a == b || len(a) < auth.MinKeyLength {
		t.Errorf("NewKey: %q, %q", a, b)
	}
}

// A key's Identity names the key (KeyID), not secretly; Holds and
// AfterRevoke tell when a Reload removed that key, not another key of the
// same user.
func TestKeysRevocation(t *testing.T) {
	t.Parallel()
	old, kept, bobKey := auth.NewKey(), auth.NewKey(), auth.NewKey()
	oldHash, _ := auth.HashKey(old)
	keptHash, _ := auth.HashKey(kept)
	bobHash, _ := auth.HashKey(bobKey)
	path := writeFile(t, "keys", "alice "+oldHash+"\nalice "+keptHash+"\nbob "+bobHash+"\n")
	keys, err := auth.LoadKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]auth.Identity{}
	for name, key := range map[string]string{"old": old, "kept": kept, "bob": bobKey} {
		id, err := keys.Authenticate(key)
		if err != nil {
			t.Fatal(err)
		}
		if id.KeyID == "" || strings.Contains(key, id.KeyID) || strings.Contains(path+oldHash+keptHash+bobHash, id.KeyID) {
			t.Errorf("%s: KeyID %q is empty, or part of the key or of its stored hash", name, id.KeyID)
		}
		if !keys.Holds(id) {
			t.Errorf("%s: Holds(%+v) = false before any reload", name, id)
		}
		ids[name] = id
	}
	if ids["old"].KeyID == ids["kept"].KeyID {
		t.Fatal("two keys of one user have the same KeyID")
	}
	for name, id := range map[string]auth.Identity{
		"no KeyID":             {User: "alice"},
		"another user's KeyID": {User: "alice", KeyID: ids["bob"].KeyID},
		"unknown KeyID":        {User: "alice", KeyID: "0123456789abcdef0123456789abcdef"},
	} {
		if keys.Holds(id) {
			t.Errorf("Holds(%s) = true", name)
		}
	}

	called := map[string]int{}
	stops := map[string]func(){}
	for name, id := range ids {
		stops[name] = keys.AfterRevoke(id, func() { called[name]++ })
	}
	stops["bob"]() // bob's stream ended before his key is removed
	if n := keys.Watched(); n != 2 {
		t.Errorf("Watched = %d, want 2 (bob's was stopped)", n)
	}
	if err := os.WriteFile(path, []byte("alice "+keptHash+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := keys.Reload(); err != nil {
		t.Fatal(err)
	}
	if called["old"] != 1 || called["kept"] != 0 || called["bob"] != 0 {
		t.Errorf("callbacks after the reload removed the old key and bob's: %v, want old's only", called)
	}
	if keys.Holds(ids["old"]) || !keys.Holds(ids["kept"]) {
		t.Errorf("Holds after the reload: old %v, kept %v", keys.Holds(ids["old"]), keys.Holds(ids["kept"]))
	}
	if n := keys.Watched(); n != 1 {
		t.Errorf("Watched = %d, want 1 (kept's)", n)
	}
	// A callback for a key removed already is called at once; a reload
	// that removes nothing more calls none again.
	now := 0
	keys.AfterRevoke(ids["old"], func() { now++ })()
	if err := keys.Reload(); err != nil {
		t.Fatal(err)
	}
	if now != 1 || called["old"] != 1 || called["kept"] != 0 {
		t.Errorf("AfterRevoke of a removed key called %d times; callbacks after a second reload: %v", now, called)
	}
	stops["kept"]()
	if n := keys.Watched(); n != 0 {
		t.Errorf("Watched = %d after every stop, want 0", n)
	}
}
