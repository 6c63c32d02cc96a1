package jsonscan

import (
	"math/rand/v2"
	"testing"
)

// stringEndByByte is StringEnd as a byte-by-byte scan: the reference the
// fast version must agree with.
func stringEndByByte(d []byte, i int) int {
	for ; i < len(d); i++ {
		switch d[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(d)
}

// plainEndByByte is plainEnd as a byte-by-byte scan.
func plainEndByByte(d []byte, i int) int {
	for ; i < len(d); i++ {
		if c := d[i]; c == '"' || c == '\\' || c < 0x20 {
			return i
		}
	}
	return i
}

// randomContent returns string content of up to 40 bytes drawn mostly
// from the bytes the scans treat specially (quotes, backslashes, control
// characters, 0x20, 0x7f, 0x80 and 0xff next to the ones they test), so
// that runs of backslashes and every lane of an eight-byte word come up.
func randomContent(r *rand.Rand) []byte {
	alphabet := []byte{'"', '\\', '\\', 'a', ' ', 0x00, 0x1f, 0x20, 0x21, 0x5b, 0x5d, 0x7f, 0x80, 0xff, 0xa2, 0xdc}
	d := make([]byte, r.IntN(41))
	for k := range d {
		d[k] = alphabet[r.IntN(len(alphabet))]
	}
	return d
}

func TestStringEndAgreesWithAByteScan(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		d := randomContent(r)
		i := 0
		if len(d) > 0 {
			i = r.IntN(len(d) + 1)
		}
		want := stringEndByByte(d, i)
		if got := StringEnd(d, i); got != want {
			t.Fatalf("StringEnd(%q, %d) = %d, want %d", d, i, got, want)
		}
		if got := StringEnd(string(d), i); got != want {
			t.Fatalf("StringEnd(string %q, %d) = %d, want %d", d, i, got, want)
		}
	}
}

func TestPlainEndAgreesWithAByteScan(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for range 200000 {
		d := randomContent(r)
		// Mostly plain bytes, so that whole words pass the fast test.
		for k := range d {
			if r.IntN(4) > 0 {
				d[k] = byte(0x20 + r.IntN(0xe0))
			}
		}
		i := 0
		if len(d) > 0 {
			i = r.IntN(len(d) + 1)
		}
		if got, want := plainEnd(d, i), plainEndByByte(d, i); got != want {
			t.Fatalf("plainEnd(%q, %d) = %d, want %d", d, i, got, want)
		}
	}
}

func TestStringEndAllocatesNothing(t *testing.T) {
	d := []byte(`a long string with an escaped \" quote and more text after it"`)
	s := string(d)
	if n := testing.AllocsPerRun(100, func() { StringEnd(d, 0); StringEnd(s, 0) }); n != 0 {
		t.Errorf("StringEnd allocates %v times per call pair", n)
	}
}

func BenchmarkStringEnd(b *testing.B) {
	d := []byte(`"` + string(make200()) + `"`)
	for b.Loop() {
		StringEnd(d, 1)
	}
}

func BenchmarkPlainEnd(b *testing.B) {
	d := []byte(`"` + string(make200()) + `"`)
	for b.Loop() {
		plainEnd(d, 1)
	}
}

func make200() []byte {
	d := make([]byte, 200)
	for k := range d {
		d[k] = 'a' + byte(k%26)
	}
	return d
}
