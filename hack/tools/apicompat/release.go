package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// servedFile lists the served group-versions, their kinds and lifecycle;
// test/integration/openapispec writes it next to the OpenAPI documents.
const servedFile = "served.json"

// Release is what one directory of api/openapi-spec holds.
type Release struct {
	// Name is the directory name: HEAD or vX.Y.Z.
	Name string
	// Served maps "group/version" to the kinds served there.
	Served map[string]map[string]ServedKind
	// Docs maps "group/version" to its OpenAPI v3 document.
	Docs map[string]*Document
	// WithoutEnums says the documents were written with enums left out
	// (Kubernetes' own api/openapi-spec is generated with the OpenAPIEnums
	// gate off, while kube-apiserver serves enums): an enum where such a
	// document has none is not a tightening.
	WithoutEnums bool
}

// ServedKind is one kind of a served group-version. The lifecycle fields
// are "major.minor" releases, empty when the kind is not deprecated.
type ServedKind struct {
	Resource    string `json:"resource"`
	Introduced  string `json:"introduced,omitempty"`
	Deprecated  string `json:"deprecated,omitempty"`
	Removed     string `json:"removed,omitempty"`
	Replacement string `json:"replacement,omitempty"`
}

// Document is the part of an OpenAPI v3 document the check reads.
type Document struct {
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas map[string]*Schema `json:"schemas"`
	} `json:"components"`
}

// Schema is the part of an OpenAPI v3 schema that clients depend on.
type Schema struct {
	Ref        string             `json:"$ref,omitempty"`
	AllOf      []*Schema          `json:"allOf,omitempty"`
	Type       string             `json:"type,omitempty"`
	Format     string             `json:"format,omitempty"`
	Enum       []json.RawMessage  `json:"enum,omitempty"`
	Default    json.RawMessage    `json:"default,omitempty"`
	Nullable   bool               `json:"nullable,omitempty"`
	Properties map[string]*Schema `json:"properties,omitempty"`
	Items      *Schema            `json:"items,omitempty"`
	// AdditionalProperties is a schema or a boolean.
	AdditionalProperties json.RawMessage `json:"additionalProperties,omitempty"`
	Required             []string        `json:"required,omitempty"`

	MaxItems         *int64   `json:"maxItems,omitempty"`
	MinItems         *int64   `json:"minItems,omitempty"`
	MaxLength        *int64   `json:"maxLength,omitempty"`
	MinLength        *int64   `json:"minLength,omitempty"`
	MaxProperties    *int64   `json:"maxProperties,omitempty"`
	MinProperties    *int64   `json:"minProperties,omitempty"`
	Maximum          *float64 `json:"maximum,omitempty"`
	Minimum          *float64 `json:"minimum,omitempty"`
	ExclusiveMaximum bool     `json:"exclusiveMaximum,omitempty"`
	ExclusiveMinimum bool     `json:"exclusiveMinimum,omitempty"`
	MultipleOf       *float64 `json:"multipleOf,omitempty"`
	Pattern          string   `json:"pattern,omitempty"`

	ListType        string            `json:"x-kubernetes-list-type,omitempty"`
	ListMapKeys     []string          `json:"x-kubernetes-list-map-keys,omitempty"`
	MapType         string            `json:"x-kubernetes-map-type,omitempty"`
	PreserveUnknown *bool             `json:"x-kubernetes-preserve-unknown-fields,omitempty"`
	IntOrString     bool              `json:"x-kubernetes-int-or-string,omitempty"`
	Embedded        bool              `json:"x-kubernetes-embedded-resource,omitempty"`
	Validations     []json.RawMessage `json:"x-kubernetes-validations,omitempty"`
	GVKs            []GVK             `json:"x-kubernetes-group-version-kind,omitempty"`
}

// GVK is an entry of x-kubernetes-group-version-kind.
type GVK struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

// additional returns the schema of additionalProperties, nil when absent
// or a boolean.
func (s *Schema) additional() *Schema {
	raw := bytes.TrimSpace(s.AdditionalProperties)
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	var out Schema
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil
	}
	return &out
}

// DocumentName is the file a group-version's document is kept in (as
// upstream Kubernetes names them in api/openapi-spec/v3).
func DocumentName(groupVersion string) string {
	return "apis__" + strings.ReplaceAll(groupVersion, "/", "__") + "_openapi.json"
}

// LoadRelease reads served.json and the document of every group-version
// it lists.
func LoadRelease(dir string) (*Release, error) {
	r := &Release{Name: filepath.Base(dir), Docs: map[string]*Document{}}
	data, err := os.ReadFile(filepath.Join(dir, servedFile))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, &r.Served); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, servedFile), err)
	}
	for gv := range r.Served {
		path := filepath.Join(dir, DocumentName(gv))
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s is served but: %w", gv, err)
		}
		var doc Document
		if err := json.Unmarshal(data, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		r.Docs[gv] = &doc
	}
	return r, nil
}

var releaseName = regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)$`)

// ParseRelease returns the major, minor and patch of "vX.Y.Z".
func ParseRelease(name string) (major, minor, patch int, ok bool) {
	m := releaseName.FindStringSubmatch(name)
	if m == nil {
		return 0, 0, 0, false
	}
	major, _ = strconv.Atoi(m[1])
	minor, _ = strconv.Atoi(m[2])
	patch, _ = strconv.Atoi(m[3])
	return major, minor, patch, true
}

// parseMajorMinor parses a lifecycle release "X.Y".
func parseMajorMinor(s string) (major, minor int, ok bool) {
	a, b, found := strings.Cut(s, ".")
	if !found {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(a)
	minor, err2 := strconv.Atoi(b)
	return major, minor, err1 == nil && err2 == nil
}
