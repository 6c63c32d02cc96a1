package engine

import (
	"bytes"

	"github.com/runstream/runstream/redact"
)

// A model streams its text in pieces, and a secret in it can be cut
// between two node.output.delta events: "Bearer " in one and the token in
// the next, or "sk-proj-Ab12" and "Cd34…". The event log redacts each
// event alone, so neither piece would look like a secret. The emitter
// therefore writes the text of a (node attempt, channel) so that no
// secret is cut:
//
//   - The word being written (the trailing run of printable ASCII: a key,
//     a token, a URL) is held back until the text after it arrives, or
//     until the attempt's last write (heldLimit bounds it).
//   - Each piece is redacted with the end of the text written before it
//     as context (deltaStream.written), so that a value whose name or
//     scheme word was written in the last piece ("password = ", "Bearer ")
//     is still found; a private key block is context until its END line,
//     so the whole block stays hidden however many pieces it takes.
//
// The event log then redacts each event as it does every other.

const (
	// heldLimit bounds the word held back: a longer run of printable
	// ASCII is written as it is (and redacted as one piece).
	heldLimit = 4 << 10
	// contextBytes is how much of the written text is the context of the
	// next piece.
	contextBytes = 256
	// pemContextLimit bounds the context kept while a private key block is
	// open.
	pemContextLimit = 64 << 10
)

// deltaKey names the text of one channel of one node attempt.
type deltaKey struct{ nodeRunID, channel string }

// deltaStream is what the text of one deltaKey keeps across writes.
type deltaStream struct {
	nodeID  string
	written []byte // the end of the text written (raw), the next piece's context
	held    []byte // text not written yet: an unfinished word
}

// next returns what to write of the stream's held text and text, redacted,
// and holds back the unfinished word unless final. ok is false when
// nothing is to be written.
func (st *deltaStream) next(text []byte, final bool) (out string, ok bool) {
	text = append(st.held, text...)
	cut := len(text)
	if !final {
		cut = wordStart(text)
	}
	piece := text[:cut]
	st.held = bytes.Clone(text[cut:])
	if len(piece) == 0 {
		return "", false
	}
	out = redactAfter(st.written, piece)
	st.written = keepContext(append(st.written, piece...))
	return out, true
}

// wordStart returns where the trailing run of printable ASCII of text
// starts: the word that may still grow. A run longer than heldLimit is not
// held.
func wordStart(text []byte) int {
	i := len(text)
	for i > 0 && text[i-1] > ' ' && text[i-1] < 0x7f {
		i--
	}
	if len(text)-i > heldLimit {
		return len(text)
	}
	return i
}

// redactAfter redacts piece as it reads after written: the redaction of
// the two together, past the redaction of written alone. When the two
// disagree inside written (a secret that started there and was written in
// part), what follows their common start is returned, so the rest of it
// is hidden.
func redactAfter(written, piece []byte) string {
	if len(written) == 0 {
		return redact.Text(string(piece))
	}
	before := redact.Text(string(written))
	whole := redact.Text(string(written) + string(piece))
	n := 0
	for n < len(before) && n < len(whole) && before[n] == whole[n] {
		n++
	}
	return whole[n:]
}

// keepContext returns the end of written text that is the context of the
// next piece: its last contextBytes, or from an unterminated private key
// block on (up to pemContextLimit).
func keepContext(written []byte) []byte {
	if begin := bytes.LastIndex(written, []byte("-----BEGIN")); begin >= 0 {
		block := written[begin:]
		if bytes.Contains(block, []byte("PRIVATE KEY")) && !bytes.Contains(block, []byte("-----END")) && len(block) <= pemContextLimit {
			return bytes.Clone(block)
		}
	}
	if len(written) > contextBytes {
		written = written[len(written)-contextBytes:]
	}
	return bytes.Clone(written)
}
