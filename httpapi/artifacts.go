package httpapi

import (
	"io"
	"mime"
	"net/http"
	"strconv"
)

// getWorkflowRunArtifact serves GET
// /api/workflows/runs/{run_id}/artifacts/{artifact_id}: the artifact's
// bytes, to the run's owner only (another user's run is not found), as an
// attachment of its MIME type that browsers must not sniff or render in
// the API's origin.
func (s *Server) getWorkflowRunArtifact(w http.ResponseWriter, r *http.Request) error {
	a, body, err := s.workflows.OpenArtifact(r.Context(), userOf(r), r.PathValue("run_id"), r.PathValue("artifact_id"))
	if err != nil {
		return err
	}
	defer body.Close()
	h := w.Header()
	h.Set("Content-Type", a.MimeType)
	h.Set("Content-Length", strconv.FormatInt(a.SizeBytes, 10))
	disposition := mime.FormatMediaType("attachment", map[string]string{"filename": a.Name})
	if disposition == "" {
		disposition = "attachment"
	}
	h.Set("Content-Disposition", disposition)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	h.Set("Cache-Control", "private, max-age=0")
	h.Set("ETag", `"sha256-`+a.SHA256+`"`)
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil
	}
	if _, err := io.Copy(w, body); err != nil {
		s.logger.Warn("artifact body", "run_id", r.PathValue("run_id"), "artifact_id", a.ID, "error", err)
	}
	return nil
}
