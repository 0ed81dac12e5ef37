package codec

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// typeMetaCases are documents typeMetaFactory must answer exactly as
// json.SimpleMetaFactory does; fast says which it must answer without it.
var typeMetaCases = []struct {
	name, doc string
	fast      bool
}{
	{"claim", `{"apiVersion":"resource.draplane.dev/v1","kind":"ResourceClaim","metadata":{"name":"a","labels":{"kind":"x"}},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"count":2,"deviceClassName":"gpu"}}]}}}`, true},
	{"kind first, spaces", " \n{ \"kind\" : \"Pod\" ,\t\"apiVersion\":\"v1\" } \r\n", true},
	{"core group", `{"apiVersion":"v1","kind":"Pod"}`, true},
	{"no kind", `{"apiVersion":"v1"}`, true},
	{"empty object", `{}`, true},
	{"last one wins", `{"kind":"A","kind":"B","apiVersion":"x/v1","apiVersion":"y/v2"}`, true},
	{"nested kind is not the kind", `{"spec":{"kind":"Inner","apiVersion":"inner/v9"},"kind":"Outer","apiVersion":"v1"}`, true},
	{"every value type", `{"a":[1,-0.5e+3,2E-2,true,false,null,"s\"\\\/\b\f\n\r\t\u00e9",{},[],[{}]],"b":{"c":{"d":[[[]]]}},"kind":"K","apiVersion":"v1"}`, true},
	{"unicode in a skipped value", `{"note":"h\u00e9 ✓ 日本","kind":"K","apiVersion":"v1"}`, true},
	{"bad group version", `{"apiVersion":"a/b/c","kind":"K"}`, true},

	// What SimpleMetaFactory answers.
	{"empty", ``, false},
	{"not an object", `[1,2,3]`, false},
	{"a string", `"kind"`, false},
	{"null", `null`, false},
	{"truncated", `{"apiVersion":"resource.draplane.dev/v1","kind":"ResourceClaim",`, false},
	{"trailing comma", `{"kind":"K",}`, false},
	{"trailing data", `{"kind":"K"} {}`, false},
	{"kind is null", `{"kind":null,"apiVersion":"v1"}`, false},
	{"kind is a number", `{"kind":1,"apiVersion":"v1"}`, false},
	{"kind is an object", `{"kind":{"a":1},"apiVersion":"v1"}`, false},
	{"kind with an escape", `{"kind":"P\u006fd","apiVersion":"v1"}`, false},
	{"name with an escape", `{"\u006bind":"Pod","apiVersion":"v1"}`, false},
	{"name in other case", `{"Kind":"Pod","APIVERSION":"v1"}`, false},
	{"name folding to kind", "{\"\u212aind\":\"Pod\",\"apiVersion\":\"v1\"}", false},
	{"non-ASCII kind", `{"kind":"Pöd","apiVersion":"v1"}`, false},
	{"invalid UTF-8 kind", "{\"kind\":\"P\xffd\",\"apiVersion\":\"v1\"}", false},
	{"control character", "{\"kind\":\"K\",\"note\":\"a\tb\"}", false},
	{"bad escape", `{"kind":"K","note":"\x"}`, false},
	{"short unicode escape", `{"kind":"K","note":"\u12"}`, false},
	{"leading zero", `{"kind":"K","n":01}`, false},
	{"bare minus", `{"kind":"K","n":-}`, false},
	{"plus sign", `{"kind":"K","n":+1}`, false},
	{"dot without digits", `{"kind":"K","n":1.}`, false},
	{"exponent without digits", `{"kind":"K","n":1e}`, false},
	{"misspelt literal", `{"kind":"K","b":tru}`, false},
	{"literal with a tail", `{"kind":"K","b":truex}`, false},
	{"single quotes", `{'kind':'K'}`, false},
	{"missing colon", `{"kind" "K"}`, false},
	{"missing comma", `{"kind":"K" "apiVersion":"v1"}`, false},
	{"unclosed array", `{"kind":"K","a":[1,2}`, false},
	{"mismatched close", `{"kind":"K","a":[1,2}]`, false},
	{"array trailing comma", `{"kind":"K","a":[1,]}`, false},
	{"object in array without name", `{"kind":"K","a":[{1}]}`, false},
	{"too deep", `{"kind":"K","a":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`, false},
	{"deep but allowed", `{"kind":"K","apiVersion":"v1","a":` + strings.Repeat("[", 9998) + strings.Repeat("]", 9998) + `}`, true},
	{"too deep and empty", `{"kind":"K","a":` + strings.Repeat("[", 9999) + "{}" + strings.Repeat("]", 9999) + `}`, false},
}

func TestTypeMetaFactory(t *testing.T) {
	for _, tc := range typeMetaCases {
		t.Run(tc.name, func(t *testing.T) {
			checkTypeMeta(t, []byte(tc.doc))
			if _, _, fast := scanTypeMeta([]byte(tc.doc)); fast != tc.fast {
				t.Errorf("answered without SimpleMetaFactory: %v, want %v", fast, tc.fast)
			}
		})
	}
}

// FuzzTypeMetaFactory: any input gets SimpleMetaFactory's answer.
// `go test ./codec -run '^$' -fuzz FuzzTypeMetaFactory` explores more.
func FuzzTypeMetaFactory(f *testing.F) {
	for _, tc := range typeMetaCases {
		if len(tc.doc) < 1000 {
			f.Add([]byte(tc.doc))
		}
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkTypeMeta(t, doc)
	})
}

func checkTypeMeta(t *testing.T, doc []byte) {
	t.Helper()
	want, wantErr := json.DefaultMetaFactory.Interpret(doc)
	got, gotErr := typeMetaFactory{}.Interpret(doc)
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
		t.Errorf("Interpret(%.200q) = %v, %v; SimpleMetaFactory: %v, %v", doc, got, gotErr, want, wantErr)
	}
}

func BenchmarkTypeMetaFactory(b *testing.B) {
	doc := []byte(typeMetaCases[0].doc)
	for _, f := range []struct {
		name string
		meta json.MetaFactory
	}{{"SimpleMetaFactory", json.DefaultMetaFactory}, {"typeMetaFactory", typeMetaFactory{}}} {
		b.Run(f.name, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				if _, err := f.meta.Interpret(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
