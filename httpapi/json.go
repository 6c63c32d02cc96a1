package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"unicode/utf8"

	"github.com/runstream/runstream"
)

// MaxJSONDepth is the deepest nesting of arrays and objects a request body
// may have.
const MaxJSONDepth = 64

// writeJSON writes v as the JSON response with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"code":"INTERNAL","message":"internal error","retryable":true}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

// readJSONBody reads a JSON request body: the Content-Type must be JSON,
// the body within the server's limit, valid UTF-8, free of duplicate object
// keys and at most MaxJSONDepth deep. It returns the raw bytes.
func readJSONBody(r *http.Request) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !isJSONSuffix(mt)) {
			return nil, runstream.Errorf(runstream.CodeUnsupportedMediaType, "Content-Type must be application/json")
		}
	} else {
		return nil, runstream.Errorf(runstream.CodeUnsupportedMediaType, "Content-Type must be application/json")
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var maxBytes *http.MaxBytesError
		if errors.As(err, &maxBytes) {
			return nil, runstream.Errorf(runstream.CodePayloadTooLarge, "request body exceeds %d bytes", maxBytes.Limit)
		}
		return nil, runstream.Wrap(err, runstream.CodeInvalidArgument, "could not read the request body")
	}
	if err := CheckJSON(body); err != nil {
		return nil, err
	}
	return body, nil
}

func isJSONSuffix(mt string) bool {
	return len(mt) > 5 && mt[len(mt)-5:] == "+json"
}

// CheckJSON verifies that body is one valid UTF-8 JSON value without
// duplicate object keys and at most MaxJSONDepth deep. Its error is a
// *runstream.Error with CodeInvalidJSON.
func CheckJSON(body []byte) error {
	if !utf8.Valid(body) {
		return runstream.Errorf(runstream.CodeInvalidJSON, "request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := checkValue(dec, 0); err != nil {
		return runstream.Wrap(err, runstream.CodeInvalidJSON, "invalid JSON: %s", err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return runstream.Errorf(runstream.CodeInvalidJSON, "invalid JSON: unexpected data after the top-level value")
	}
	return nil
}

func checkValue(dec *json.Decoder, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return errors.New("unexpected end of input")
		}
		return errors.New(jsonErrorText(err))
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if depth+1 > MaxJSONDepth {
		return fmt.Errorf("nesting deeper than %d levels", MaxJSONDepth)
	}
	switch delim {
	case '{':
		seen := map[string]bool{}
		for dec.More() {
			keyTok, err := dec.Token()
			if err != nil {
				return errors.New(jsonErrorText(err))
			}
			key := keyTok.(string)
			if seen[key] {
				return fmt.Errorf("duplicate key %q", key)
			}
			seen[key] = true
			if err := checkValue(dec, depth+1); err != nil {
				return err
			}
		}
	case '[':
		for dec.More() {
			if err := checkValue(dec, depth+1); err != nil {
				return err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // closing delimiter
		return errors.New(jsonErrorText(err))
	}
	return nil
}

// jsonErrorText returns the decoder's message, which names the offset and
// the offending character, never request data beyond it.
func jsonErrorText(err error) string {
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return fmt.Sprintf("%s (at byte %d)", syntax.Error(), syntax.Offset)
	}
	return err.Error()
}
