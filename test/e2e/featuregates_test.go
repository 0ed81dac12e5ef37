package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// alphaSlice uses skipNodeOperations, partitionTypeAttribute and a list
// attribute; its device consumes counters of a second slice of the pool.
const alphaSlice = `
apiVersion: resource.draplane.dev/v1
kind: ResourceSlice
metadata:
  name: %s
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: %s, generation: 1, resourceSliceCount: 1}
  skipNodeOperations: ["*"]
  partitionTypeAttribute: gpu.example.com/profile
  devices:
  - name: gpu-0
    attributes:
      profile: {string: Full}
      cores: {ints: [0, 1]}
    consumesCounters:
    - counterSet: gpu-0
      counters: {memory: {value: 1Gi}}
`

const derivedClaim = `
apiVersion: resource.draplane.dev/v1
kind: ResourceClaim
metadata:
  name: %s
  namespace: default
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.example.com
        derivedAttributes:
        - {name: derived/numa, expression: '1'}
    constraints:
    - matchAttribute: derived/numa
`

// TestAlphaFieldGates drives the real binary with kubectl: with the
// default gates (alpha off) the alpha fields of a slice are dropped, with
// --feature-gates turning them on they are stored; a claim with
// derivedAttributes is stored without them while the gate is off and
// refused with a 422 naming the field while it is on. kubectl explain
// shows the fields either way.
func TestAlphaFieldGates(t *testing.T) {
	off := sharedServer(t)
	on := startServer(t, t.TempDir(), "--controllers=false",
		"--feature-gates=DRAOptionalNodeOperations=true,DRAPartitionableDevicesType=true,DRAListTypeAttributes=true,DRADerivedAttributes=true")

	for _, tc := range []struct {
		name   string
		server *testServer
		stored bool
	}{
		{"gates-off", off, false},
		{"gates-on", on, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "alpha-" + tc.name
			slice := fmt.Sprintf(alphaSlice, name, name)
			out, err := tc.server.Kubectl(t, slice, "apply", "-f", "-")
			if !tc.stored {
				// Without the list value the attribute has none: refused,
				// naming it, as upstream does.
				if err == nil || !strings.Contains(out, "spec.devices[0].attributes[cores]") {
					t.Fatalf("apply with the list attribute and its gate off: %v\n%s", err, out)
				}
				slice = strings.Replace(slice, "      cores: {ints: [0, 1]}\n", "", 1)
				tc.server.MustKubectl(t, slice, "apply", "-f", "-")
			}
			got := tc.server.MustKubectl(t, "", "get", "resourceslice", name, "-o",
				`jsonpath={.spec.skipNodeOperations}|{.spec.partitionTypeAttribute}|{.spec.devices[0].attributes.cores.ints}`)
			want := "||"
			if tc.stored {
				want = `["*"]|gpu.example.com/profile|[0,1]`
			}
			if got != want {
				t.Errorf("stored %q, want %q", got, want)
			}
			got = tc.server.MustKubectl(t, "", "get", "resourceslices.v1beta1.resource.draplane.dev", name, "-o",
				`jsonpath={.spec.skipNodeOperations}|{.spec.partitionTypeAttribute}|{.spec.devices[0].basic.attributes.cores.ints}`)
			if got != want {
				t.Errorf("read as v1beta1: %q, want %q", got, want)
			}

			out, err = tc.server.Kubectl(t, fmt.Sprintf(derivedClaim, name), "create", "-f", "-")
			if tc.stored {
				if err == nil || !strings.Contains(out, "spec.devices.requests[0].exactly.derivedAttributes") || !strings.Contains(out, "not supported yet") {
					t.Errorf("claim with derivedAttributes and its gate on: %v\n%s", err, out)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if got := tc.server.MustKubectl(t, "", "get", "resourceclaim", "-n", "default", name, "-o", "jsonpath={.spec.devices.requests[0].exactly.derivedAttributes}"); got != "" {
					t.Errorf("derivedAttributes stored with the gate off: %s", got)
				}
			}

			for field, want := range map[string]string{
				"resourceslices.spec.skipNodeOperations":                         "NodePrepareResources",
				"resourceslices.spec.devices.nodeAllocatableResources":           "overhead",
				"resourceslices.spec.devices.consumesCounters":                   "compatibilityGroups",
				"resourceslices.spec.devices.attributes":                         "versions",
				"resourceclaims.spec.devices.requests.exactly.derivedAttributes": "expression",
				"resourceclaims.status.allocation.devices.results":               "skipNodeOperations",
			} {
				if out := tc.server.MustKubectl(t, "", "explain", field); !strings.Contains(out, want) {
					t.Errorf("kubectl explain %s lacks %q:\n%s", field, want, out)
				}
			}
		})
	}
}
