package workspace

import (
	"context"
	"fmt"
	"os"
	"slices"
)

// Default limits (reference §5.2).
const (
	DefaultMaxFiles            = 200
	DefaultMaxScannedFiles     = 2000
	DefaultMaxFileBytesForDiff = 256 << 10
	DefaultMaxTotalDiffBytes   = 1 << 20
)

// DefaultExcludedNames are directory names never scanned, at any depth.
var DefaultExcludedNames = []string{".git", ".hg", ".svn", ".cache", ".mcp", ".next", ".venv", ".browser-frames",
	".tool-results", "__pycache__", "build", "dist", "node_modules"}

// Limits bound a comparison. A zero field takes its default.
type Limits struct {
	// MaxFiles is the most file entries a change list holds; further
	// changes are only counted. Defaults to 200.
	MaxFiles int `json:"max_files"`
	// MaxScannedFiles stops a scan, across roots. Defaults to 2000.
	MaxScannedFiles int `json:"max_scanned_files"`
	// MaxFileBytesForDiff: larger files are neither hashed nor read for
	// text. Defaults to 256 KiB.
	MaxFileBytesForDiff int64 `json:"max_file_bytes_for_diff"`
	// MaxTotalDiffBytes is the budget of diff text of one comparison, in
	// UTF-8 bytes. Defaults to 1 MiB.
	MaxTotalDiffBytes int64 `json:"max_total_diff_bytes"`
}

func (l Limits) withDefaults() Limits {
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.MaxScannedFiles <= 0 {
		l.MaxScannedFiles = DefaultMaxScannedFiles
	}
	if l.MaxFileBytesForDiff <= 0 {
		l.MaxFileBytesForDiff = DefaultMaxFileBytesForDiff
	}
	if l.MaxTotalDiffBytes <= 0 {
		l.MaxTotalDiffBytes = DefaultMaxTotalDiffBytes
	}
	return l
}

// Config is what a recorder scans and how.
type Config struct {
	// Roots are scanned in order.
	Roots  []Root
	Limits Limits
	// ExtraExcludedNames are excluded besides DefaultExcludedNames.
	ExtraExcludedNames []string

	excluded map[string]bool
}

// DefaultRoots are the two roots of a thread: workspace and outputs under
// dir, reported under /mnt/user-data.
func DefaultRoots(workspaceDir, outputsDir string) []Root {
	return []Root{
		{Name: "workspace", Dir: workspaceDir, VirtualPrefix: "/mnt/user-data/workspace"},
		{Name: "outputs", Dir: outputsDir, VirtualPrefix: "/mnt/user-data/outputs"},
	}
}

func (c Config) prepared() *Config {
	c.Limits = c.Limits.withDefaults()
	c.excluded = map[string]bool{}
	for _, n := range slices.Concat(DefaultExcludedNames, c.ExtraExcludedNames) {
		c.excluded[n] = true
	}
	c.Roots = slices.Clone(c.Roots)
	return &c
}

// Capture takes the pre-run snapshot, with the text of every text file
// cached in a temporary directory (runstream-workspace-changes-*) that
// Close removes. On failure, or when ctx ends, the directory is removed
// before Capture returns.
func Capture(ctx context.Context, cfg Config) (*Snapshot, error) {
	c := cfg.prepared()
	dir, err := os.MkdirTemp("", "runstream-workspace-changes-*")
	if err != nil {
		return nil, fmt.Errorf("workspace: capture: %w", err)
	}
	s, err := c.scan(ctx, textMode{want: true, cacheD: dir})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("workspace: capture: %w", err)
	}
	return s, nil
}

// Scan returns the roots' current state; with text, the texts of the
// paths in only (all when only is nil) are kept in memory.
func Scan(ctx context.Context, cfg Config, text bool, only map[string]bool) (*Snapshot, error) {
	return cfg.prepared().scan(ctx, textMode{want: text, only: only})
}

// Changed returns the sorted virtual paths that differ between before and
// after: present in one only, or, in both, with different SHA-256 digests
// when both have one, else a different size or modification time.
func Changed(before, after *Snapshot) []string {
	var out []string
	for _, p := range unionPaths(before, after) {
		b, inBefore := before.Entries[p]
		a, inAfter := after.Entries[p]
		if !inBefore || !inAfter || !same(b, a) {
			out = append(out, p)
		}
	}
	return out
}

func unionPaths(before, after *Snapshot) []string {
	var paths []string
	for p := range before.Entries {
		paths = append(paths, p)
	}
	for p := range after.Entries {
		if _, ok := before.Entries[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	return paths
}

func same(b, a Entry) bool {
	if b.SHA256 != "" && a.SHA256 != "" {
		return b.SHA256 == a.SHA256
	}
	return b.Size == a.Size && b.ModTime == a.ModTime
}

// ChangedOutputs returns the sorted paths created or modified under the
// root named outputRoot that are regular files (not symlinks), for a
// delivery receipt.
func ChangedOutputs(before, after *Snapshot, outputRoot string) []string {
	var out []string
	for _, p := range Changed(before, after) {
		if a, ok := after.Entries[p]; ok && a.Root == outputRoot && !a.Symlink {
			out = append(out, p)
		}
	}
	return out
}
