package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"unicode"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/workflow"
)

// ArtifactSpec is a node's artifact declaration: the node's output is
// stored as an artifact with this name and MIME type.
type ArtifactSpec struct {
	Name     string `json:"name"`
	MimeType string `json:"mimeType"`
}

// MaxArtifactNameLength bounds an artifact's name, in bytes.
const MaxArtifactNameLength = 255

// check reports what is wrong with the declaration, caller-safe.
func (a *ArtifactSpec) check() error {
	if a.Name == "" || len(a.Name) > MaxArtifactNameLength {
		return fmt.Errorf("artifact.name must have 1 to %d bytes", MaxArtifactNameLength)
	}
	for _, r := range a.Name {
		if unicode.IsControl(r) || r == '/' || r == '\\' {
			return errors.New("artifact.name must not hold control characters or slashes")
		}
	}
	if _, _, err := mime.ParseMediaType(a.MimeType); err != nil || len(a.MimeType) > 255 {
		return fmt.Errorf("artifact.mimeType %q is not a valid media type", shorten(a.MimeType))
	}
	return nil
}

// ArtifactContent returns the bytes stored for a node output: the text of
// a JSON string, else the output's JSON.
func ArtifactContent(output json.RawMessage) []byte {
	var s string
	if len(output) > 0 && output[0] == '"' && json.Unmarshal(output, &s) == nil {
		return []byte(s)
	}
	return bytes.Clone(output)
}

// ArtifactBlobs stores the bytes of artifacts; their metadata is in the
// workflow store (workflow.AppendParams.Artifacts, Store.GetArtifact). An
// artifact's bytes are written before its metadata is committed, so a
// blob whose metadata never committed (the append failed) is garbage
// nobody reads. Implementations are safe for concurrent use.
type ArtifactBlobs interface {
	// Put stores data as the artifact's bytes, replacing any.
	Put(ctx context.Context, runID, artifactID string, data []byte) error
	// Open returns the artifact's bytes; CodeNotFound when there are none.
	Open(ctx context.Context, runID, artifactID string) (io.ReadCloser, error)
}

// blobIDPattern guards the ids that name blobs (and files).
var blobIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

func checkBlobIDs(runID, artifactID string) error {
	if !blobIDPattern.MatchString(runID) || !blobIDPattern.MatchString(artifactID) {
		return runstream.Errorf(runstream.CodeInvalidArgument, "artifact ids must match %s", blobIDPattern)
	}
	return nil
}

// MemoryBlobs keeps artifact bytes in memory, for memory stores and tests.
type MemoryBlobs struct {
	mu    sync.Mutex
	blobs map[string][]byte
}

// NewMemoryBlobs returns an empty MemoryBlobs.
func NewMemoryBlobs() *MemoryBlobs { return &MemoryBlobs{blobs: map[string][]byte{}} }

// Put implements ArtifactBlobs.
func (m *MemoryBlobs) Put(_ context.Context, runID, artifactID string, data []byte) error {
	if err := checkBlobIDs(runID, artifactID); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.blobs[runID+"/"+artifactID] = bytes.Clone(data)
	return nil
}

// Open implements ArtifactBlobs.
func (m *MemoryBlobs) Open(_ context.Context, runID, artifactID string) (io.ReadCloser, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.blobs[runID+"/"+artifactID]
	if !ok {
		return nil, runstream.Errorf(runstream.CodeNotFound, "artifact %q of run %q has no stored bytes", artifactID, runID)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// FileBlobs keeps artifact bytes in files under a directory: DIR/RUN/ID.
type FileBlobs struct {
	dir string
}

// NewFileBlobs returns the FileBlobs of dir, created (0750) when missing.
func NewFileBlobs(dir string) (*FileBlobs, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("artifact directory: %w", err)
	}
	return &FileBlobs{dir: dir}, nil
}

// Put implements ArtifactBlobs: it writes a temporary file, syncs it and
// renames it into place, so a reader sees the whole artifact or none.
func (f *FileBlobs) Put(_ context.Context, runID, artifactID string, data []byte) error {
	if err := checkBlobIDs(runID, artifactID); err != nil {
		return err
	}
	dir := filepath.Join(f.dir, runID)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("put artifact: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+artifactID+".*")
	if err != nil {
		return fmt.Errorf("put artifact: %w", err)
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, artifactID))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("put artifact: %w", err)
	}
	return nil
}

// Open implements ArtifactBlobs.
func (f *FileBlobs) Open(_ context.Context, runID, artifactID string) (io.ReadCloser, error) {
	if err := checkBlobIDs(runID, artifactID); err != nil {
		return nil, err
	}
	file, err := os.Open(filepath.Join(f.dir, runID, artifactID))
	if errors.Is(err, os.ErrNotExist) {
		return nil, runstream.Errorf(runstream.CodeNotFound, "artifact %q of run %q has no stored bytes", artifactID, runID)
	}
	if err != nil {
		return nil, fmt.Errorf("open artifact: %w", err)
	}
	return file, nil
}

// putArtifact stores the bytes of a node's output as its artifact and
// returns the metadata to commit with node.completed.
func (r *runner) putArtifact(ctx context.Context, n *NodeRun, spec *ArtifactSpec, out json.RawMessage) (workflow.Artifact, error) {
	content := ArtifactContent(out)
	if len(content) > r.e.cfg.MaxArtifactBytes {
		return workflow.Artifact{}, limitError(LimitArtifactBytes, "node %s: its artifact has %d bytes, the limit is %d", n.NodeID, len(content), r.e.cfg.MaxArtifactBytes)
	}
	sum := sha256.Sum256(content)
	a := workflow.Artifact{
		ID: NewID("art"), RunID: n.RunID, NodeID: n.NodeID, Name: spec.Name, MimeType: spec.MimeType,
		SizeBytes: int64(len(content)), SHA256: hex.EncodeToString(sum[:]), CreatedAt: r.e.now().UTC(),
	}
	if err := r.e.cfg.Artifacts.Put(ctx, a.RunID, a.ID, content); err != nil {
		if ctx.Err() != nil {
			return workflow.Artifact{}, context.Cause(ctx)
		}
		r.e.logger.Error("store artifact", "run_id", n.RunID, "node_id", n.NodeID, "error", err)
		return workflow.Artifact{}, WithRetryable(runstream.Errorf(runstream.CodeWorkflowNodeFailed, "node %s: its artifact could not be stored", n.NodeID), true)
	}
	return a, nil
}

func artifactEvent(a workflow.Artifact, nodeRunID string) workflow.NewEvent {
	return nodeEvent(workflow.EventArtifactCreated, a.NodeID, nodeRunID, workflow.ArtifactCreated{
		ArtifactID: a.ID, Name: a.Name, MimeType: a.MimeType, SizeBytes: a.SizeBytes, SHA256: a.SHA256,
	})
}
