// Command models-schema prints the generated OpenAPI definitions as one
// OpenAPI v2 document. applyconfiguration-gen embeds it so that apply
// configurations can extract managed fields.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/draplane/draplane/generated/openapi"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	ref := func(name string) spec.Ref {
		return spec.MustCreateRef("#/definitions/" + modelName(name))
	}
	defs := openapi.GetOpenAPIDefinitions(ref)
	schemas := make(map[string]spec.Schema, len(defs))
	for name, def := range defs {
		s := def.Schema
		// Some definitions carry a separate v2 rendering; the document we
		// print is v2, so prefer it.
		if v2, ok := s.Extensions[common.ExtensionV2Schema]; ok {
			if v2Schema, ok := v2.(spec.Schema); ok {
				s = v2Schema
			}
		}
		schemas[modelName(name)] = s
	}
	doc := spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger:     "2.0",
		Definitions: schemas,
		Info:        &spec.Info{InfoProps: spec.InfoProps{Title: "draplane models", Version: "unversioned"}},
	}}
	out, err := json.MarshalIndent(&doc, "", "  ")
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(append(out, '\n'))
	return err
}

// modelName turns a Go package path name ("k8s.io/api/core/v1.Pod") into
// the dotted, domain-reversed form ("io.k8s.api.core.v1.Pod"). Names that
// already are model names (no slash) are kept.
func modelName(name string) string {
	parts := strings.Split(name, "/")
	if len(parts) == 1 {
		return name
	}
	domain := strings.Split(parts[0], ".")
	for i, j := 0, len(domain)-1; i < j; i, j = i+1, j-1 {
		domain[i], domain[j] = domain[j], domain[i]
	}
	parts[0] = strings.Join(domain, ".")
	return strings.Join(parts, ".")
}
