package httpapi

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the OpenAPI 3.1 document of every route the server
// registers; openapi_test.go fails when a route is missing from it or it
// documents one that is not served.
//
//go:embed openapi.json
var openAPIDocument []byte

// getOpenAPI is GET /api/openapi.json: the document as it is embedded.
func (s *Server) getOpenAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Write(openAPIDocument)
	return nil
}
