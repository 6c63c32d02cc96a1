package workflow

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// ArtifactCreated is the data of artifact.created.
type ArtifactCreated struct {
	ArtifactID string `json:"artifactId"`
	Name       string `json:"name"`
	MimeType   string `json:"mimeType"`
	SizeBytes  int64  `json:"sizeBytes"`
	SHA256     string `json:"sha256"`
}

// ArtifactRef is an artifact as run.completed lists it.
type ArtifactRef struct {
	ArtifactID string `json:"artifactId"`
	Name       string `json:"name"`
	MimeType   string `json:"mimeType"`
	SizeBytes  int64  `json:"sizeBytes"`
	SHA256     string `json:"sha256"`
	NodeID     string `json:"nodeId,omitempty"`
}

// RefOf returns the reference run.completed lists for a.
func RefOf(a Artifact) ArtifactRef {
	return ArtifactRef{ArtifactID: a.ID, Name: a.Name, MimeType: a.MimeType, SizeBytes: a.SizeBytes, SHA256: a.SHA256, NodeID: a.NodeID}
}

// AnnouncedArtifacts returns the artifacts that a run's events announce
// (its artifact.created events), in the order of the events.
func AnnouncedArtifacts(events []Envelope) ([]ArtifactRef, error) {
	var out []ArtifactRef
	for _, env := range events {
		if env.Event != EventArtifactCreated {
			continue
		}
		var d ArtifactCreated
		if err := json.Unmarshal(env.Data, &d); err != nil {
			return nil, fmt.Errorf("artifact.created at seq %d: %w", env.Seq, err)
		}
		out = append(out, ArtifactRef{ArtifactID: d.ArtifactID, Name: d.Name, MimeType: d.MimeType, SizeBytes: d.SizeBytes, SHA256: d.SHA256, NodeID: env.NodeID})
	}
	return out, nil
}

// CompletedArtifacts returns refs as run.completed lists them: a new
// slice, never nil, in creation order (artifact ids are time-ordered).
func CompletedArtifacts(refs []ArtifactRef) []ArtifactRef {
	out := append([]ArtifactRef{}, refs...)
	slices.SortStableFunc(out, func(a, b ArtifactRef) int { return strings.Compare(a.ArtifactID, b.ArtifactID) })
	return out
}
