package codec

import (
	"bytes"
	stdjson "encoding/json"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// jsonFramer is json.Framer with a reader that finds where each object
// of a stream ends with the type-meta scanner's one syntax pass. The
// default reader decodes every frame into a json.RawMessage: encoding/
// json's scanner runs over it twice (finding its end, then checking it)
// before the serializer reads it again.
type jsonFramer struct{}

var _ runtime.Framer = jsonFramer{}

func (jsonFramer) NewFrameWriter(w io.Writer) io.Writer { return json.Framer.NewFrameWriter(w) }

func (jsonFramer) NewFrameReader(r io.ReadCloser) io.ReadCloser { return &frameReader{r: r} }

// minFrameRead is how much the buffer grows by when it is short of room;
// a read of the stream gets at least half of it.
const minFrameRead = 32 << 10

// frameReader returns one JSON object of the stream per Read, as
// framer.NewJSONFramedReader does, with io.ErrShortBuffer and the rest on
// the next Reads when the object does not fit. When what it has read is
// not one whole object (the rest of it is still to come, or it is not an
// object, or not JSON), that frame is read by encoding/json's decoder as
// the default reader reads every frame, so that its answers and errors
// are the ones given.
type frameReader struct {
	r io.ReadCloser
	// buf holds what was read and not yet returned, in base; readErr ends
	// the stream once buf is used up.
	base    []byte
	buf     []byte
	readErr error
	// remaining is the rest of a frame the caller's buffer was too small
	// for.
	remaining []byte
	// err ends every Read after a frame that could not be read.
	err error
}

func (f *frameReader) Read(data []byte) (int, error) {
	if len(f.remaining) > 0 {
		n := copy(data, f.remaining)
		f.remaining = f.remaining[n:]
		if len(f.remaining) > 0 {
			return n, io.ErrShortBuffer
		}
		return n, nil
	}
	if f.err != nil {
		return 0, f.err
	}
	f.buf = bytes.TrimLeft(f.buf, " \t\r\n")
	if len(f.buf) == 0 && f.readErr == nil {
		f.fill()
		f.buf = bytes.TrimLeft(f.buf, " \t\r\n")
	}
	var frame []byte
	if s := (jsonScanner{data: f.buf}); len(f.buf) > 0 && f.buf[0] == '{' && s.value() {
		frame, f.buf = f.buf[:s.pos], f.buf[s.pos:]
	} else if frame, f.err = f.decodeFrame(); f.err != nil {
		return 0, f.err
	}
	n := copy(data, frame)
	if n < len(frame) {
		f.remaining = frame[n:]
		return n, io.ErrShortBuffer
	}
	return n, nil
}

// decodeFrame reads the next frame, from buf on, with encoding/json's
// decoder, and keeps in buf what the decoder read past it.
func (f *frameReader) decodeFrame() ([]byte, error) {
	read := bytes.NewReader(f.buf)
	rest := io.Reader(read)
	switch {
	case f.readErr == nil:
		rest = io.MultiReader(rest, f.r)
	case f.readErr != io.EOF:
		rest = io.MultiReader(rest, errorReader{f.readErr})
	}
	decoder := stdjson.NewDecoder(rest)
	var frame stdjson.RawMessage
	if err := decoder.Decode(&frame); err != nil {
		return nil, err
	}
	// Past the frame: what the decoder read ahead, then what it did not
	// read of buf (the stream was not read while buf was not used up).
	after, _ := io.ReadAll(decoder.Buffered())
	after = append(after, f.buf[len(f.buf)-read.Len():]...)
	f.base, f.buf = after[:cap(after)], after
	return frame, nil
}

// fill reads more of the stream into buf.
func (f *frameReader) fill() {
	if cap(f.buf)-len(f.buf) < minFrameRead/2 {
		if len(f.remaining) == 0 && cap(f.base)-len(f.buf) >= minFrameRead/2 {
			// What was returned is done with: move the rest to the front.
			f.buf = f.base[:copy(f.base, f.buf)]
		} else {
			f.base = make([]byte, max(2*cap(f.base), len(f.buf)+minFrameRead))
			f.buf = f.base[:copy(f.base, f.buf)]
		}
	}
	n, err := f.r.Read(f.buf[len(f.buf):cap(f.buf)])
	f.buf = f.buf[:len(f.buf)+n]
	if err != nil {
		f.readErr = err
	}
}

func (f *frameReader) Close() error { return f.r.Close() }

type errorReader struct{ err error }

func (r errorReader) Read([]byte) (int, error) { return 0, r.err }
