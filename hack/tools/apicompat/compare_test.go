package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// baseDoc is a small document shaped like the ones the server publishes:
// kinds tagged with their group-version-kind, references wrapped in allOf
// where a default or description sits on them.
const baseDoc = `{
  "paths": {
    "/apis/example.dev/v1/widgets": {"get": {}, "post": {}, "parameters": []},
    "/apis/example.dev/v1/widgets/{name}": {"get": {}, "put": {}, "delete": {}},
    "/apis/example.dev/v1/gadgets": {"get": {}}
  },
  "components": {"schemas": {
    "dev.example.v1.Widget": {
      "type": "object",
      "x-kubernetes-group-version-kind": [{"group": "example.dev", "version": "v1", "kind": "Widget"}],
      "properties": {
        "kind": {"type": "string"},
        "spec": {"allOf": [{"$ref": "#/components/schemas/dev.example.v1.WidgetSpec"}], "default": {}}
      }
    },
    "dev.example.v1.WidgetList": {
      "type": "object",
      "x-kubernetes-group-version-kind": [{"group": "example.dev", "version": "v1", "kind": "WidgetList"}],
      "required": ["items"],
      "properties": {
        "items": {"type": "array", "items": {"allOf": [{"$ref": "#/components/schemas/dev.example.v1.Widget"}], "default": {}}}
      }
    },
    "dev.example.v1.Gadget": {
      "type": "object",
      "x-kubernetes-group-version-kind": [{"group": "example.dev", "version": "v1", "kind": "Gadget"}],
      "properties": {"name": {"type": "string"}}
    },
    "dev.example.v1.WidgetSpec": {
      "type": "object",
      "required": ["name"],
      "properties": {
        "name": {"type": "string", "default": "", "maxLength": 63, "pattern": "^[a-z]+$"},
        "size": {"type": "integer", "format": "int64", "minimum": 1, "maximum": 100},
        "mode": {"type": "string", "enum": ["Fast", "Slow"]},
        "comment": {"type": "string", "nullable": true},
        "labels": {"type": "object", "additionalProperties": {"type": "string", "default": ""}},
        "parts": {
          "type": "array", "maxItems": 32,
          "items": {"allOf": [{"$ref": "#/components/schemas/dev.example.v1.Part"}], "default": {}},
          "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]
        },
        "tags": {"type": "array", "items": {"type": "string", "default": ""}},
        "next": {"$ref": "#/components/schemas/dev.example.v1.WidgetSpec"}
      }
    },
    "dev.example.v1.Part": {
      "type": "object",
      "required": ["name"],
      "properties": {"name": {"type": "string", "default": ""}, "count": {"type": "integer", "format": "int32", "default": 1}}
    }
  }}
}`

const baseServed = `{
  "example.dev/v1": {"Widget": {"resource": "widgets"}, "Gadget": {"resource": "gadgets"}},
  "example.dev/v1beta1": {"Widget": {"resource": "widgets", "introduced": "0.1", "deprecated": "0.1", "removed": "0.3", "replacement": "example.dev/v1 Widget"}}
}`

// edit is a change applied to the decoded base document or served.json.
type edit func(doc, served map[string]any)

func schema(doc map[string]any, path ...string) map[string]any {
	m := doc["components"].(map[string]any)["schemas"].(map[string]any)
	for _, p := range path {
		m = m[p].(map[string]any)
	}
	return m
}

func spec(doc map[string]any) map[string]any { return schema(doc, "dev.example.v1.WidgetSpec") }

func prop(doc map[string]any, name string) map[string]any {
	return spec(doc)["properties"].(map[string]any)[name].(map[string]any)
}

func release(t *testing.T, name string, e edit) *Release {
	t.Helper()
	var doc, served map[string]any
	if err := json.Unmarshal([]byte(baseDoc), &doc); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(baseServed), &served); err != nil {
		t.Fatal(err)
	}
	if e != nil {
		e(doc, served)
	}
	r := &Release{Name: name, Docs: map[string]*Document{}}
	roundtrip(t, served, &r.Served)
	for gv := range r.Served {
		var d Document
		roundtrip(t, doc, &d)
		// v1beta1 publishes the same shapes under its own version.
		if strings.HasSuffix(gv, "v1beta1") {
			data, _ := json.Marshal(doc)
			data = bytes.ReplaceAll(data, []byte(`"version":"v1"`), []byte(`"version":"v1beta1"`))
			data = bytes.ReplaceAll(data, []byte(`/v1/`), []byte(`/v1beta1/`))
			d = Document{}
			if err := json.Unmarshal(data, &d); err != nil {
				t.Fatal(err)
			}
		}
		r.Docs[gv] = &d
	}
	return r
}

func roundtrip(t *testing.T, in, out any) {
	t.Helper()
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatal(err)
	}
}

func TestCompare(t *testing.T) {
	const v1 = "example.dev/v1 "
	tests := map[string]struct {
		oldRelease   string
		withoutEnums bool
		edit         edit
		want         []string // every break expected, exactly
	}{
		"unchanged": {},
		"field added": {edit: func(doc, _ map[string]any) {
			spec(doc)["properties"].(map[string]any)["color"] = map[string]any{"type": "string"}
		}},
		"kind added": {edit: func(doc, served map[string]any) {
			served["example.dev/v1"].(map[string]any)["Gizmo"] = map[string]any{"resource": "gizmos"}
		}},
		"enum value added": {edit: func(doc, _ map[string]any) {
			prop(doc, "mode")["enum"] = []any{"Fast", "Slow", "Medium"}
		}},
		"validation loosened": {edit: func(doc, _ map[string]any) {
			prop(doc, "name")["maxLength"] = 253
			delete(prop(doc, "name"), "pattern")
			prop(doc, "size")["minimum"] = 0
			prop(doc, "parts")["maxItems"] = 64
		}},
		"required field made optional": {edit: func(doc, _ map[string]any) {
			delete(spec(doc), "required")
		}},
		"field removed": {
			edit: func(doc, _ map[string]any) { delete(spec(doc)["properties"].(map[string]any), "comment") },
			want: []string{v1 + "Widget spec.comment: field removed (or renamed)", v1 + "WidgetList items[].spec.comment: field removed (or renamed)"},
		},
		"field renamed": {
			edit: func(doc, _ map[string]any) {
				props := spec(doc)["properties"].(map[string]any)
				props["remark"] = props["comment"]
				delete(props, "comment")
			},
			want: []string{v1 + "Widget spec.comment: field removed (or renamed)", v1 + "WidgetList items[].spec.comment: field removed (or renamed)"},
		},
		"field of a list item removed": {
			edit: func(doc, _ map[string]any) {
				delete(schema(doc, "dev.example.v1.Part")["properties"].(map[string]any), "count")
			},
			want: []string{v1 + "Widget spec.parts[].count: field removed (or renamed)", v1 + "WidgetList items[].spec.parts[].count: field removed (or renamed)"},
		},
		"type changed": {
			edit: func(doc, _ map[string]any) { prop(doc, "size")["type"] = "string"; delete(prop(doc, "size"), "format") },
			want: []string{v1 + "Widget spec.size: type changed from integer to string", v1 + "WidgetList items[].spec.size: type changed from integer to string"},
		},
		"format changed": {
			edit: func(doc, _ map[string]any) { prop(doc, "size")["format"] = "int32" },
			want: []string{v1 + `Widget spec.size: format changed from "int64" to "int32"`, v1 + `WidgetList items[].spec.size: format changed from "int64" to "int32"`},
		},
		"map value type changed": {
			edit: func(doc, _ map[string]any) {
				prop(doc, "labels")["additionalProperties"] = map[string]any{"type": "integer"}
			},
			want: []string{
				v1 + "Widget spec.labels{}: default changed from \"\" to none", v1 + "Widget spec.labels{}: type changed from string to integer",
				v1 + "WidgetList items[].spec.labels{}: default changed from \"\" to none", v1 + "WidgetList items[].spec.labels{}: type changed from string to integer",
			},
		},
		"enum value removed": {
			edit: func(doc, _ map[string]any) { prop(doc, "mode")["enum"] = []any{"Fast"} },
			want: []string{v1 + `Widget spec.mode: enum value "Slow" removed`, v1 + `WidgetList items[].spec.mode: enum value "Slow" removed`},
		},
		"enum added where the old document leaves enums out": {
			withoutEnums: true,
			edit:         func(doc, _ map[string]any) { prop(doc, "comment")["enum"] = []any{"a"} },
		},
		"enum value removed where the old document leaves enums out": {
			withoutEnums: true,
			edit:         func(doc, _ map[string]any) { prop(doc, "mode")["enum"] = []any{"Fast"} },
			want:         []string{v1 + `Widget spec.mode: enum value "Slow" removed`, v1 + `WidgetList items[].spec.mode: enum value "Slow" removed`},
		},
		"enum added": {
			edit: func(doc, _ map[string]any) { prop(doc, "comment")["enum"] = []any{"a"} },
			want: []string{v1 + "Widget spec.comment: enum added (validation tightened)", v1 + "WidgetList items[].spec.comment: enum added (validation tightened)"},
		},
		"optional field made required": {
			edit: func(doc, _ map[string]any) { spec(doc)["required"] = []any{"name", "size"} },
			want: []string{v1 + "Widget spec.size: optional field made required", v1 + "WidgetList items[].spec.size: optional field made required"},
		},
		"required field added": {
			edit: func(doc, _ map[string]any) {
				spec(doc)["properties"].(map[string]any)["owner"] = map[string]any{"type": "string"}
				spec(doc)["required"] = []any{"name", "owner"}
			},
			want: []string{v1 + "Widget spec.owner: required field added", v1 + "WidgetList items[].spec.owner: required field added"},
		},
		"list type changed": {
			edit: func(doc, _ map[string]any) {
				prop(doc, "parts")["x-kubernetes-list-type"] = "atomic"
				delete(prop(doc, "parts"), "x-kubernetes-list-map-keys")
			},
			want: []string{
				v1 + `Widget spec.parts: list map keys (x-kubernetes-list-map-keys) changed from ["name"] to []`,
				v1 + `Widget spec.parts: list type (x-kubernetes-list-type) changed from "map" to "atomic"`,
				v1 + `WidgetList items[].spec.parts: list map keys (x-kubernetes-list-map-keys) changed from ["name"] to []`,
				v1 + `WidgetList items[].spec.parts: list type (x-kubernetes-list-type) changed from "map" to "atomic"`,
			},
		},
		"list type set on a list without one": {
			edit: func(doc, _ map[string]any) { prop(doc, "tags")["x-kubernetes-list-type"] = "set" },
			want: []string{v1 + `Widget spec.tags: list type (x-kubernetes-list-type) changed from "atomic" to "set"`, v1 + `WidgetList items[].spec.tags: list type (x-kubernetes-list-type) changed from "atomic" to "set"`},
		},
		"atomic stated on a list without a list type": {
			edit: func(doc, _ map[string]any) { prop(doc, "tags")["x-kubernetes-list-type"] = "atomic" },
		},
		"list map keys changed": {
			edit: func(doc, _ map[string]any) { prop(doc, "parts")["x-kubernetes-list-map-keys"] = []any{"name", "count"} },
			want: []string{v1 + `Widget spec.parts: list map keys (x-kubernetes-list-map-keys) changed from ["name"] to ["name" "count"]`, v1 + `WidgetList items[].spec.parts: list map keys (x-kubernetes-list-map-keys) changed from ["name"] to ["name" "count"]`},
		},
		"default changed": {
			edit: func(doc, _ map[string]any) { schema(doc, "dev.example.v1.Part", "properties", "count")["default"] = 2 },
			want: []string{v1 + "Widget spec.parts[].count: default changed from 1 to 2", v1 + "WidgetList items[].spec.parts[].count: default changed from 1 to 2"},
		},
		"default added": {
			edit: func(doc, _ map[string]any) { prop(doc, "size")["default"] = 5 },
			want: []string{v1 + "Widget spec.size: default changed from none to 5", v1 + "WidgetList items[].spec.size: default changed from none to 5"},
		},
		"default on a reference changed": {
			edit: func(doc, _ map[string]any) {
				schema(doc, "dev.example.v1.Widget", "properties", "spec")["default"] = map[string]any{"name": "x"}
			},
			want: []string{v1 + `Widget spec: default changed from {} to {"name":"x"}`, v1 + `WidgetList items[].spec: default changed from {} to {"name":"x"}`},
		},
		"maxLength lowered": {
			edit: func(doc, _ map[string]any) { prop(doc, "name")["maxLength"] = 32 },
			want: []string{v1 + "Widget spec.name: maxLength lowered from 63 to 32: validation tightened", v1 + "WidgetList items[].spec.name: maxLength lowered from 63 to 32: validation tightened"},
		},
		"maxItems lowered": {
			edit: func(doc, _ map[string]any) { prop(doc, "parts")["maxItems"] = 8 },
			want: []string{v1 + "Widget spec.parts: maxItems lowered from 32 to 8: validation tightened", v1 + "WidgetList items[].spec.parts: maxItems lowered from 32 to 8: validation tightened"},
		},
		"maxItems added": {
			edit: func(doc, _ map[string]any) { prop(doc, "tags")["maxItems"] = 8 },
			want: []string{v1 + "Widget spec.tags: maxItems added (8): validation tightened", v1 + "WidgetList items[].spec.tags: maxItems added (8): validation tightened"},
		},
		"maximum lowered": {
			edit: func(doc, _ map[string]any) { prop(doc, "size")["maximum"] = 10 },
			want: []string{v1 + "Widget spec.size: maximum lowered from 100 to 10: validation tightened", v1 + "WidgetList items[].spec.size: maximum lowered from 100 to 10: validation tightened"},
		},
		"maximum made exclusive": {
			edit: func(doc, _ map[string]any) { prop(doc, "size")["exclusiveMaximum"] = true },
			want: []string{v1 + "Widget spec.size: maximum lowered from 100 to 100 (exclusive): validation tightened", v1 + "WidgetList items[].spec.size: maximum lowered from 100 to 100 (exclusive): validation tightened"},
		},
		"minimum raised": {
			edit: func(doc, _ map[string]any) { prop(doc, "size")["minimum"] = 2 },
			want: []string{v1 + "Widget spec.size: minimum raised from 1 to 2: validation tightened", v1 + "WidgetList items[].spec.size: minimum raised from 1 to 2: validation tightened"},
		},
		"minLength added": {
			edit: func(doc, _ map[string]any) { prop(doc, "comment")["minLength"] = 1 },
			want: []string{v1 + "Widget spec.comment: minLength added (1): validation tightened", v1 + "WidgetList items[].spec.comment: minLength added (1): validation tightened"},
		},
		"pattern added": {
			edit: func(doc, _ map[string]any) { prop(doc, "comment")["pattern"] = "^a" },
			want: []string{v1 + `Widget spec.comment: pattern added ("^a"): validation tightened`, v1 + `WidgetList items[].spec.comment: pattern added ("^a"): validation tightened`},
		},
		"pattern changed": {
			edit: func(doc, _ map[string]any) { prop(doc, "name")["pattern"] = "^[a-z0-9]+$" },
			want: []string{v1 + `Widget spec.name: pattern changed from "^[a-z]+$" to "^[a-z0-9]+$": validation tightened`, v1 + `WidgetList items[].spec.name: pattern changed from "^[a-z]+$" to "^[a-z0-9]+$": validation tightened`},
		},
		"CEL rule added": {
			edit: func(doc, _ map[string]any) {
				spec(doc)["x-kubernetes-validations"] = []any{map[string]any{"rule": "self.size > 2"}}
			},
			want: []string{
				v1 + `Widget spec: validation rule (x-kubernetes-validations) added or changed: {"rule":"self.size > 2"}: validation tightened`,
				v1 + `WidgetList items[].spec: validation rule (x-kubernetes-validations) added or changed: {"rule":"self.size > 2"}: validation tightened`,
			},
		},
		"operation removed": {
			edit: func(doc, _ map[string]any) {
				delete(doc["paths"].(map[string]any)["/apis/example.dev/v1/widgets/{name}"].(map[string]any), "delete")
			},
			want: []string{"example.dev/v1 DELETE /apis/example.dev/v1/widgets/{name}: operation removed"},
		},
		"served kind removed": {
			edit: func(doc, served map[string]any) {
				delete(served["example.dev/v1"].(map[string]any), "Gadget")
				delete(doc["paths"].(map[string]any), "/apis/example.dev/v1/gadgets")
			},
			want: []string{v1 + "Gadget: served kind removed (not deprecated)"},
		},
		"served version removed": {
			oldRelease: "v0.3.0",
			edit:       func(_, served map[string]any) { delete(served, "example.dev/v1") },
			want:       []string{"example.dev/v1: served version removed (Gadget served it: not deprecated)"},
		},
		"deprecated version removed too early": {
			oldRelease: "v0.1.0",
			edit:       func(_, served map[string]any) { delete(served, "example.dev/v1beta1") },
			want:       []string{"example.dev/v1beta1: served version removed (Widget served it: deprecated in 0.1, to be served until 0.3)"},
		},
		"deprecated version removed when due": {
			oldRelease: "v0.2.0",
			edit:       func(_, served map[string]any) { delete(served, "example.dev/v1beta1") },
		},
		"deprecated after the last release": {
			oldRelease: "v0.0.1",
			edit:       func(_, served map[string]any) { delete(served, "example.dev/v1beta1") },
			want:       []string{"example.dev/v1beta1: served version removed (Widget served it: deprecated in 0.1, after release v0.0.1)"},
		},
		"removal compared with HEAD": {
			oldRelease: "HEAD",
			edit:       func(_, served map[string]any) { delete(served, "example.dev/v1beta1") },
			want:       []string{`example.dev/v1beta1: served version removed (Widget served it: "HEAD" is not a release, so no deprecation period has passed)`},
		},
		"reference inlined with the same default": {
			edit: func(doc, _ map[string]any) {
				parts := prop(doc, "parts")
				parts["items"] = map[string]any{
					"type": "object", "required": []any{"name"}, "default": map[string]any{},
					"properties": schema(doc, "dev.example.v1.Part")["properties"],
				}
			},
		},
		"nullable dropped": {
			edit: func(doc, _ map[string]any) { delete(prop(doc, "comment"), "nullable") },
			want: []string{v1 + "Widget spec.comment: no longer nullable", v1 + "WidgetList items[].spec.comment: no longer nullable"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			oldName := tc.oldRelease
			if oldName == "" {
				oldName = "v0.1.0"
			}
			old := release(t, oldName, nil)
			old.WithoutEnums = tc.withoutEnums
			got := Compare(old, release(t, "HEAD", tc.edit))
			// v1beta1 publishes the same schemas: keep to v1 unless the
			// test is about versions.
			var filtered []string
			for _, b := range got {
				if !strings.HasPrefix(b, "example.dev/v1beta1 ") {
					filtered = append(filtered, b)
				}
			}
			if strings.Join(filtered, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("breaks:\n%s\nwant:\n%s", strings.Join(filtered, "\n"), strings.Join(tc.want, "\n"))
			}
			// Every break in v1's schemas shows in v1beta1's too.
			if len(got) < len(filtered) {
				t.Errorf("fewer breaks in total than in v1")
			}
		})
	}
}

// TestRecursiveSchema checks that a schema referring to itself ends.
func TestRecursiveSchema(t *testing.T) {
	r := release(t, "v0.1.0", nil)
	if got := Compare(r, r); len(got) != 0 {
		t.Fatalf("a release breaks itself: %q", got)
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, r *Release) string {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		served, _ := json.Marshal(r.Served)
		if err := os.WriteFile(filepath.Join(d, servedFile), served, 0o644); err != nil {
			t.Fatal(err)
		}
		for gv := range r.Served {
			doc, _ := json.Marshal(r.Docs[gv])
			if err := os.WriteFile(filepath.Join(d, DocumentName(gv)), doc, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	oldDir := write("v0.1.0", release(t, "v0.1.0", nil))
	newDir := write("HEAD", release(t, "HEAD", func(doc, _ map[string]any) {
		delete(spec(doc)["properties"].(map[string]any), "comment")
	}))
	allow := filepath.Join(dir, "allowed.list")
	const brk = "example.dev/v1 Widget spec.comment: field removed (or renamed)"

	tests := map[string]struct {
		allowList  string
		wantStatus int
		wantOut    []string
	}{
		"break reported": {
			wantStatus: 1,
			wantOut:    []string{"BREAKING: " + brk},
		},
		"break accepted only where listed": {
			allowList:  "# comment: renamed on purpose\n" + brk + "\n",
			wantStatus: 1,
			wantOut:    []string{"BREAKING: example.dev/v1 WidgetList items[].spec.comment"},
		},
		"every break accepted": {
			allowList: "# removed on purpose\n" + brk + "\n" +
				"example.dev/v1 WidgetList items[].spec.comment: field removed (or renamed)\n" +
				"example.dev/v1beta1 Widget spec.comment: field removed (or renamed)\n" +
				"example.dev/v1beta1 WidgetList items[].spec.comment: field removed (or renamed)\n",
			wantOut: []string{"no breaking change", "(4 accepted"},
		},
		"stale entry": {
			allowList: brk + "\n" +
				"example.dev/v1 WidgetList items[].spec.comment: field removed (or renamed)\n" +
				"example.dev/v1beta1 Widget spec.comment: field removed (or renamed)\n" +
				"example.dev/v1beta1 WidgetList items[].spec.comment: field removed (or renamed)\n" +
				"example.dev/v1 Widget spec.name: field removed (or renamed)\n",
			wantStatus: 1,
			wantOut:    []string{"STALE: " + allow + ": example.dev/v1 Widget spec.name"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(allow, []byte(tc.allowList), 0o644); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if status := run(&out, oldDir, newDir, allow, false); status != tc.wantStatus {
				t.Errorf("status %d, want %d; output:\n%s", status, tc.wantStatus, out.String())
			}
			for _, want := range tc.wantOut {
				if !strings.Contains(out.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}
