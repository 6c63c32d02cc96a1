// Package workspace records what an agent run changed in the files of its
// thread (reference §5): a snapshot of two roots (by default "workspace"
// and "outputs", reported under /mnt/user-data/…) before the run, a
// comparison after it, and one workspace_changes event whose content is a
// summary ("2 files changed +3 -1") and whose metadata.workspace_changes
// holds the versioned summary, the file list and the limits.
//
// Scanning is deterministic: roots in order, every directory's entries in
// sorted order, so which files a MaxScannedFiles truncation keeps does not
// depend on the file system. Directories named in DefaultExcludedNames (and
// Config.ExtraExcludedNames) and directory symlinks are pruned. Symlinks are
// never followed: they are recorded with their target text. Sensitive paths
// (Sensitive: .env, *secret*, *token*, *.pem, … against the base name, the
// whole path and every component) are recorded by size and time only:
// their content is never opened. Other files are sniffed for binary content
// (extensions, NUL bytes, UTF-8 and BOM-directed UTF-16), hashed when at most
// MaxFileBytesForDiff, and read as text when a diff needs them.
//
// Capture keeps the pre-run texts in a temporary directory
// (runstream-workspace-changes-*); Snapshot.Close removes it, Record always
// closes the snapshot it is given, and a failed or cancelled Capture removes
// it before returning.
package workspace
