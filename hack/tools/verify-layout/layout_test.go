package main

import (
	"strings"
	"testing"
)

func TestAPITier(t *testing.T) {
	if got := layers[apiTier]; len(got) != 1 || got[0] != "apis/resource/validation" {
		t.Errorf("apiTier names layer %v, want the one of apis/resource/validation", got)
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		pkg  pkg
		// wantProblem is part of the one problem expected; empty: none.
		wantProblem string
	}{
		{name: "down", pkg: pkg{Path: "internal/server", Imports: []string{"internal/controllermanager", "internal/registry/resourceslice", "internal/controllers/namespace", "apis/resource/install"}}},
		{name: "own group", pkg: pkg{Path: "internal/controllers/allocation", Imports: []string{"internal/controllers/podmode", "allocator"}}},
		{name: "shared vocabulary below internal/controllers and driver", pkg: pkg{Path: "driver/nodeagent", Imports: []string{"internal/podclaims", "internal/worker", "driver"}}},
		{name: "up: node agent imports a controller package", pkg: pkg{Path: "driver/nodeagent", Imports: []string{"internal/controllers/podmode"}}, wantProblem: "internal/controllers is above driver"},
		{name: "side by side: driver imports the allocator", pkg: pkg{Path: "driver/nodeagent", Imports: []string{"allocator"}}, wantProblem: "side by side"},
		{name: "validation uses internal/cel", pkg: pkg{Path: "apis/resource/validation", Imports: []string{"internal/cel", "apis/resource"}}},
		{name: "up: validation imports the allocator", pkg: pkg{Path: "apis/resource/validation", Imports: []string{"allocator"}}, wantProblem: "allocator is above apis/resource/validation"},
		{name: "up: types import validation", pkg: pkg{Path: "apis/resource", Imports: []string{"apis/resource/validation"}}, wantProblem: "apis/resource/validation is above apis"},
		{name: "up: internal/registry tests import internal/server", pkg: pkg{Path: "internal/registry/deviceclass", TestImports: []string{"internal/server/etcdtest"}}, wantProblem: "internal/server is above internal/registry"},
		{name: "side by side", pkg: pkg{Path: "internal/registry/resourceclaim", Imports: []string{"internal/controllermanager"}}, wantProblem: "side by side"},
		{name: "controller tests import test/", pkg: pkg{Path: "internal/controllers/allocation", TestImports: []string{"test/integration/allocation"}}, wantProblem: "only test/ may import tests"},
		{name: "tests use test helpers", pkg: pkg{Path: "internal/registry/deviceclass", TestImports: []string{"internal/testing/etcdtest"}}},
		{name: "test helper packages use test helpers", pkg: pkg{Path: "internal/registry/core/internal/coretesting", Imports: []string{"internal/testing/etcdtest"}}},
		{name: "code does not use test helpers", pkg: pkg{Path: "internal/registry/deviceclass", Imports: []string{"internal/testing/etcdtest"}}, wantProblem: "test helpers are for tests only"},
		{name: "API tests use generated code", pkg: pkg{Path: "apis/resource", TestImports: []string{"generated/clientset/versioned/fake", "apis/resource/validation"}}},
		{name: "API tests do not use the allocator", pkg: pkg{Path: "apis/resource", TestImports: []string{"allocator"}}, wantProblem: "allocator is above apis"},
		{name: "tests import anything", pkg: pkg{Path: "test/e2e", Imports: []string{"cmd/dra-apiserver/app", "internal/server"}}},
		{name: "unknown directory", pkg: pkg{Path: "util"}, wantProblem: "not in any layer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			problems := check([]pkg{tc.pkg})
			switch {
			case tc.wantProblem == "" && len(problems) > 0:
				t.Errorf("unexpected problems: %q", problems)
			case tc.wantProblem != "" && (len(problems) != 1 || !strings.Contains(problems[0], tc.wantProblem)):
				t.Errorf("problems %q, want one about %q", problems, tc.wantProblem)
			}
		})
	}
}
