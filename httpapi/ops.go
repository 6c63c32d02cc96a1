package httpapi

import (
	"io/fs"
	"net/http"
	"slices"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/redact"
)

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": s.cfg.Version})
	return nil
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	parts, err := s.cfg.Ready(r.Context())
	if err != nil && runstream.ErrorCodeOf(err) != runstream.CodeUnavailable {
		err = runstream.Wrap(err, runstream.CodeUnavailable, "the %s store is not reachable", s.cfg.Store)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "store": s.cfg.Store, "durability": s.cfg.Durability, "parts": parts})
	return nil
}

func (s *Server) listContracts(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string][]string{"contracts": s.cfg.ContractNames})
	return nil
}

func (s *Server) getContract(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if !slices.Contains(s.cfg.ContractNames, name) {
		return runstream.Errorf(runstream.CodeNotFound, "no contract named %s", redact.Quote(name))
	}
	body, err := fs.ReadFile(s.cfg.Contracts, name)
	if err != nil {
		return runstream.Wrap(err, runstream.CodeInternal, "read contract")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.Write(body)
	return nil
}
