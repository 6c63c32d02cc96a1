package workspace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Reasons a file's diff is unavailable.
const (
	ReasonSymlink   = "symlink"
	ReasonSensitive = "sensitive"
	ReasonBinary    = "binary"
	ReasonLarge     = "large"
	ReasonTruncated = "truncated"
)

// sampleSize is how much of a file binary sniffing reads.
const sampleSize = 4096

// Root is a directory the recorder scans: its Name ("workspace",
// "outputs"), its directory on this host, and the virtual prefix its paths
// are reported under ("/mnt/user-data/workspace"; trailing slashes are
// removed). A root whose directory does not exist is skipped.
type Root struct {
	Name          string
	Dir           string
	VirtualPrefix string
}

// Entry is one scanned file.
type Entry struct {
	// Path is the virtual path: the root's prefix, "/", and the path
	// relative to the root with "/" separators.
	Path    string
	Root    string
	Size    int64
	ModTime int64 // nanoseconds
	// SHA256 is the hex digest, empty when not computed (symlinks,
	// sensitive files, files over the size limit).
	SHA256    string
	Binary    bool
	Sensitive bool
	Symlink   bool
	// SymlinkTarget is the raw link text; nil for files or when unreadable.
	SymlinkTarget *string
	// Reason is why no diff can be shown ("" when one can).
	Reason string

	text     *string // inline text
	cacheKey string  // text cached in the snapshot's directory
}

// Snapshot is the state of the roots at one moment. A snapshot that holds
// text in a cache directory must be closed.
type Snapshot struct {
	Entries   map[string]Entry
	Truncated bool
	cacheDir  string
}

// Close removes the snapshot's text cache, if any. It is safe to call more
// than once.
func (s *Snapshot) Close() error {
	if s == nil || s.cacheDir == "" {
		return nil
	}
	dir := s.cacheDir
	s.cacheDir = ""
	return os.RemoveAll(dir)
}

// text returns the entry's text, if the snapshot kept it.
func (s *Snapshot) text(e Entry) (string, bool) {
	if e.text != nil {
		return *e.text, true
	}
	if e.cacheKey == "" || s.cacheDir == "" {
		return "", false
	}
	b, err := os.ReadFile(filepath.Join(s.cacheDir, e.cacheKey))
	if err != nil {
		return "", false
	}
	return string(b), true
}

// textMode says which texts a scan keeps.
type textMode struct {
	want   bool
	only   map[string]bool // nil: every path
	cacheD string          // "" keeps them inline
}

func (m textMode) wants(p string) bool {
	return m.want && (m.only == nil || m.only[p])
}

// scan walks the roots in order, each directory's entries in sorted
// order, pruning excluded directory names and directory symlinks.
func (c *Config) scan(ctx context.Context, mode textMode) (*Snapshot, error) {
	s := &Snapshot{Entries: map[string]Entry{}, cacheDir: mode.cacheD}
	count := 0
	var walk func(dir, rel string, root Root) error
	stop := errors.New("stop")
	walk = func(dir, rel string, root Root) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil // an unreadable directory is skipped
		}
		for _, d := range entries {
			name := d.Name()
			full := filepath.Join(dir, name)
			relPath := path.Join(rel, name)
			if d.IsDir() {
				if c.excluded[name] {
					continue
				}
				if err := walk(full, relPath, root); err != nil {
					return err
				}
				continue
			}
			if count >= c.Limits.MaxScannedFiles {
				s.Truncated = true
				return stop
			}
			e, ok := c.entry(full, root, relPath, mode)
			if !ok {
				continue
			}
			if mode.wants(e.Path) && e.text != nil && mode.cacheD != "" {
				sum := sha256.Sum256([]byte(e.Path))
				key := hex.EncodeToString(sum[:])
				if err := os.WriteFile(filepath.Join(mode.cacheD, key), []byte(*e.text), 0o600); err != nil {
					return fmt.Errorf("workspace: cache text: %w", err)
				}
				e.text, e.cacheKey = nil, key
			}
			s.Entries[e.Path] = e
			count++
		}
		return nil
	}
	for _, root := range c.Roots {
		info, err := os.Stat(root.Dir)
		if err != nil || !info.IsDir() {
			continue
		}
		if err := walk(root.Dir, "", root); err != nil {
			if errors.Is(err, stop) {
				break
			}
			return nil, err
		}
	}
	return s, nil
}

// entry scans one directory entry; ok is false for what is skipped.
func (c *Config) entry(full string, root Root, rel string, mode textMode) (Entry, bool) {
	info, err := os.Lstat(full)
	if err != nil {
		return Entry{}, false
	}
	e := Entry{Path: strings.TrimRight(root.VirtualPrefix, "/") + "/" + rel, Root: root.Name,
		Size: info.Size(), ModTime: info.ModTime().UnixNano()}
	e.Sensitive = Sensitive(e.Path)
	if info.Mode()&fs.ModeSymlink != 0 {
		e.Symlink, e.Reason = true, ReasonSymlink
		if target, err := os.Readlink(full); err == nil {
			e.SymlinkTarget = &target
		}
		return e, true
	}
	if !info.Mode().IsRegular() {
		return Entry{}, false
	}
	if e.Sensitive {
		e.Reason = ReasonSensitive
		return e, true // never read
	}
	f, err := os.Open(full)
	if err != nil {
		return Entry{}, false
	}
	defer f.Close()
	sample := make([]byte, sampleSize)
	n, err := io.ReadFull(f, sample)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return Entry{}, false
	}
	sample = sample[:n]
	e.Binary = binaryExtensions[strings.ToLower(path.Ext(rel))] || sampleIsBinary(sample)
	var whole []byte
	if e.Size <= c.Limits.MaxFileBytesForDiff {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return Entry{}, false
		}
		whole, err = io.ReadAll(io.LimitReader(f, c.Limits.MaxFileBytesForDiff+1))
		if err != nil {
			return Entry{}, false
		}
		sum := sha256.Sum256(whole)
		e.SHA256 = hex.EncodeToString(sum[:])
	}
	switch {
	case e.Binary:
		e.Reason = ReasonBinary
	case e.SHA256 == "":
		e.Reason = ReasonLarge
	case mode.wants(e.Path):
		text, ok := decodeText(whole)
		if !ok {
			e.Binary, e.Reason = true, ReasonBinary
			break
		}
		e.text = &text
	}
	return e, true
}

// binaryExtensions are always binary.
var binaryExtensions = map[string]bool{}

func init() {
	for _, ext := range strings.Fields(".7z .avif .bmp .class .db .dll .dmg .doc .docx .exe .gif .gz .ico .jar .jpeg .jpg .mov .mp3 .mp4 .o .pdf .png .pyc .so .tar .webp .xls .xlsx .zip") {
		binaryExtensions[ext] = true
	}
}

// sampleIsBinary sniffs the first bytes of a file: UTF-16 with a BOM is
// text; otherwise a NUL is binary; otherwise valid UTF-8 (a multi-byte
// sequence cut at the sample's end allowed) is text.
func sampleIsBinary(b []byte) bool {
	if hasUTF16BOM(b) {
		if _, ok := decodeUTF16(b, true); ok {
			return false
		}
	}
	if bytes.IndexByte(b, 0) >= 0 {
		return true
	}
	return !validUTF8Prefix(b, len(b) == sampleSize)
}

// validUTF8Prefix reports whether b is UTF-8, allowing an incomplete
// sequence at its end when cut is true.
func validUTF8Prefix(b []byte, cut bool) bool {
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size <= 1 {
			return cut && len(b) < utf8.UTFMax && !utf8.FullRune(b)
		}
		b = b[size:]
	}
	return true
}

func hasUTF16BOM(b []byte) bool {
	return len(b) >= 2 && (b[0] == 0xFF && b[1] == 0xFE || b[0] == 0xFE && b[1] == 0xFF)
}

// decodeUTF16 decodes BOM-directed UTF-16; partial allows an incomplete
// unit or surrogate pair at the end.
func decodeUTF16(b []byte, partial bool) (string, bool) {
	little := b[0] == 0xFF
	b = b[2:]
	if len(b)%2 == 1 {
		if !partial {
			return "", false
		}
		b = b[:len(b)-1]
	}
	units := make([]uint16, len(b)/2)
	for i := range units {
		if little {
			units[i] = uint16(b[2*i]) | uint16(b[2*i+1])<<8
		} else {
			units[i] = uint16(b[2*i])<<8 | uint16(b[2*i+1])
		}
	}
	for i := 0; i < len(units); i++ {
		u := units[i]
		switch {
		case u >= 0xD800 && u < 0xDC00:
			if i+1 == len(units) {
				if !partial {
					return "", false
				}
				units = units[:i]
				break
			}
			if n := units[i+1]; n < 0xDC00 || n >= 0xE000 {
				return "", false
			}
			i++
		case u >= 0xDC00 && u < 0xE000:
			return "", false
		}
	}
	return string(utf16.Decode(units)), true
}

// decodeText decodes a whole file: UTF-8 (a BOM removed), else UTF-16
// with a BOM; ok is false when neither fits.
func decodeText(b []byte) (string, bool) {
	if rest, ok := bytes.CutPrefix(b, []byte{0xEF, 0xBB, 0xBF}); ok && utf8.Valid(rest) {
		return string(rest), true
	}
	if utf8.Valid(b) {
		return string(b), true
	}
	if hasUTF16BOM(b) {
		return decodeUTF16(b, false)
	}
	return "", false
}

// sensitivePatterns are matched, case-insensitively, against a path's
// base name, the whole virtual path and each component.
var sensitivePatterns = []string{".env", ".env.*", "*api_key*", "*apikey*", "*.key", "*.pem", "*credential*",
	"*password*", "*private_key*", "*secret*", "*token*"}

// Sensitive reports whether the virtual path p is sensitive: its content is
// never read.
func Sensitive(p string) bool {
	lower := strings.ToLower(p)
	candidates := append([]string{path.Base(lower), lower}, strings.Split(strings.Trim(lower, "/"), "/")...)
	for _, pat := range sensitivePatterns {
		for _, s := range candidates {
			if glob(pat, s) {
				return true
			}
		}
	}
	return false
}

// glob matches s against a pattern whose only wildcard is "*", which
// matches any characters, "/" included.
func glob(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return strings.HasSuffix(s, last)
}
