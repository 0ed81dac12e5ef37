// Package codec holds the JSON serializers the server and its in-process
// clients use in place of apimachinery's defaults, where those do work
// that changes no answer.
package codec

import (
	"bytes"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// WithTypeMetaFactory is codecs with JSON serializers that find an
// object's apiVersion and kind with typeMetaFactory; the rest is codecs'
// own. streamingLists is the JSON serializers' streaming list encoding,
// as codecs made it (the API groups' codecs stream lists, the storage's
// do not).
func WithTypeMetaFactory(scheme *runtime.Scheme, codecs serializer.CodecFactory, streamingLists bool) runtime.StorageSerializer {
	infos := append([]runtime.SerializerInfo(nil), codecs.SupportedMediaTypes()...)
	for i, info := range infos {
		if info.MediaType != runtime.ContentTypeJSON {
			continue
		}
		plain := json.NewSerializerWithOptions(typeMetaFactory{}, scheme, scheme, json.SerializerOptions{StreamingCollectionsEncoding: streamingLists})
		info.Serializer = plain
		info.StrictSerializer = json.NewSerializerWithOptions(typeMetaFactory{}, scheme, scheme, json.SerializerOptions{Strict: true, StreamingCollectionsEncoding: streamingLists})
		if info.PrettySerializer != nil {
			info.PrettySerializer = json.NewSerializerWithOptions(typeMetaFactory{}, scheme, scheme, json.SerializerOptions{Pretty: true})
		}
		if info.StreamSerializer != nil {
			stream := *info.StreamSerializer
			stream.Serializer = plain
			info.StreamSerializer = &stream
		}
		infos[i] = info
	}
	return typeMetaCodecs{CodecFactory: codecs, infos: infos}
}

type typeMetaCodecs struct {
	serializer.CodecFactory
	infos []runtime.SerializerInfo
}

func (c typeMetaCodecs) SupportedMediaTypes() []runtime.SerializerInfo { return c.infos }

// typeMetaFactory answers as json.SimpleMetaFactory does, the apiVersion
// and kind of a JSON document, without decoding all of it: it checks the
// syntax of the whole document in one pass and reads only the two
// top-level members it needs. SimpleMetaFactory decodes the document with
// encoding/json, which is two passes of a slower scanner; that showed in
// the server's CPU while creating claims, where every claim's JSON is
// read three times (request body, storage, watch).
//
// Whatever the scan is not sure of goes to SimpleMetaFactory, so answers
// and errors stay exactly its own: invalid JSON, a document that is not
// an object, escapes in a member name or in those two values, non-ASCII
// or non-string values for them, and names that match only
// case-insensitively (encoding/json would take "Kind" for "kind").
type typeMetaFactory struct{}

func (typeMetaFactory) Interpret(data []byte) (*schema.GroupVersionKind, error) {
	apiVersion, kind, ok := scanTypeMeta(data)
	if !ok {
		return json.DefaultMetaFactory.Interpret(data)
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, err
	}
	return &schema.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: kind}, nil
}

// maxJSONDepth is encoding/json's nesting limit: deeper documents are
// its error to report.
const maxJSONDepth = 10000

var (
	apiVersionName = []byte("apiVersion")
	kindName       = []byte("kind")
)

// scanTypeMeta returns the top-level "apiVersion" and "kind" strings of a
// valid JSON object; ok is false when the document is not one, or holds
// something SimpleMetaFactory may read differently.
func scanTypeMeta(data []byte) (apiVersion, kind string, ok bool) {
	s := jsonScanner{data: data}
	s.space()
	if !s.consume('{') {
		return "", "", false
	}
	s.space()
	if !s.consume('}') {
		for {
			s.space()
			name, plain := s.str()
			if !plain {
				return "", "", false
			}
			s.space()
			if !s.consume(':') {
				return "", "", false
			}
			s.space()
			switch {
			case bytes.Equal(name, apiVersionName), bytes.Equal(name, kindName):
				value, plain := s.str()
				if !plain || !ascii(value) {
					return "", "", false
				}
				if name[0] == 'a' {
					apiVersion = string(value)
				} else {
					kind = string(value)
				}
			case bytes.EqualFold(name, apiVersionName), bytes.EqualFold(name, kindName):
				return "", "", false
			default:
				if !s.value() {
					return "", "", false
				}
			}
			s.space()
			if s.consume(',') {
				continue
			}
			if s.consume('}') {
				break
			}
			return "", "", false
		}
	}
	s.space()
	if s.pos != len(s.data) {
		return "", "", false
	}
	return apiVersion, kind, true
}

func ascii(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// jsonScanner checks JSON syntax as encoding/json's scanner does (RFC 8259
// grammar, nesting limit included) over data from pos on.
type jsonScanner struct {
	data []byte
	pos  int
}

func (s *jsonScanner) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *jsonScanner) consume(c byte) bool {
	if s.pos < len(s.data) && s.data[s.pos] == c {
		s.pos++
		return true
	}
	return false
}

// str reads a string at pos and returns its content; plain is false when
// there is no valid string there, or it has escapes (the content would
// need unquoting).
func (s *jsonScanner) str() (content []byte, plain bool) {
	start := s.pos
	if !s.skipString() {
		return nil, false
	}
	content = s.data[start+1 : s.pos-1]
	return content, bytes.IndexByte(content, '\\') < 0
}

// skipString passes a valid string at pos, escapes included.
func (s *jsonScanner) skipString() bool {
	if !s.consume('"') {
		return false
	}
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		s.pos++
		switch {
		case c == '"':
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if s.pos >= len(s.data) {
				return false
			}
			e := s.data[s.pos]
			s.pos++
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if s.pos+4 > len(s.data) {
					return false
				}
				for _, h := range s.data[s.pos : s.pos+4] {
					if !isHex(h) {
						return false
					}
				}
				s.pos += 4
			default:
				return false
			}
		}
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func (s *jsonScanner) digits() bool {
	start := s.pos
	for s.pos < len(s.data) && isDigit(s.data[s.pos]) {
		s.pos++
	}
	return s.pos > start
}

// number passes a valid number at pos.
func (s *jsonScanner) number() bool {
	s.consume('-')
	switch {
	case s.consume('0'):
	case s.pos < len(s.data) && '1' <= s.data[s.pos] && s.data[s.pos] <= '9':
		s.digits()
	default:
		return false
	}
	if s.consume('.') && !s.digits() {
		return false
	}
	if s.consume('e') || s.consume('E') {
		if !s.consume('+') {
			s.consume('-')
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

func (s *jsonScanner) literal(word string) bool {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(word)) {
		return false
	}
	s.pos += len(word)
	return true
}

// value passes one valid value at pos, however deeply nested, without
// recursion: open holds the objects ('{') and arrays ('[') it is in.
func (s *jsonScanner) value() bool {
	var open []byte
	for {
		// A value starts here.
		s.space()
		if s.pos >= len(s.data) {
			return false
		}
		scalar := true
		switch c := s.data[s.pos]; c {
		case '{', '[':
			// Deeper than encoding/json goes, even if empty: its error.
			if len(open)+1 >= maxJSONDepth {
				return false
			}
			s.pos++
			s.space()
			closer := byte('}')
			if c == '[' {
				closer = ']'
			}
			if s.consume(closer) {
				break
			}
			open = append(open, c)
			if c == '{' && !s.memberName() {
				return false
			}
			scalar = false
		case '"':
			if !s.skipString() {
				return false
			}
		case 't':
			if !s.literal("true") {
				return false
			}
		case 'f':
			if !s.literal("false") {
				return false
			}
		case 'n':
			if !s.literal("null") {
				return false
			}
		default:
			if !s.number() {
				return false
			}
		}
		if !scalar {
			continue
		}
		// A value ended: close what ends with it, up to the next value.
		for {
			if len(open) == 0 {
				return true
			}
			s.space()
			inObject := open[len(open)-1] == '{'
			if s.consume(',') {
				if inObject && !s.memberName() {
					return false
				}
				break
			}
			closer := byte(']')
			if inObject {
				closer = '}'
			}
			if !s.consume(closer) {
				return false
			}
			open = open[:len(open)-1]
		}
	}
}

// memberName passes `"name" :` inside an object.
func (s *jsonScanner) memberName() bool {
	s.space()
	if !s.skipString() {
		return false
	}
	s.space()
	return s.consume(':')
}
