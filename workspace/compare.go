package workspace

import (
	"fmt"
	"strings"
	"unicode/utf8"

	udiff "github.com/aymanbagabas/go-udiff"
)

// Changes is the payload of a workspace_changes event
// (metadata.workspace_changes).
type Changes struct {
	Version int          `json:"version"`
	Summary Summary      `json:"summary"`
	Files   []FileChange `json:"files"`
	Limits  Limits       `json:"limits"`
}

// Summary counts every changed path, listed or not.
type Summary struct {
	Created        int  `json:"created"`
	Modified       int  `json:"modified"`
	Deleted        int  `json:"deleted"`
	SymlinkCreated int  `json:"symlink_created"`
	Additions      int  `json:"additions"`
	Deletions      int  `json:"deletions"`
	Truncated      bool `json:"truncated"`
}

// HasChanges reports whether any path changed.
func (s Summary) HasChanges() bool {
	return s.Created+s.Modified+s.Deleted+s.SymlinkCreated+s.Additions+s.Deletions > 0
}

// Files returns the number of changed paths.
func (s Summary) Files() int { return s.Created + s.Modified + s.Deleted + s.SymlinkCreated }

// String is the event's content: "<N> file(s) changed +<additions> -<deletions>".
func (s Summary) String() string {
	word := "files"
	if s.Files() == 1 {
		word = "file"
	}
	return fmt.Sprintf("%d %s changed +%d -%d", s.Files(), word, s.Additions, s.Deletions)
}

// FileChange is one changed path.
type FileChange struct {
	Path                  string  `json:"path"`
	Root                  string  `json:"root"`
	Status                string  `json:"status"`
	Binary                bool    `json:"binary"`
	Sensitive             bool    `json:"sensitive"`
	Symlink               bool    `json:"symlink"`
	SizeBefore            *int64  `json:"size_before"`
	SizeAfter             *int64  `json:"size_after"`
	SHA256Before          *string `json:"sha256_before"`
	SHA256After           *string `json:"sha256_after"`
	Diff                  string  `json:"diff"`
	DiffTruncated         bool    `json:"diff_truncated"`
	DiffUnavailableReason *string `json:"diff_unavailable_reason"`
	Additions             int     `json:"additions"`
	Deletions             int     `json:"deletions"`
	SymlinkTargetBefore   *string `json:"symlink_target_before"`
	SymlinkTargetAfter    *string `json:"symlink_target_after"`
}

// Statuses of a changed path.
const (
	StatusCreated        = "created"
	StatusModified       = "modified"
	StatusDeleted        = "deleted"
	StatusSymlinkCreated = "symlink_created"
)

// Compare lists what changed from before to after (reference §5.6), paths
// in code-point order. A symlink replacing a file is symlink_created, a
// file replacing a symlink modified. Diffs are unified with 3 context
// lines, headers "--- a<path>" and "+++ b<path>", lines joined by "\n".
// The diff budget is shared, in path order, by the listed files only (the
// original also charges files beyond MaxFiles, whose diffs nobody sees); a
// diff over the remaining budget is dropped (diff_truncated, reason
// "truncated") but its line counts kept.
func Compare(before, after *Snapshot, limits Limits) Changes {
	limits = limits.withDefaults()
	ch := Changes{Version: 1, Files: []FileChange{}, Limits: limits}
	ch.Summary.Truncated = before.Truncated || after.Truncated
	budget := limits.MaxTotalDiffBytes
	for _, p := range Changed(before, after) {
		b, inBefore := before.Entries[p]
		a, inAfter := after.Entries[p]
		f := FileChange{Path: p}
		switch {
		case inAfter && a.Symlink && (!inBefore || !b.Symlink):
			f.Status = StatusSymlinkCreated
			ch.Summary.SymlinkCreated++
		case !inBefore:
			f.Status = StatusCreated
			ch.Summary.Created++
		case !inAfter:
			f.Status = StatusDeleted
			ch.Summary.Deleted++
		default:
			f.Status = StatusModified
			ch.Summary.Modified++
		}
		main := a
		if !inAfter {
			main = b
		}
		f.Root, f.Binary, f.Sensitive, f.Symlink = main.Root, main.Binary, main.Sensitive, main.Symlink
		if inBefore {
			f.SizeBefore, f.SHA256Before, f.SymlinkTargetBefore = &b.Size, optional(b.SHA256), b.SymlinkTarget
		}
		if inAfter {
			f.SizeAfter, f.SHA256After, f.SymlinkTargetAfter = &a.Size, optional(a.SHA256), a.SymlinkTarget
		}
		listed := len(ch.Files) < limits.MaxFiles
		reason := unavailable(b, inBefore, a, inAfter)
		if reason != "" {
			f.DiffUnavailableReason = &reason
		} else if oldText, newText, ok := texts(before, b, inBefore, after, a, inAfter); ok {
			diff, adds, dels := unified(p, oldText, newText)
			f.Additions, f.Deletions = adds, dels
			if listed {
				if size := int64(len(diff)); size > budget {
					f.DiffTruncated = true
					r := ReasonTruncated
					f.DiffUnavailableReason = &r
				} else {
					f.Diff = diff
					budget -= size
				}
			}
		}
		ch.Summary.Additions += f.Additions
		ch.Summary.Deletions += f.Deletions
		if f.DiffTruncated || reason == ReasonLarge {
			ch.Summary.Truncated = true
		}
		if listed {
			ch.Files = append(ch.Files, f)
		} else {
			ch.Summary.Truncated = true
		}
	}
	return ch
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// unavailable returns the first reason of symlink, sensitive, binary,
// large that either side has.
func unavailable(b Entry, inBefore bool, a Entry, inAfter bool) string {
	for _, r := range []string{ReasonSymlink, ReasonSensitive, ReasonBinary, ReasonLarge} {
		if inBefore && b.Reason == r || inAfter && a.Reason == r {
			return r
		}
	}
	return ""
}

// texts returns both sides' texts, an absent side being empty; ok is false
// when a present side's text is not available.
func texts(before *Snapshot, b Entry, inBefore bool, after *Snapshot, a Entry, inAfter bool) (string, string, bool) {
	var oldText, newText string
	if inBefore {
		t, ok := before.text(b)
		if !ok {
			return "", "", false
		}
		oldText = t
	}
	if inAfter {
		t, ok := after.text(a)
		if !ok {
			return "", "", false
		}
		newText = t
	}
	return oldText, newText, true
}

// unified returns the diff of two texts and its added and deleted line
// counts.
func unified(p, oldText, newText string) (string, int, int) {
	oldLines, newLines := splitLines(oldText), splitLines(newText)
	oldJoined, newJoined := joinLines(oldLines), joinLines(newLines)
	edits := udiff.Lines(oldJoined, newJoined)
	u, err := udiff.ToUnifiedDiff("a"+p, "b"+p, oldJoined, edits, 3)
	if err != nil || len(u.Hunks) == 0 {
		return "", 0, 0
	}
	out := []string{"--- a" + p, "+++ b" + p}
	adds, dels := 0, 0
	for _, h := range u.Hunks {
		fromCount, toCount := 0, 0
		for _, l := range h.Lines {
			switch l.Kind {
			case udiff.Delete:
				fromCount++
			case udiff.Insert:
				toCount++
			default:
				fromCount++
				toCount++
			}
		}
		out = append(out, fmt.Sprintf("@@ -%s +%s @@", hunkRange(h.FromLine, fromCount), hunkRange(h.ToLine, toCount)))
		for _, l := range h.Lines {
			text := strings.TrimSuffix(l.Content, "\n")
			switch l.Kind {
			case udiff.Delete:
				out = append(out, "-"+text)
				dels++
			case udiff.Insert:
				out = append(out, "+"+text)
				adds++
			default:
				out = append(out, " "+text)
			}
		}
	}
	return strings.Join(out, "\n"), adds, dels
}

// hunkRange formats a hunk side as difflib does: "start" for one line,
// "start-1,0" for none, else "start,count".
func hunkRange(start, count int) string {
	switch count {
	case 1:
		return fmt.Sprint(start)
	case 0:
		return fmt.Sprintf("%d,0", start-1)
	}
	return fmt.Sprintf("%d,%d", start, count)
}

// splitLines splits text at every line boundary the original recognises
// (\r\n, \n, \r, \v, \f, \x1c, \x1d, \x1e, \x85, U+2028, U+2029), without
// the terminators.
func splitLines(text string) []string {
	var lines []string
	start := 0
	for i := 0; i < len(text); {
		r, size := rune(text[i]), 1
		if r >= 0x80 {
			r, size = utf8.DecodeRuneInString(text[i:])
		}
		switch r {
		case '\r':
			lines = append(lines, text[start:i])
			if i+1 < len(text) && text[i+1] == '\n' {
				size = 2
			}
			start = i + size
		case '\n', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
			lines = append(lines, text[start:i])
			start = i + size
		}
		i += size
	}
	if start < len(text) {
		lines = append(lines, text[start:])
	}
	return lines
}

func joinLines(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}
