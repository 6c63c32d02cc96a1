package httprec

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestWriterRecordsStatusAndBytes(t *testing.T) {
	under := httptest.NewRecorder()
	w := &Writer{ResponseWriter: under}
	w.Write([]byte("hello"))
	w.WriteHeader(http.StatusTeapot) // too late: the first status stands
	w.Write([]byte(" world"))
	if w.Status != http.StatusOK || w.Bytes != 11 {
		t.Fatalf("status %d bytes %d, want 200 and 11", w.Status, w.Bytes)
	}

	w = &Writer{ResponseWriter: httptest.NewRecorder()}
	w.WriteHeader(http.StatusNotFound)
	if w.Status != http.StatusNotFound || w.Bytes != 0 {
		t.Fatalf("status %d bytes %d, want 404 and 0", w.Status, w.Bytes)
	}
	if err := http.NewResponseController(w).Flush(); err != nil {
		t.Fatalf("Flush through Unwrap: %v", err)
	}
}
