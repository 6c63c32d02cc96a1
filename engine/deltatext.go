package engine

import (
	"bytes"
	"strings"

	"github.com/runstream/runstream/redact"
)

// A model streams its text in pieces, and a secret in it can be cut
// between two node.output.delta events: "Bearer " in one and the token in
// the next, or "sk-proj-Ab12" and "Cd34…". Redacted one by one, neither
// piece would look like a secret. The emitter therefore writes the text of
// a (node attempt, channel) so that no secret is cut:
//
//   - The word being written is held back until the text after it arrives
//     (holdFrom), or until the attempt ends: the trailing run of printable
//     ASCII (a key, a token), or the whole trailing run of non-space text
//     when it may hold a URL's or a DSN's userinfo. A run longer than
//     heldLimit is written up to its last separator.
//   - Each piece is redacted with the text before it on its line as
//     context (deltaStream.line), as the rules read lines ("password: x",
//     "Cookie: a=b; c=d"), and with the BEGIN line of a private key block
//     that has not ended, so that the whole block stays hidden however
//     many pieces it takes.
//
// The event log then redacts each delta as the continuation of a line
// (redact.Redactor.Continuation).

const (
	// heldLimit bounds the text held back.
	heldLimit = 4 << 10
	// lineContextLimit bounds the context of a piece: the end of its line.
	lineContextLimit = 16 << 10
	// separators end the text before a secret inside a long run (minified
	// JSON, a query string).
	separators = "\"'`,;:=&?{}[]()<>|"
)

// deltaKey names the text of one channel of one node attempt.
type deltaKey struct{ nodeRunID, channel string }

// deltaStream is what the text of one deltaKey keeps across writes.
type deltaStream struct {
	nodeID string
	line   []byte // the written text since its last newline (raw, the end of it)
	pem    []byte // the BEGIN line of a private key block written and not ended (redact.OpenPrivateKey)
	held   []byte // text not written yet
}

// next returns what to write of the stream's held text and text, redacted,
// holding back the word that may still grow unless final. ok is false when
// there is nothing to write.
func (st *deltaStream) next(text []byte, final bool) (out string, ok bool) {
	text = append(st.held, text...)
	cut := len(text)
	if !final {
		cut = holdFrom(text)
	}
	piece := text[:cut]
	st.held = bytes.Clone(text[cut:])
	if len(piece) == 0 {
		return "", false
	}
	context := st.line
	if st.pem != nil && redact.OpenPrivateKey(st.line) == nil {
		context = append(bytes.Clone(st.pem), st.line...)
	}
	out = redactAfter(context, piece)
	st.advance(context, piece)
	return out, out != ""
}

// advance records piece as written after context.
func (st *deltaStream) advance(context, piece []byte) {
	st.pem = bytes.Clone(redact.OpenPrivateKey(append(bytes.Clone(context), piece...)))
	line := append(st.line, piece...)
	if nl := bytes.LastIndexByte(line, '\n'); nl >= 0 {
		line = line[nl+1:]
	}
	if len(line) > lineContextLimit {
		line = line[len(line)-lineContextLimit:]
	}
	st.line = bytes.Clone(line)
}

// holdFrom returns where the text that may still grow into a secret starts
// at the end of text: the trailing run of printable ASCII; or the whole
// trailing run of non-space text when it holds "://" or a ':' after an
// ASCII letter or digit (a URL's or DSN's userinfo, whose password may hold
// any character). A run longer than heldLimit is held from its last
// separator on, or not at all.
func holdFrom(text []byte) int {
	start := len(text)
	for start > 0 && !isSpace(text[start-1]) {
		start--
	}
	if run := text[start:]; !bytes.Contains(run, []byte("://")) && !colonAfterWord(run) {
		start = len(text)
		for start > 0 && text[start-1] > ' ' && text[start-1] < 0x7f {
			start--
		}
	}
	if len(text)-start <= heldLimit {
		return start
	}
	tail := text[len(text)-heldLimit:]
	if sep := bytes.LastIndexAny(tail, separators); sep >= 0 {
		return len(text) - heldLimit + sep + 1
	}
	return len(text)
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// colonAfterWord reports whether run holds a ':' right after an ASCII
// letter or digit.
func colonAfterWord(run []byte) bool {
	for i := 1; i < len(run); i++ {
		if c := run[i-1]; run[i] == ':' && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return true
		}
	}
	return false
}

// redactAfter redacts piece as it reads after context: the redaction of
// the two together, past the redaction of context alone. When the two
// disagree inside context (a secret that started there, written in part),
// what follows their common start is returned, from the start of a marker
// it would cut, so the rest of the secret is hidden.
func redactAfter(context, piece []byte) string {
	if len(context) == 0 {
		return redact.Text(string(piece))
	}
	before := redact.Text(string(context))
	whole := redact.Text(string(context) + string(piece))
	n := 0
	for n < len(before) && n < len(whole) && before[n] == whole[n] {
		n++
	}
	if open := strings.LastIndex(whole[:n], "[REDACTED:"); open >= 0 && !strings.Contains(whole[open:n], "]") {
		n = open
	}
	return whole[n:]
}
