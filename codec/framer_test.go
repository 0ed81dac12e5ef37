package codec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/framer"
)

// chunkReader returns data a few bytes at a time, sizes drawn from rng,
// then err.
type chunkReader struct {
	data []byte
	rng  *rand.Rand
	max  int
	err  error
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := min(len(p), len(r.data), 1+r.rng.IntN(r.max))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

func (r *chunkReader) Close() error { return nil }

// readFrames reads a stream to its end as the streaming decoder does,
// growing its buffer on io.ErrShortBuffer, and lists the frames and the
// error that ended it.
func readFrames(r io.Reader, size int) []string {
	var out []string
	buf := make([]byte, size)
	for i := 0; i < 1000; i++ {
		n, err := r.Read(buf)
		frame := append([]byte(nil), buf[:n]...)
		for errors.Is(err, io.ErrShortBuffer) {
			n, err = r.Read(buf)
			frame = append(frame, buf[:n]...)
		}
		if err != nil {
			return append(out, fmt.Sprintf("error %q after %q", err.Error(), frame))
		}
		out = append(out, string(frame))
	}
	return append(out, "too many frames")
}

var frameStreams = []string{
	"",
	"\n",
	`{"type":"ADDED","object":{"kind":"ResourceClaim","metadata":{"name":"a"}}}` + "\n",
	`{"a":1}` + "\n" + `{"b":[1,2,{"c":"d\"}"}]}` + "\n" + ` {"e":null}`,
	`{"a":1}{"b":2}`,
	`{"a":"` + strings.Repeat("x", 100000) + `"}` + "\n" + `{"small":true}` + "\n",
	`{"a":1}` + "\n" + `{"truncated":`,
	`{"a":1}` + "\n" + `{"bad":tru}` + "\n" + `{"c":3}`,
	`{"a":1}` + "\n" + `[1,2]` + "\n" + `{"c":3}`,
	`{"a":1}` + "\n" + `"string"` + "\n",
	`{"a":1}` + "\n" + `}`,
	`{"a":1} x`,
	`{"deep":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
	"{\"u\":\"\\u00e9 ✓\"}\n{\"ctl\":\"a\tb\"}\n",
	`[1]` + "\n" + `{"a":"` + strings.Repeat("y", 5000) + `"}` + "\n" + `"s"` + "\n" + `{"b":2}` + "\n",
}

// TestFrameReader: frames and errors are the default JSON frame reader's,
// however the stream arrives and whatever buffer the reader is given.
func TestFrameReader(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i, stream := range frameStreams {
		for _, end := range []error{io.EOF, io.ErrUnexpectedEOF} {
			for round := range 20 {
				maxChunk := []int{1, 7, 100, 1 << 20}[round%4]
				size := []int{1, 5, 64, 1 << 16}[(round/4)%4]
				seed := rng.Uint64()
				want := readFrames(framer.NewJSONFramedReader(&chunkReader{data: []byte(stream), rng: rand.New(rand.NewPCG(seed, 0)), max: maxChunk, err: end}), size)
				got := readFrames(jsonFramer{}.NewFrameReader(&chunkReader{data: []byte(stream), rng: rand.New(rand.NewPCG(seed, 0)), max: maxChunk, err: end}), size)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("stream %d, end %v, chunks ≤%d, buffer %d:\n got %.300q\nwant %.300q", i, end, maxChunk, size, got, want)
				}
			}
		}
	}
}

// FuzzFrameReader compares the readers on any stream.
func FuzzFrameReader(f *testing.F) {
	for _, s := range frameStreams {
		if len(s) < 1000 {
			f.Add([]byte(s), uint8(7), uint8(5))
		}
	}
	f.Fuzz(func(t *testing.T, stream []byte, maxChunk, size uint8) {
		if maxChunk == 0 || size == 0 {
			return
		}
		want := readFrames(framer.NewJSONFramedReader(&chunkReader{data: stream, rng: rand.New(rand.NewPCG(1, 1)), max: int(maxChunk), err: io.EOF}), int(size))
		got := readFrames(jsonFramer{}.NewFrameReader(&chunkReader{data: bytes.Clone(stream), rng: rand.New(rand.NewPCG(1, 1)), max: int(maxChunk), err: io.EOF}), int(size))
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("stream %q, chunks ≤%d, buffer %d:\n got %q\nwant %q", stream, maxChunk, size, got, want)
		}
	})
}
