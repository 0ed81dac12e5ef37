package validation

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

const (
	testDriver = "gpu.example.com"
	testPool   = "node-1"
	testUID    = "0b7a2a0e-7d5a-4c8f-9f59-4d4e4f1e2a3b"
	otherUID   = "1c8b3b1f-8e6b-4d90-8a6a-5e5f5a2f3b4c"
)

func exactRequest(name string) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{
		Name: name,
		Exactly: &resourceapi.ExactDeviceRequest{
			DeviceClassName: "gpu.example.com",
			AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
			Count:           1,
		},
	}
}

func subRequest(name string) resourceapi.DeviceSubRequest {
	return resourceapi.DeviceSubRequest{
		Name:            name,
		DeviceClassName: "gpu.example.com",
		AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
		Count:           1,
	}
}

func firstAvailableRequest(name string, subs ...string) resourceapi.DeviceRequest {
	request := resourceapi.DeviceRequest{Name: name}
	for _, sub := range subs {
		request.FirstAvailable = append(request.FirstAvailable, subRequest(sub))
	}
	return request
}

func requests(n int) []resourceapi.DeviceRequest {
	out := make([]resourceapi.DeviceRequest, n)
	for i := range out {
		out[i] = exactRequest(fmt.Sprintf("req-%d", i))
	}
	return out
}

func tolerations(n int) []resourceapi.DeviceToleration {
	out := make([]resourceapi.DeviceToleration, n)
	for i := range out {
		out[i] = resourceapi.DeviceToleration{Key: "example.com/t", Operator: resourceapi.DeviceTolerationOpExists}
	}
	return out
}

// validClaim has an exact request "gpu" and a firstAvailable request
// "nic" with subrequests "fast" and "slow", a constraint and a config.
func validClaim() *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim", Namespace: "default"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{exactRequest("gpu"), firstAvailableRequest("nic", "fast", "slow")},
			Constraints: []resourceapi.DeviceConstraint{{
				Requests:       []string{"gpu", "nic/fast"},
				MatchAttribute: ptr.To[resourceapi.FullyQualifiedName]("example.com/numa"),
			}},
			Config: []resourceapi.DeviceClaimConfiguration{{
				Requests:            []string{"gpu"},
				DeviceConfiguration: opaqueConfig(testDriver, `{"a":1}`),
			}},
		}},
	}
}

func TestValidateResourceClaim(t *testing.T) {
	exactly := func(c *resourceapi.ResourceClaim) *resourceapi.ExactDeviceRequest {
		return c.Spec.Devices.Requests[0].Exactly
	}
	const req0 = "spec.devices.requests[0]"
	const sub0 = "spec.devices.requests[1].firstAvailable[0]"

	tests := map[string]struct {
		mutate func(*resourceapi.ResourceClaim)
		want   []string
	}{
		"valid":                              {mutate: func(*resourceapi.ResourceClaim) {}},
		"no requests":                        {mutate: func(c *resourceapi.ResourceClaim) { c.Spec.Devices = resourceapi.DeviceClaim{} }},
		"missing namespace":                  {mutate: func(c *resourceapi.ResourceClaim) { c.Namespace = "" }, want: []string{required("metadata.namespace")}},
		"bad name":                           {mutate: func(c *resourceapi.ResourceClaim) { c.Name = "claim_1" }, want: []string{invalid("metadata.name")}},
		"32 requests":                        {mutate: func(c *resourceapi.ResourceClaim) { c.Spec.Devices = resourceapi.DeviceClaim{Requests: requests(32)} }},
		"33 requests":                        {mutate: func(c *resourceapi.ResourceClaim) { c.Spec.Devices = resourceapi.DeviceClaim{Requests: requests(33)} }, want: []string{tooMany("spec.devices.requests")}},
		"duplicate request":                  {mutate: func(c *resourceapi.ResourceClaim) { c.Spec.Devices.Requests[1] = exactRequest("gpu") }, want: []string{duplicate("spec.devices.requests[1]"), invalid("spec.devices.constraints[0].requests[1]")}},
		"missing request name":               {mutate: func(c *resourceapi.ResourceClaim) { c.Spec.Devices.Requests[0].Name = "" }, want: []string{required(req0 + ".name"), invalid("spec.devices.constraints[0].requests[0]"), invalid("spec.devices.config[0].requests[0]")}},
		"bad request name":                   {mutate: func(c *resourceapi.ResourceClaim) { c.Spec.Devices.Requests[0].Name = "GPU" }, want: []string{invalid(req0 + ".name"), invalid("spec.devices.constraints[0].requests[0]"), invalid("spec.devices.config[0].requests[0]")}},
		"neither exactly nor firstAvailable": {mutate: func(c *resourceapi.ResourceClaim) { c.Spec.Devices.Requests[0].Exactly = nil }, want: []string{required(req0)}},
		"empty firstAvailable": {mutate: func(c *resourceapi.ResourceClaim) {
			c.Spec.Devices.Requests[1].FirstAvailable = []resourceapi.DeviceSubRequest{}
		}, want: []string{required("spec.devices.requests[1]"), invalid("spec.devices.constraints[0].requests[1]")}},
		"exactly and firstAvailable": {
			mutate: func(c *resourceapi.ResourceClaim) {
				c.Spec.Devices.Requests[0].FirstAvailable = []resourceapi.DeviceSubRequest{subRequest("a")}
			},
			want: []string{invalid(req0)},
		},
		"missing class": {mutate: func(c *resourceapi.ResourceClaim) { exactly(c).DeviceClassName = "" }, want: []string{required(req0 + ".exactly.deviceClassName")}},
		"bad class":     {mutate: func(c *resourceapi.ResourceClaim) { exactly(c).DeviceClassName = "Gpu" }, want: []string{invalid(req0 + ".exactly.deviceClassName")}},
		"32 selectors":  {mutate: func(c *resourceapi.ResourceClaim) { exactly(c).Selectors = selectors(32) }},
		"33 selectors":  {mutate: func(c *resourceapi.ResourceClaim) { exactly(c).Selectors = selectors(33) }, want: []string{tooMany(req0 + ".exactly.selectors")}},
		"bad selector": {mutate: func(c *resourceapi.ResourceClaim) {
			exactly(c).Selectors = []resourceapi.DeviceSelector{celSelector("device.nope")}
		}, want: []string{invalid(req0 + ".exactly.selectors[0].cel.expression")}},
		"expensive selector": {mutate: func(c *resourceapi.ResourceClaim) {
			exactly(c).Selectors = []resourceapi.DeviceSelector{celSelector(expensiveExpression)}
		}, want: []string{forbidden(req0 + ".exactly.selectors[0].cel.expression")}},
		"selector without cel": {mutate: func(c *resourceapi.ResourceClaim) { exactly(c).Selectors = []resourceapi.DeviceSelector{{}} }, want: []string{required(req0 + ".exactly.selectors[0].cel")}},
		"ExactCount 0":         {mutate: func(c *resourceapi.ResourceClaim) { exactly(c).Count = 0 }, want: []string{invalid(req0 + ".exactly.count")}},
		"ExactCount negative":  {mutate: func(c *resourceapi.ResourceClaim) { exactly(c).Count = -1 }, want: []string{invalid(req0 + ".exactly.count")}},
		"All without count": {
			mutate: func(c *resourceapi.ResourceClaim) {
				exactly(c).AllocationMode, exactly(c).Count = resourceapi.DeviceAllocationModeAll, 0
			},
		},
		"All with count":      {mutate: func(c *resourceapi.ResourceClaim) { exactly(c).AllocationMode = resourceapi.DeviceAllocationModeAll }, want: []string{invalid(req0 + ".exactly.count")}},
		"no allocation mode":  {mutate: func(c *resourceapi.ResourceClaim) { exactly(c).AllocationMode = "" }, want: []string{required(req0 + ".exactly.allocationMode")}},
		"bad allocation mode": {mutate: func(c *resourceapi.ResourceClaim) { exactly(c).AllocationMode = "Some" }, want: []string{notSupported(req0 + ".exactly.allocationMode")}},
		"admin access":        {mutate: func(c *resourceapi.ResourceClaim) { exactly(c).AdminAccess = ptr.To(true) }},
		"16 tolerations":      {mutate: func(c *resourceapi.ResourceClaim) { exactly(c).Tolerations = tolerations(16) }},
		"17 tolerations":      {mutate: func(c *resourceapi.ResourceClaim) { exactly(c).Tolerations = tolerations(17) }, want: []string{tooMany(req0 + ".exactly.tolerations")}},
		"toleration Exists with value": {
			mutate: func(c *resourceapi.ResourceClaim) {
				exactly(c).Tolerations = []resourceapi.DeviceToleration{{Key: "k", Operator: resourceapi.DeviceTolerationOpExists, Value: "v"}}
			},
			want: []string{invalid(req0 + ".exactly.tolerations[0].value")},
		},
		"toleration Exists for all keys": {
			mutate: func(c *resourceapi.ResourceClaim) {
				exactly(c).Tolerations = []resourceapi.DeviceToleration{{Operator: resourceapi.DeviceTolerationOpExists, TolerationSeconds: ptr.To[int64](30)}}
			},
		},
		"toleration Equal": {
			mutate: func(c *resourceapi.ResourceClaim) {
				exactly(c).Tolerations = []resourceapi.DeviceToleration{{Key: "k", Operator: resourceapi.DeviceTolerationOpEqual, Value: "v", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
			},
		},
		"toleration Equal bad value": {
			mutate: func(c *resourceapi.ResourceClaim) {
				exactly(c).Tolerations = []resourceapi.DeviceToleration{{Key: "k", Operator: resourceapi.DeviceTolerationOpEqual, Value: "a b"}}
			},
			want: []string{invalid(req0 + ".exactly.tolerations[0].value")},
		},
		"toleration bad key": {
			mutate: func(c *resourceapi.ResourceClaim) {
				exactly(c).Tolerations = []resourceapi.DeviceToleration{{Key: "-k", Operator: resourceapi.DeviceTolerationOpExists}}
			},
			want: []string{invalid(req0 + ".exactly.tolerations[0].key")},
		},
		"toleration missing operator": {
			mutate: func(c *resourceapi.ResourceClaim) {
				exactly(c).Tolerations = []resourceapi.DeviceToleration{{Key: "k"}}
			},
			want: []string{required(req0 + ".exactly.tolerations[0].operator")},
		},
		"toleration bad operator": {
			mutate: func(c *resourceapi.ResourceClaim) {
				exactly(c).Tolerations = []resourceapi.DeviceToleration{{Key: "k", Operator: "Gt"}}
			},
			want: []string{notSupported(req0 + ".exactly.tolerations[0].operator")},
		},
		"toleration bad effect": {
			mutate: func(c *resourceapi.ResourceClaim) {
				exactly(c).Tolerations = []resourceapi.DeviceToleration{{Key: "k", Operator: resourceapi.DeviceTolerationOpExists, Effect: "Evict"}}
			},
			want: []string{notSupported(req0 + ".exactly.tolerations[0].effect")},
		},
		"capacity request": {
			mutate: func(c *resourceapi.ResourceClaim) {
				exactly(c).Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
					"memory": resource.MustParse("1Gi"), "example.com/bandwidth": resource.MustParse("10G"),
				}}
			},
		},
		"capacity request bad name": {
			mutate: func(c *resourceapi.ResourceClaim) {
				exactly(c).Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"a/b/c": resource.MustParse("1")}}
			},
			want: []string{invalid(req0 + ".exactly.capacity.requests[a/b/c]")},
		},
		"capacity request negative": {
			mutate: func(c *resourceapi.ResourceClaim) {
				exactly(c).Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("-1")}}
			},
			want: []string{invalid(req0 + ".exactly.capacity.requests[memory]")},
		},
		"8 subrequests": {
			mutate: func(c *resourceapi.ResourceClaim) {
				c.Spec.Devices.Requests[1] = firstAvailableRequest("nic", "fast", "slow", "a", "b", "c", "d", "e", "f")
			},
		},
		"9 subrequests": {
			mutate: func(c *resourceapi.ResourceClaim) {
				c.Spec.Devices.Requests[1] = firstAvailableRequest("nic", "fast", "slow", "a", "b", "c", "d", "e", "f", "g")
			},
			want: []string{tooMany("spec.devices.requests[1].firstAvailable")},
		},
		"duplicate subrequest": {
			mutate: func(c *resourceapi.ResourceClaim) {
				c.Spec.Devices.Requests[1] = firstAvailableRequest("nic", "fast", "fast")
			},
			want: []string{duplicate("spec.devices.requests[1].firstAvailable[1]")},
		},
		"bad subrequest name": {
			mutate: func(c *resourceapi.ResourceClaim) { c.Spec.Devices.Requests[1].FirstAvailable[1].Name = "a/b" },
			want:   []string{invalid("spec.devices.requests[1].firstAvailable[1].name")},
		},
		"subrequest without class": {
			mutate: func(c *resourceapi.ResourceClaim) { c.Spec.Devices.Requests[1].FirstAvailable[0].DeviceClassName = "" },
			want:   []string{required(sub0 + ".deviceClassName")},
		},
		"subrequest count": {
			mutate: func(c *resourceapi.ResourceClaim) { c.Spec.Devices.Requests[1].FirstAvailable[0].Count = 0 },
			want:   []string{invalid(sub0 + ".count")},
		},
		"subrequest bad selector": {
			mutate: func(c *resourceapi.ResourceClaim) {
				c.Spec.Devices.Requests[1].FirstAvailable[0].Selectors = []resourceapi.DeviceSelector{celSelector(`device.driver + 1`)}
			},
			want: []string{invalid(sub0 + ".selectors[0].cel.expression")},
		},
		"subrequest toleration": {
			mutate: func(c *resourceapi.ResourceClaim) {
				c.Spec.Devices.Requests[1].FirstAvailable[0].Tolerations = []resourceapi.DeviceToleration{{Operator: "Nope"}}
			},
			want: []string{notSupported(sub0 + ".tolerations[0].operator")},
		},
		"32 constraints": {
			mutate: func(c *resourceapi.ResourceClaim) {
				for range 31 {
					c.Spec.Devices.Constraints = append(c.Spec.Devices.Constraints, c.Spec.Devices.Constraints[0])
				}
			},
		},
		"33 constraints": {
			mutate: func(c *resourceapi.ResourceClaim) {
				for range 32 {
					c.Spec.Devices.Constraints = append(c.Spec.Devices.Constraints, c.Spec.Devices.Constraints[0])
				}
			},
			want: []string{tooMany("spec.devices.constraints")},
		},
		"constraint for all requests": {mutate: func(c *resourceapi.ResourceClaim) { c.Spec.Devices.Constraints[0].Requests = nil }},
		"constraint unknown request": {
			mutate: func(c *resourceapi.ResourceClaim) { c.Spec.Devices.Constraints[0].Requests = []string{"tpu"} },
			want:   []string{invalid("spec.devices.constraints[0].requests[0]")},
		},
		"constraint names whole firstAvailable request": {
			mutate: func(c *resourceapi.ResourceClaim) { c.Spec.Devices.Constraints[0].Requests = []string{"nic"} },
		},
		"constraint unknown subrequest": {
			mutate: func(c *resourceapi.ResourceClaim) { c.Spec.Devices.Constraints[0].Requests = []string{"nic/medium"} },
			want:   []string{invalid("spec.devices.constraints[0].requests[0]")},
		},
		"constraint subrequest of exact request": {
			mutate: func(c *resourceapi.ResourceClaim) { c.Spec.Devices.Constraints[0].Requests = []string{"gpu/fast"} },
			want:   []string{invalid("spec.devices.constraints[0].requests[0]")},
		},
		"constraint three segments": {
			mutate: func(c *resourceapi.ResourceClaim) { c.Spec.Devices.Constraints[0].Requests = []string{"nic/fast/x"} },
			want:   []string{invalid("spec.devices.constraints[0].requests[0]")},
		},
		"constraint duplicate request": {
			mutate: func(c *resourceapi.ResourceClaim) { c.Spec.Devices.Constraints[0].Requests = []string{"gpu", "gpu"} },
			want:   []string{duplicate("spec.devices.constraints[0].requests[1]")},
		},
		"distinctAttribute": {
			mutate: func(c *resourceapi.ResourceClaim) {
				c.Spec.Devices.Constraints[0].MatchAttribute = nil
				c.Spec.Devices.Constraints[0].DistinctAttribute = ptr.To[resourceapi.FullyQualifiedName]("example.com/slot")
			},
		},
		"match and distinct": {
			mutate: func(c *resourceapi.ResourceClaim) {
				c.Spec.Devices.Constraints[0].DistinctAttribute = ptr.To[resourceapi.FullyQualifiedName]("example.com/slot")
			},
			want: []string{invalid("spec.devices.constraints[0]")},
		},
		"neither match nor distinct": {
			mutate: func(c *resourceapi.ResourceClaim) { c.Spec.Devices.Constraints[0].MatchAttribute = nil },
			want:   []string{required("spec.devices.constraints[0]")},
		},
		"matchAttribute without domain": {
			mutate: func(c *resourceapi.ResourceClaim) {
				c.Spec.Devices.Constraints[0].MatchAttribute = ptr.To[resourceapi.FullyQualifiedName]("numa")
			},
			want: []string{invalid("spec.devices.constraints[0].matchAttribute")},
		},
		"matchAttribute bad identifier": {
			mutate: func(c *resourceapi.ResourceClaim) {
				c.Spec.Devices.Constraints[0].MatchAttribute = ptr.To[resourceapi.FullyQualifiedName]("example.com/numa-node")
			},
			want: []string{invalid("spec.devices.constraints[0].matchAttribute")},
		},
		"distinctAttribute identifier too long": {
			mutate: func(c *resourceapi.ResourceClaim) {
				c.Spec.Devices.Constraints[0].MatchAttribute = nil
				c.Spec.Devices.Constraints[0].DistinctAttribute = ptr.To(resourceapi.FullyQualifiedName("example.com/" + strings.Repeat("a", 33)))
			},
			want: []string{tooLong("spec.devices.constraints[0].distinctAttribute")},
		},
		"33 configs": {
			mutate: func(c *resourceapi.ResourceClaim) {
				c.Spec.Devices.Config = make([]resourceapi.DeviceClaimConfiguration, 33)
			},
			want: []string{tooMany("spec.devices.config")},
		},
		"config for subrequest": {
			mutate: func(c *resourceapi.ResourceClaim) { c.Spec.Devices.Config[0].Requests = []string{"nic/slow"} },
		},
		"config unknown request": {
			mutate: func(c *resourceapi.ResourceClaim) { c.Spec.Devices.Config[0].Requests = []string{"gpu", "tpu"} },
			want:   []string{invalid("spec.devices.config[0].requests[1]")},
		},
		"config without opaque": {
			mutate: func(c *resourceapi.ResourceClaim) { c.Spec.Devices.Config[0].Opaque = nil },
			want:   []string{required("spec.devices.config[0].opaque")},
		},
		"config parameters too large": {
			mutate: func(c *resourceapi.ResourceClaim) {
				c.Spec.Devices.Config[0].Opaque.Parameters = rawJSON(`{"a":"` + strings.Repeat("x", resourceapi.OpaqueParametersMaxLength) + `"}`)
			},
			want: []string{tooLong("spec.devices.config[0].opaque.parameters")},
		},
		"config parameters not an object": {
			mutate: func(c *resourceapi.ResourceClaim) { c.Spec.Devices.Config[0].Opaque.Parameters = rawJSON(`"text"`) },
			want:   []string{invalid("spec.devices.config[0].opaque.parameters")},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			claim := validClaim()
			tc.mutate(claim)
			assertErrors(t, ValidateResourceClaim(claim), tc.want)
		})
	}
}

// A v1beta1 request that mixes the flat fields with firstAvailable must be
// told why in terms a v1beta1 user recognises.
func TestMixedRequestMessage(t *testing.T) {
	claim := validClaim()
	claim.Spec.Devices.Requests[0].FirstAvailable = []resourceapi.DeviceSubRequest{subRequest("a")}
	detail := errorDetail(ValidateResourceClaim(claim), "spec.devices.requests[0]")
	for _, want := range []string{"exactly", "firstAvailable", "v1beta1", "mutually exclusive"} {
		if !strings.Contains(detail, want) {
			t.Errorf("message %q does not mention %q", detail, want)
		}
	}
}

func TestCELErrorMessages(t *testing.T) {
	claim := validClaim()
	claim.Spec.Devices.Requests[0].Exactly.Selectors = []resourceapi.DeviceSelector{celSelector(expensiveExpression), celSelector("device.driver")}
	errs := ValidateResourceClaim(claim)
	path := "spec.devices.requests[0].exactly.selectors[%d].cel.expression"
	if detail := errorDetail(errs, fmt.Sprintf(path, 0)); !strings.Contains(detail, "1000000") {
		t.Errorf("cost error %q does not name the limit", detail)
	}
	if detail := errorDetail(errs, fmt.Sprintf(path, 1)); !strings.Contains(detail, "must evaluate to bool") {
		t.Errorf("type error %q does not say what is wrong", detail)
	}
}

func TestValidateResourceClaimUpdate(t *testing.T) {
	tests := map[string]struct {
		mutate func(*resourceapi.ResourceClaim)
		want   []string
	}{
		"labels change":  {mutate: func(c *resourceapi.ResourceClaim) { c.Labels = map[string]string{"a": "b"} }},
		"finalizer":      {mutate: func(c *resourceapi.ResourceClaim) { c.Finalizers = []string{resourceapi.Finalizer} }},
		"spec change":    {mutate: func(c *resourceapi.ResourceClaim) { c.Spec.Devices.Requests[0].Exactly.Count = 2 }, want: []string{invalid("spec")}},
		"spec emptied":   {mutate: func(c *resourceapi.ResourceClaim) { c.Spec = resourceapi.ResourceClaimSpec{} }, want: []string{invalid("spec")}},
		"namespace move": {mutate: func(c *resourceapi.ResourceClaim) { c.Namespace = "other" }, want: []string{invalid("metadata.namespace")}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			old := validClaim()
			old.ResourceVersion = "1"
			claim := old.DeepCopy()
			tc.mutate(claim)
			assertErrors(t, ValidateResourceClaimUpdate(claim, old), tc.want)
		})
	}
}

func allocationResult(request, device string) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{Request: request, Driver: testDriver, Pool: testPool, Device: device}
}

func validAllocation() *resourceapi.AllocationResult {
	return &resourceapi.AllocationResult{
		Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{allocationResult("gpu", "gpu-0"), allocationResult("nic/fast", "nic-0")},
			Config: []resourceapi.DeviceAllocationConfiguration{{
				Source:              resourceapi.AllocationConfigSourceClaim,
				Requests:            []string{"gpu"},
				DeviceConfiguration: opaqueConfig(testDriver, `{}`),
			}},
		},
		NodeSelector: nodeSelector(1),
	}
}

func consumer(name, uid string) resourceapi.ResourceClaimConsumerReference {
	return resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: name, UID: types.UID(uid)}
}

func consumers(n int) []resourceapi.ResourceClaimConsumerReference {
	out := make([]resourceapi.ResourceClaimConsumerReference, n)
	for i := range out {
		out[i] = consumer(fmt.Sprintf("pod-%d", i), fmt.Sprintf("00000000-0000-0000-0000-%012d", i))
	}
	return out
}

func deviceStatus(device string) resourceapi.AllocatedDeviceStatus {
	return resourceapi.AllocatedDeviceStatus{Driver: testDriver, Pool: testPool, Device: device}
}

func allocatedClaim() *resourceapi.ResourceClaim {
	claim := validClaim()
	claim.ResourceVersion = "1"
	claim.Status.Allocation = validAllocation()
	claim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{consumer("pod-a", testUID)}
	return claim
}

func TestValidateResourceClaimStatusUpdate(t *testing.T) {
	unallocated := func() *resourceapi.ResourceClaim {
		claim := validClaim()
		claim.ResourceVersion = "1"
		return claim
	}
	deleting := func() *resourceapi.ResourceClaim {
		claim := allocatedClaim()
		claim.DeletionTimestamp = ptr.To(metav1.Now())
		claim.DeletionGracePeriodSeconds = ptr.To[int64](0)
		return claim
	}
	results := func(c *resourceapi.ResourceClaim) []resourceapi.DeviceRequestAllocationResult {
		return c.Status.Allocation.Devices.Results
	}
	const result0 = "status.allocation.devices.results[0]"

	tests := map[string]struct {
		old    *resourceapi.ResourceClaim
		mutate func(*resourceapi.ResourceClaim)
		want   []string
	}{
		"allocate": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) { c.Status.Allocation = validAllocation() }},
		"allocate and reserve": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation = validAllocation()
			c.Status.ReservedFor = consumers(2)
		}},
		"reserve without allocation": {
			old:    unallocated(),
			mutate: func(c *resourceapi.ResourceClaim) { c.Status.ReservedFor = consumers(1) },
			want:   []string{forbidden("status.reservedFor")},
		},
		"change allocation": {
			old:    allocatedClaim(),
			mutate: func(c *resourceapi.ResourceClaim) { results(c)[0].Device = "gpu-1" },
			want:   []string{invalid("status.allocation")},
		},
		"unreserve":           {old: allocatedClaim(), mutate: func(c *resourceapi.ResourceClaim) { c.Status.ReservedFor = nil }},
		"deallocate":          {old: allocatedClaim(), mutate: func(c *resourceapi.ResourceClaim) { c.Status = resourceapi.ResourceClaimStatus{} }},
		"deallocate reserved": {old: allocatedClaim(), mutate: func(c *resourceapi.ResourceClaim) { c.Status.Allocation = nil }, want: []string{forbidden("status.reservedFor")}},
		"256 consumers":       {old: allocatedClaim(), mutate: func(c *resourceapi.ResourceClaim) { c.Status.ReservedFor = consumers(256) }},
		"257 consumers":       {old: allocatedClaim(), mutate: func(c *resourceapi.ResourceClaim) { c.Status.ReservedFor = consumers(257) }, want: []string{tooMany("status.reservedFor")}},
		"duplicate consumer uid": {
			old: allocatedClaim(),
			mutate: func(c *resourceapi.ResourceClaim) {
				c.Status.ReservedFor = append(c.Status.ReservedFor, consumer("pod-b", testUID))
			},
			want: []string{duplicate("status.reservedFor[1]")},
		},
		"incomplete consumer": {
			old: allocatedClaim(),
			mutate: func(c *resourceapi.ResourceClaim) {
				c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{APIGroup: "example.com"}}
			},
			want: []string{required("status.reservedFor[0].resource"), required("status.reservedFor[0].name"), required("status.reservedFor[0].uid")},
		},
		"deleting: remove consumer": {old: deleting(), mutate: func(c *resourceapi.ResourceClaim) { c.Status.ReservedFor = nil }},
		"deleting: add consumer": {
			old: deleting(),
			mutate: func(c *resourceapi.ResourceClaim) {
				c.Status.ReservedFor = append(c.Status.ReservedFor, consumer("pod-b", otherUID))
			},
			want: []string{forbidden("status.reservedFor[1]")},
		},
		"deleting: replace consumer": {
			old: deleting(),
			mutate: func(c *resourceapi.ResourceClaim) {
				c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{consumer("pod-b", otherUID)}
			},
			want: []string{forbidden("status.reservedFor[0]")},
		},
		"32 results": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation = validAllocation()
			for i := len(results(c)); i < 32; i++ {
				c.Status.Allocation.Devices.Results = append(results(c), allocationResult("gpu", fmt.Sprintf("gpu-%d", i)))
			}
		}},
		"33 results": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation = validAllocation()
			for i := len(results(c)); i < 33; i++ {
				c.Status.Allocation.Devices.Results = append(results(c), allocationResult("gpu", fmt.Sprintf("gpu-%d", i)))
			}
		}, want: []string{tooMany("status.allocation.devices.results")}},
		"result for unknown request": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation = validAllocation()
			results(c)[0].Request = "tpu"
		}, want: []string{invalid(result0 + ".request")}},
		"result for request instead of subrequest is fine": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation = validAllocation()
			results(c)[1].Request = "nic"
		}},
		"result bad driver, pool, device": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation = validAllocation()
			results(c)[0].Driver, results(c)[0].Pool, results(c)[0].Device = "", "a/-b", "Gpu"
		}, want: []string{required(result0 + ".driver"), invalid(result0 + ".pool"), invalid(result0 + ".device")}},
		"result share ID": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation = validAllocation()
			results(c)[0].ShareID = ptr.To(types.UID(testUID))
			results(c)[0].ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("1Gi")}
		}},
		"result bad share ID": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation = validAllocation()
			results(c)[0].ShareID = ptr.To(types.UID(strings.ToUpper(testUID)))
		}, want: []string{invalid(result0 + ".shareID")}},
		"result bad consumed capacity": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation = validAllocation()
			results(c)[0].ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{"mem-ory": resource.MustParse("1")}
		}, want: []string{invalid(result0 + ".consumedCapacity[mem-ory]")}},
		"result tolerations": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation = validAllocation()
			results(c)[0].Tolerations = tolerations(17)
		}, want: []string{tooMany(result0 + ".tolerations")}},
		"binding conditions": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation = validAllocation()
			results(c)[0].BindingConditions = []string{"Attached", "Ready", "example.com/Healthy", "Four"}
			results(c)[0].BindingFailureConditions = []string{"Failed"}
		}},
		"5 binding conditions": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation = validAllocation()
			results(c)[0].BindingConditions = []string{"A", "B", "C", "D", "E"}
			results(c)[0].BindingFailureConditions = []string{"Failed"}
		}, want: []string{tooMany(result0 + ".bindingConditions")}},
		"binding conditions without failure conditions": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation = validAllocation()
			results(c)[0].BindingConditions = []string{"Attached"}
		}, want: []string{required(result0 + ".bindingFailureConditions")}},
		"failure conditions without binding conditions": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation = validAllocation()
			results(c)[0].BindingFailureConditions = []string{"Failed"}
		}, want: []string{required(result0 + ".bindingConditions")}},
		"overlapping binding conditions": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation = validAllocation()
			results(c)[0].BindingConditions = []string{"A", "A"}
			results(c)[0].BindingFailureConditions = []string{"B", "A", "bad condition"}
		}, want: []string{duplicate(result0 + ".bindingConditions[1]"), invalid(result0 + ".bindingFailureConditions[1]"), invalid(result0 + ".bindingFailureConditions[2]")}},
		"allocation config source missing": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation = validAllocation()
			c.Status.Allocation.Devices.Config[0].Source = ""
		}, want: []string{required("status.allocation.devices.config[0].source")}},
		"allocation config source unknown": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation = validAllocation()
			c.Status.Allocation.Devices.Config[0].Source = "FromNode"
			c.Status.Allocation.Devices.Config[0].Requests = []string{"x"}
		}, want: []string{notSupported("status.allocation.devices.config[0].source"), invalid("status.allocation.devices.config[0].requests[0]")}},
		"allocation config 64 entries": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation = validAllocation()
			for range 63 {
				c.Status.Allocation.Devices.Config = append(c.Status.Allocation.Devices.Config, c.Status.Allocation.Devices.Config[0])
			}
		}},
		"allocation config 65 entries": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation = validAllocation()
			for range 64 {
				c.Status.Allocation.Devices.Config = append(c.Status.Allocation.Devices.Config, c.Status.Allocation.Devices.Config[0])
			}
		}, want: []string{tooMany("status.allocation.devices.config")}},
		"allocation node selector without terms": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation = validAllocation()
			c.Status.Allocation.NodeSelector = &corev1.NodeSelector{}
		}, want: []string{required("status.allocation.nodeSelector.nodeSelectorTerms")}},
		"allocation node selector bad requirement": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation = validAllocation()
			c.Status.Allocation.NodeSelector.NodeSelectorTerms[0].MatchExpressions[0].Operator = "Near"
			c.Status.Allocation.NodeSelector.NodeSelectorTerms[0].MatchFields = []corev1.NodeSelectorRequirement{{Key: "spec.nodeName", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}
		}, want: []string{
			invalid("status.allocation.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].operator"),
			invalid("status.allocation.nodeSelector.nodeSelectorTerms[0].matchFields[0].key"),
		}},
		"allocation node selector by name": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation = validAllocation()
			c.Status.Allocation.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-1"}}},
			}}}
		}},

		"device status": {old: allocatedClaim(), mutate: func(c *resourceapi.ResourceClaim) {
			status := deviceStatus("gpu-0")
			status.Conditions = conditions(8)
			status.Data = &runtime.RawExtension{Raw: []byte(`{"temperature":40}`)}
			status.NetworkData = &resourceapi.NetworkDeviceData{InterfaceName: "eth1", IPs: []string{"10.0.0.1/24", "fd00::1/64"}, HardwareAddress: "ea:9f:cb:40:b1:7b"}
			c.Status.Devices = []resourceapi.AllocatedDeviceStatus{status, deviceStatus("nic-0")}
		}},
		"device status with allocation in same update": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation = validAllocation()
			c.Status.Devices = []resourceapi.AllocatedDeviceStatus{deviceStatus("gpu-0")}
		}},
		"device status for unallocated device": {old: allocatedClaim(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Devices = []resourceapi.AllocatedDeviceStatus{deviceStatus("gpu-0"), deviceStatus("gpu-7")}
		}, want: []string{invalid("status.devices[1]")}},
		"device status without allocation": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Devices = []resourceapi.AllocatedDeviceStatus{deviceStatus("gpu-0")}
		}, want: []string{invalid("status.devices[0]")}},
		"device status share ID must match": {old: allocatedClaim(), mutate: func(c *resourceapi.ResourceClaim) {
			status := deviceStatus("gpu-0")
			status.ShareID = ptr.To(testUID)
			c.Status.Devices = []resourceapi.AllocatedDeviceStatus{status}
		}, want: []string{invalid("status.devices[0]")}},
		"device status for shared allocation": {old: unallocated(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Allocation = validAllocation()
			results(c)[0].ShareID = ptr.To(types.UID(testUID))
			status := deviceStatus("gpu-0")
			status.ShareID = ptr.To(testUID)
			c.Status.Devices = []resourceapi.AllocatedDeviceStatus{status}
		}},
		"duplicate device status": {old: allocatedClaim(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Devices = []resourceapi.AllocatedDeviceStatus{deviceStatus("gpu-0"), deviceStatus("gpu-0")}
		}, want: []string{duplicate("status.devices[1]")}},
		"device status bad names": {old: allocatedClaim(), mutate: func(c *resourceapi.ResourceClaim) {
			c.Status.Devices = []resourceapi.AllocatedDeviceStatus{{Driver: "x_y", Pool: "", Device: "a.b"}}
		}, want: []string{invalid("status.devices[0].driver"), required("status.devices[0].pool"), invalid("status.devices[0].device"), invalid("status.devices[0]")}},
		"device status 9 conditions": {old: allocatedClaim(), mutate: func(c *resourceapi.ResourceClaim) {
			status := deviceStatus("gpu-0")
			status.Conditions = conditions(9)
			c.Status.Devices = []resourceapi.AllocatedDeviceStatus{status}
		}, want: []string{tooMany("status.devices[0].conditions")}},
		"device status invalid condition": {old: allocatedClaim(), mutate: func(c *resourceapi.ResourceClaim) {
			status := deviceStatus("gpu-0")
			status.Conditions = []metav1.Condition{condition("Ready")}
			status.Conditions[0].LastTransitionTime = metav1.Time{}
			c.Status.Devices = []resourceapi.AllocatedDeviceStatus{status}
		}, want: []string{required("status.devices[0].conditions[0].lastTransitionTime")}},
		"device status data not an object": {old: allocatedClaim(), mutate: func(c *resourceapi.ResourceClaim) {
			status := deviceStatus("gpu-0")
			status.Data = &runtime.RawExtension{Raw: []byte(`[]`)}
			c.Status.Devices = []resourceapi.AllocatedDeviceStatus{status}
		}, want: []string{invalid("status.devices[0].data")}},
		"device status data too large": {old: allocatedClaim(), mutate: func(c *resourceapi.ResourceClaim) {
			status := deviceStatus("gpu-0")
			status.Data = &runtime.RawExtension{Raw: []byte(`{"a":"` + strings.Repeat("x", 10*1024) + `"}`)}
			c.Status.Devices = []resourceapi.AllocatedDeviceStatus{status}
		}, want: []string{tooLong("status.devices[0].data")}},
		"network data limits": {old: allocatedClaim(), mutate: func(c *resourceapi.ResourceClaim) {
			status := deviceStatus("gpu-0")
			status.NetworkData = &resourceapi.NetworkDeviceData{
				InterfaceName:   strings.Repeat("i", resourceapi.NetworkDeviceDataInterfaceNameMaxLength+1),
				HardwareAddress: strings.Repeat("h", resourceapi.NetworkDeviceDataHardwareAddressMaxLength+1),
				IPs:             []string{"10.0.0.1/24", "10.0.0.1", "10.0.0.1/24"},
			}
			c.Status.Devices = []resourceapi.AllocatedDeviceStatus{status}
		}, want: []string{
			tooLong("status.devices[0].networkData.interfaceName"),
			tooLong("status.devices[0].networkData.hardwareAddress"),
			invalid("status.devices[0].networkData.ips[1]"),
			duplicate("status.devices[0].networkData.ips[2]"),
		}},
		"network data 17 IPs": {old: allocatedClaim(), mutate: func(c *resourceapi.ResourceClaim) {
			status := deviceStatus("gpu-0")
			status.NetworkData = &resourceapi.NetworkDeviceData{}
			for i := range 17 {
				status.NetworkData.IPs = append(status.NetworkData.IPs, fmt.Sprintf("10.0.0.%d/24", i))
			}
			c.Status.Devices = []resourceapi.AllocatedDeviceStatus{status}
		}, want: []string{tooMany("status.devices[0].networkData.ips")}},
		"metadata name change": {old: allocatedClaim(), mutate: func(c *resourceapi.ResourceClaim) { c.Name = "other" }, want: []string{invalid("metadata.name")}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			claim := tc.old.DeepCopy()
			tc.mutate(claim)
			assertErrors(t, ValidateResourceClaimStatusUpdate(claim, tc.old), tc.want)
		})
	}
}

func validTemplate() *resourceapi.ResourceClaimTemplate {
	return &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "template", Namespace: "default"},
		Spec: resourceapi.ResourceClaimTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "demo"}, Annotations: map[string]string{"note": "any text"}},
			Spec:       validClaim().Spec,
		},
	}
}

func TestValidateResourceClaimTemplate(t *testing.T) {
	tests := map[string]struct {
		mutate func(*resourceapi.ResourceClaimTemplate)
		want   []string
	}{
		"valid":             {mutate: func(*resourceapi.ResourceClaimTemplate) {}},
		"missing namespace": {mutate: func(t *resourceapi.ResourceClaimTemplate) { t.Namespace = "" }, want: []string{required("metadata.namespace")}},
		"bad name":          {mutate: func(t *resourceapi.ResourceClaimTemplate) { t.Name = "-t" }, want: []string{invalid("metadata.name")}},
		"bad claim label":   {mutate: func(t *resourceapi.ResourceClaimTemplate) { t.Spec.Labels = map[string]string{"a/b/c": "x"} }, want: []string{invalid("spec.metadata.labels")}},
		"bad claim annotation": {
			mutate: func(t *resourceapi.ResourceClaimTemplate) { t.Spec.Annotations = map[string]string{"-a": "x"} },
			want:   []string{invalid("spec.metadata.annotations")},
		},
		"claim name set": {
			mutate: func(t *resourceapi.ResourceClaimTemplate) {
				t.Spec.Name, t.Spec.Finalizers = "fixed", []string{"example.com/f"}
			},
			want: []string{forbidden("spec.metadata.name"), forbidden("spec.metadata.finalizers")},
		},
		"invalid claim spec": {
			mutate: func(t *resourceapi.ResourceClaimTemplate) { t.Spec.Spec.Devices.Requests[0].Exactly.Count = 0 },
			want:   []string{invalid("spec.spec.devices.requests[0].exactly.count")},
		},
		"mixed request": {
			mutate: func(t *resourceapi.ResourceClaimTemplate) {
				t.Spec.Spec.Devices.Requests[0].FirstAvailable = []resourceapi.DeviceSubRequest{subRequest("a")}
			},
			want: []string{invalid("spec.spec.devices.requests[0]")},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			template := validTemplate()
			tc.mutate(template)
			assertErrors(t, ValidateResourceClaimTemplate(template), tc.want)
		})
	}
}

func TestValidateResourceClaimTemplateUpdate(t *testing.T) {
	tests := map[string]struct {
		mutate func(*resourceapi.ResourceClaimTemplate)
		want   []string
	}{
		"labels":              {mutate: func(t *resourceapi.ResourceClaimTemplate) { t.Labels = map[string]string{"a": "b"} }},
		"claim labels change": {mutate: func(t *resourceapi.ResourceClaimTemplate) { t.Spec.Labels["app"] = "other" }, want: []string{invalid("spec")}},
		"claim spec change":   {mutate: func(t *resourceapi.ResourceClaimTemplate) { t.Spec.Spec.Devices.Config = nil }, want: []string{invalid("spec")}},
		"bad label on update": {mutate: func(t *resourceapi.ResourceClaimTemplate) { t.Labels = map[string]string{"a": "-"} }, want: []string{invalid("metadata.labels")}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			old := validTemplate()
			old.ResourceVersion = "1"
			template := old.DeepCopy()
			tc.mutate(template)
			assertErrors(t, ValidateResourceClaimTemplateUpdate(template, old), tc.want)
		})
	}
}
