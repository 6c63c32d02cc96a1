package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/runstream/runstream/internal/jsontype"
	"io"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/internal/jsonscan"
	"github.com/runstream/runstream/redact"
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
	writeRawJSON(w, status, body)
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
	body, err := readBody(r)
	if err != nil {
		return nil, bodyReadError(err)
	}
	if err := CheckJSON(body); err != nil {
		return nil, err
	}
	return body, nil
}

// maxPreallocate bounds the buffer readBody allocates up front on the
// request's word (its Content-Length), before the bytes arrive: a client
// that states a large body and sends it slowly holds no more than this
// until its bytes come. Beyond it the buffer grows as they arrive.
const maxPreallocate = 64 << 10

// readBody reads the request body whole: in one allocation when the
// request states its length (up to maxPreallocate), instead of the
// doublings of io.ReadAll. The body's limit is the reader's (the server
// wraps it in http.MaxBytesReader).
func readBody(r *http.Request) ([]byte, error) {
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 {
		buf.Grow(int(min(n, maxPreallocate)) + bytes.MinRead) // ReadFrom wants MinRead free to read the end
	}
	_, err := buf.ReadFrom(r.Body)
	return buf.Bytes(), err
}

// bodyReadError is the error of a request body that could not be read:
// PAYLOAD_TOO_LARGE past the body limit, REQUEST_TIMEOUT past the body
// deadline, else INVALID_ARGUMENT.
func bodyReadError(err error) error {
	var maxBytes *http.MaxBytesError
	switch {
	case errors.As(err, &maxBytes):
		return runstream.Errorf(runstream.CodePayloadTooLarge, "request body exceeds %d bytes", maxBytes.Limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return runstream.Wrap(err, runstream.CodeRequestTimeout, "the request body did not arrive within the server's body deadline")
	}
	return runstream.Wrap(err, runstream.CodeInvalidArgument, "could not read the request body")
}

func isJSONSuffix(mt string) bool {
	return len(mt) > 5 && mt[len(mt)-5:] == "+json"
}

// CheckJSON verifies that body is one valid UTF-8 JSON value without
// duplicate object keys, at most MaxJSONDepth deep, whose numbers are all
// finite float64 values. Its error is a *runstream.Error with
// CodeInvalidJSON, or CodeValidationFailed naming the JSON pointer of a
// number out of range (1e999), never its text. A plain body
// (jsonscan.Plain) is checked in one pass, any other token by token.
func CheckJSON(body []byte) error {
	if jsonscan.Plain(body, MaxJSONDepth) {
		return nil
	}
	return checkJSONTokens(body)
}

// checkJSONTokens is CheckJSON with encoding/json's tokens.
func checkJSONTokens(body []byte) error {
	if !utf8.Valid(body) {
		return runstream.Errorf(runstream.CodeInvalidJSON, "request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := checkValue(dec, nil); err != nil {
		var rangeErr numberRangeError
		if errors.As(err, &rangeErr) {
			const msg = "number out of range: JSON numbers must be finite 64-bit floating-point values"
			return runstream.Errorf(runstream.CodeValidationFailed, "%s: %s", rangeErr.path, msg).
				WithDetail("problems", []map[string]string{{"path": rangeErr.path, "message": msg}})
		}
		return runstream.Wrap(err, runstream.CodeInvalidJSON, "invalid JSON: %s", err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return runstream.Errorf(runstream.CodeInvalidJSON, "invalid JSON: unexpected data after the top-level value")
	}
	if at, ok := loneSurrogate(body); ok {
		return runstream.Errorf(runstream.CodeInvalidJSON, "invalid JSON: \\u escape at byte %d is half of a UTF-16 surrogate pair", at)
	}
	return nil
}

// loneSurrogate returns the offset of the first \u escape in a string of
// the valid JSON text body that encodes half of a UTF-16 surrogate pair
// without its other half. encoding/json would silently turn it into
// U+FFFD; a client that sent it meant something else.
func loneSurrogate(body []byte) (int, bool) {
	if !bytes.Contains(body, []byte(`\u`)) {
		return 0, false
	}
	inString := false
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\' && body[i+1] == 'u': // valid JSON: four hex digits follow
			r := hex4(body[i+2 : i+6])
			switch {
			case r < 0xD800 || r > 0xDFFF:
			case r >= 0xDC00:
				return i, true // a low half first
			case i+11 < len(body) && body[i+6] == '\\' && body[i+7] == 'u' && hex4(body[i+8:i+12])&0xFC00 == 0xDC00:
				i += 6 // the pair's low half, checked here
			default:
				return i, true // a high half alone
			}
			i += 5
		case c == '\\':
			i++ // a one-character escape
		}
	}
	return 0, false
}

// hex4 decodes four hexadecimal digits.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// numberRangeError is a number that float64 cannot hold, at path (a JSON
// pointer, redacted and shortened: member names are the caller's).
type numberRangeError struct{ path string }

func (e numberRangeError) Error() string { return e.path + ": number out of range" }

// maxPathRunes bounds the JSON pointer an error names.
const maxPathRunes = 256

// jsonPointer returns the JSON pointer of path's members and indexes,
// redacted, and cut to maxPathRunes runes.
func jsonPointer(path []string) string {
	var b strings.Builder
	for _, p := range path {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(p))
	}
	s := redact.Text(b.String())
	if utf8.RuneCountInString(s) > maxPathRunes {
		s = string([]rune(s)[:maxPathRunes]) + "…"
	}
	return s
}

// checkValue checks the next value of dec, at path (members and indexes
// from the top).
func checkValue(dec *json.Decoder, path []string) error {
	depth := len(path)
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return errors.New("unexpected end of input")
		}
		return errors.New(jsonErrorText(err))
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		if n, isNumber := tok.(json.Number); isNumber {
			if _, err := strconv.ParseFloat(string(n), 64); err != nil {
				return numberRangeError{path: jsonPointer(path)}
			}
		}
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
				return fmt.Errorf("duplicate key %s", redact.Quote(key))
			}
			seen[key] = true
			if err := checkValue(dec, append(path, key)); err != nil {
				return err
			}
		}
	case '[':
		for i := 0; dec.More(); i++ {
			if err := checkValue(dec, append(path, strconv.Itoa(i))); err != nil {
				return err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // closing delimiter
		return errors.New(jsonErrorText(err))
	}
	return nil
}

// jsonErrorText returns the decoder's message without the request's data:
// a syntax error names the offset and the offending character, a type
// error the member and the kinds of JSON value wanted and given (not the
// value, nor Go's types: package jsontype), and an unknown
// member only its short redacted excerpt (redact.Quote).
func jsonErrorText(err error) string {
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return fmt.Sprintf("%s (at byte %d)", syntax.Error(), syntax.Offset)
	}
	if msg, ok := jsontype.Describe(err, "the body"); ok {
		return "json: " + msg
	}
	const unknownField = "json: unknown field "
	if msg := err.Error(); strings.HasPrefix(msg, unknownField) {
		name, uerr := strconv.Unquote(strings.TrimPrefix(msg, unknownField))
		if uerr != nil {
			name = strings.TrimPrefix(msg, unknownField)
		}
		return unknownField + redact.Quote(name)
	}
	return redact.Text(err.Error())
}
