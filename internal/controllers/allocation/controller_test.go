package allocation

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcefake "github.com/draplane/draplane/generated/clientset/versioned/fake"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions"
	"github.com/draplane/draplane/internal/controllers/podmode"
	"github.com/draplane/draplane/internal/testing/apitest"
)

const (
	testNamespace = "default"
	testDriver    = "gpu.example.com"
	testClass     = "gpu"
)

var claimsResource = schema.GroupVersionResource{Group: "resource.draplane.dev", Version: "v1", Resource: "resourceclaims"}

// --- object builders -------------------------------------------------

type podOption func(*corev1.Pod)

func makePod(name string, options ...podOption) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "ctr", Image: "busybox"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	for _, option := range options {
		option(pod)
	}
	return pod
}

// withGeneratedClaim: the pod claim uses a template and its claim is
// recorded in the status as "<pod>-<podclaim>".
func withGeneratedClaim(podClaim string) podOption {
	return func(pod *corev1.Pod) {
		template := "template"
		name := pod.Name + "-" + podClaim
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: podClaim, ResourceClaimTemplateName: &template})
		pod.Status.ResourceClaimStatuses = append(pod.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: podClaim, ResourceClaimName: &name})
	}
}

func withTemplateOnly(podClaim string) podOption {
	return func(pod *corev1.Pod) {
		template := "template"
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: podClaim, ResourceClaimTemplateName: &template})
	}
}

func withSharedClaim(podClaim, claimName string) podOption {
	return func(pod *corev1.Pod) {
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: podClaim, ResourceClaimName: &claimName})
	}
}

func withNodeName(node string) podOption {
	return func(pod *corev1.Pod) { pod.Spec.NodeName = node }
}

func withNodeSelector(key, value string) podOption {
	return func(pod *corev1.Pod) { pod.Spec.NodeSelector = map[string]string{key: value} }
}

func withToleration(key string) podOption {
	return func(pod *corev1.Pod) {
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists})
	}
}

type claimOption func(*resourcev1.ResourceClaim)

func makeClaim(name string, options ...claimOption) *resourcev1.ResourceClaim {
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, UID: types.UID("uid-" + name), ResourceVersion: "5"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu",
			Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: testClass,
				AllocationMode:  resourcev1.DeviceAllocationModeExactCount,
				Count:           1,
			},
		}}}},
	}
	for _, option := range options {
		option(claim)
	}
	return claim
}

// generatedClaim is the claim of withGeneratedClaim.
func generatedClaim(pod *corev1.Pod, podClaim string, options ...claimOption) *resourcev1.ResourceClaim {
	claim := makeClaim(pod.Name+"-"+podClaim, options...)
	isTrue := true
	claim.Annotations = map[string]string{resourceapi.PodClaimNameAnnotation: podClaim}
	claim.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: &isTrue}}
	return claim
}

func allocatedOn(node, device string) claimOption {
	return func(claim *resourcev1.ResourceClaim) {
		claim.Finalizers = append(claim.Finalizers, resourceapi.Finalizer)
		claim.Status.Allocation = &resourcev1.AllocationResult{
			Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
				Request: "gpu", Driver: testDriver, Pool: node, Device: device,
			}}},
			NodeSelector: nodeNameSelector(node),
		}
	}
}

// grantedAdminAccess marks the allocated devices as granted admin access.
func grantedAdminAccess() claimOption {
	return func(claim *resourcev1.ResourceClaim) {
		for i := range claim.Status.Allocation.Devices.Results {
			claim.Status.Allocation.Devices.Results[i].AdminAccess = ptr(true)
		}
	}
}

func reservedFor(pods ...*corev1.Pod) claimOption {
	return func(claim *resourcev1.ResourceClaim) {
		for _, pod := range pods {
			claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: pod.UID})
		}
	}
}

// protected: the delete protection without an allocation, as a claim
// made for a pod carries it from its creation.
func protected() claimOption {
	return func(claim *resourcev1.ResourceClaim) {
		claim.Finalizers = append(claim.Finalizers, resourceapi.Finalizer)
	}
}

func withResourceVersion(rv string) claimOption {
	return func(claim *resourcev1.ResourceClaim) { claim.ResourceVersion = rv }
}

func withSelector(expression string) claimOption {
	return func(claim *resourcev1.ResourceClaim) {
		claim.Spec.Devices.Requests[0].Exactly.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: expression}}}
	}
}

func withAdminAccess() claimOption {
	return func(claim *resourcev1.ResourceClaim) {
		claim.Spec.Devices.Requests[0].Exactly.AdminAccess = ptr(true)
	}
}

// withConfigs adds n opaque configurations to the claim.
func withConfigs(n int) claimOption {
	return func(claim *resourcev1.ResourceClaim) {
		for i := range n {
			claim.Spec.Devices.Config = append(claim.Spec.Devices.Config, resourcev1.DeviceClaimConfiguration{DeviceConfiguration: resourcev1.DeviceConfiguration{
				Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: testDriver, Parameters: runtime.RawExtension{Raw: []byte(fmt.Sprintf(`{"i":%d}`, i))}},
			}})
		}
	}
}

func makeNamespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func ptr[T any](v T) *T { return &v }

func nodeNameSelector(node string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
	}}}
}

type nodeOption func(*corev1.Node)

func makeNode(name string, options ...nodeOption) *corev1.Node {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	for _, option := range options {
		option(node)
	}
	return node
}

func notReady() nodeOption {
	return func(node *corev1.Node) { node.Status.Conditions[0].Status = corev1.ConditionFalse }
}

func withLabel(key, value string) nodeOption {
	return func(node *corev1.Node) { node.Labels[key] = value }
}

func withNodeTaint(key string) nodeOption {
	return func(node *corev1.Node) {
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
	}
}

// makeSlice publishes the node's devices gpu-0..gpu-(n-1) with a "model"
// attribute.
func makeSlice(node string, devices int, model string) *resourcev1.ResourceSlice {
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus", UID: types.UID("uid-slice-" + node), ResourceVersion: "1"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   testDriver,
			Pool:     resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1},
			NodeName: &node,
		},
	}
	for i := range devices {
		slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{
			Name:       fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"model": {StringValue: &model}},
		})
	}
	return slice
}

func makeClass() *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: testClass},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + testDriver + `"`},
		}}},
	}
}

// --- fakes that behave like the server -------------------------------

// serverLike makes the fakes check resourceVersions on claim updates and
// implement pods/binding.
func serverLike(kubeClient *kubefake.Clientset, resourceClient *resourcefake.Clientset, bindFailure error) {
	nextRV := 100
	apitest.UpdateConflicts(resourceClient, claimsResource, func() string {
		nextRV++
		return strconv.Itoa(nextRV)
	})
	kubeClient.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "binding" {
			return false, nil, nil
		}
		if bindFailure != nil {
			return true, nil, bindFailure
		}
		binding := action.(k8stesting.CreateAction).GetObject().(*corev1.Binding)
		obj, err := kubeClient.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), binding.Namespace, binding.Name)
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*corev1.Pod).DeepCopy()
		if pod.Spec.NodeName != "" {
			return true, nil, apierrors.NewConflict(corev1.Resource("pods/binding"), pod.Name, fmt.Errorf("already assigned to %s", pod.Spec.NodeName))
		}
		pod.Spec.NodeName = binding.Target.Name
		return true, nil, kubeClient.Tracker().Update(corev1.SchemeGroupVersion.WithResource("pods"), pod, pod.Namespace)
	})
}

// --- test runner -----------------------------------------------------

type testCase struct {
	nodes      []*corev1.Node
	slices     []*resourcev1.ResourceSlice
	taintRules []*resourcev1.DeviceTaintRule
	pods       []*corev1.Pod
	claims     []*resourcev1.ResourceClaim
	// keys are synced in order; default: every pod.
	keys []string
	// bindFailure makes every binding fail.
	bindFailure error
	// claimUpdateFailure makes every claim status update fail.
	claimUpdateFailure error
	// serverClaims replace claims of the same name on the server: the
	// informer lags behind.
	serverClaims []*resourcev1.ResourceClaim
	// claimPatchFailure makes every claim patch fail.
	claimPatchFailure error
	// before runs after the controller is set up.
	before func(c *testController)
	// mode of the controller; standalone when nil.
	mode podmode.Mode
	// fitNodeResources and finalizer are Options.FitNodeResources and
	// Options.Finalizer.
	fitNodeResources bool
	finalizer        string
	// expectedFinalizers maps claim name to its finalizers on the server.
	expectedFinalizers map[string][]string
	// namespaces, when not nil, are what the namespace informer shows.
	namespaces []*corev1.Namespace

	expectedErrors []string
	// expectedNodes maps pod name to spec.nodeName on the server.
	expectedNodes map[string]string
	// expectedAllocations maps claim name to "<node>/<device>"s, "" for
	// not allocated.
	expectedAllocations map[string]string
	// expectedReservedFor maps claim name to the pods it is reserved for.
	expectedReservedFor map[string][]string
	// expectedUnschedulable maps pod name to a substring of its
	// PodScheduled=False message.
	expectedUnschedulable map[string]string
	// expectedClaimsAllocated maps pod name to a substring of its
	// ResourceClaimsAllocated=False message.
	expectedClaimsAllocated map[string]string
	// expectedEvents are prefixes ("<type> <reason>") of the events.
	expectedEvents []string
	// expectedEventText are substrings the events must contain, in order.
	expectedEventText []string
	// expectedPending is the number of allocations still pending.
	expectedPending int
	// expectedAttempts counts attempts by result.
	expectedAttempts map[string]int
	// expectNoClaimWrites: the sync must not write claims.
	expectNoClaimWrites bool
	// expectedClaimWrites, when not nil, are the claim writes of the
	// syncs in order, as "<verb> <name>[/<subresource>]".
	expectedClaimWrites []string
}

func TestSyncPod(t *testing.T) {
	three := []*corev1.Node{makeNode("node-a"), makeNode("node-b"), makeNode("node-c")}
	threeSlices := []*resourcev1.ResourceSlice{makeSlice("node-a", 2, "a100"), makeSlice("node-b", 2, "a100"), makeSlice("node-c", 2, "h100")}
	pod1 := makePod("pod-1", withGeneratedClaim("gpu"))
	pod2 := makePod("pod-2", withGeneratedClaim("gpu"))
	pod3 := makePod("pod-3", withGeneratedClaim("gpu"))
	other := makePod("other")

	tests := map[string]testCase{
		"template claim is allocated, reserved and the pod bound": {
			nodes: three, slices: threeSlices,
			pods:                []*corev1.Pod{pod1},
			claims:              []*resourcev1.ResourceClaim{generatedClaim(pod1, "gpu")},
			expectedNodes:       map[string]string{"pod-1": "node-a"},
			expectedAllocations: map[string]string{"pod-1-gpu": "node-a/gpu-0"},
			expectedReservedFor: map[string][]string{"pod-1-gpu": {"pod-1"}},
			expectedEvents:      []string{"Normal Scheduled"},
			expectedPending:     1,
			expectedAttempts:    map[string]int{resultPlaced: 1},
		},
		"claim protected from its creation: the allocation is the only write": {
			nodes: three, slices: threeSlices,
			pods:                []*corev1.Pod{pod1},
			claims:              []*resourcev1.ResourceClaim{generatedClaim(pod1, "gpu", protected())},
			expectedNodes:       map[string]string{"pod-1": "node-a"},
			expectedAllocations: map[string]string{"pod-1-gpu": "node-a/gpu-0"},
			expectedReservedFor: map[string][]string{"pod-1-gpu": {"pod-1"}},
			expectedClaimWrites: []string{"update pod-1-gpu/status"},
			expectedEvents:      []string{"Normal Scheduled"},
			expectedPending:     1,
			expectedAttempts:    map[string]int{resultPlaced: 1},
		},
		"claim without the protection gets it first, then the allocation": {
			nodes: three, slices: threeSlices,
			pods:                []*corev1.Pod{pod1},
			claims:              []*resourcev1.ResourceClaim{generatedClaim(pod1, "gpu")},
			expectedNodes:       map[string]string{"pod-1": "node-a"},
			expectedAllocations: map[string]string{"pod-1-gpu": "node-a/gpu-0"},
			expectedClaimWrites: []string{"update pod-1-gpu", "update pod-1-gpu/status"},
			expectedEvents:      []string{"Normal Scheduled"},
			expectedPending:     1,
			expectedAttempts:    map[string]int{resultPlaced: 1},
		},
		"claim not generated yet: nothing happens": {
			nodes: three, slices: threeSlices,
			pods:          []*corev1.Pod{makePod("pod-1", withTemplateOnly("gpu"))},
			expectedNodes: map[string]string{"pod-1": ""},
		},
		"generated claim not in the informer yet: nothing happens": {
			nodes: three, slices: threeSlices,
			pods:          []*corev1.Pod{pod1},
			expectedNodes: map[string]string{"pod-1": ""},
		},
		"pods placed before the informer catches up get different devices": {
			nodes:  []*corev1.Node{makeNode("node-a")},
			slices: []*resourcev1.ResourceSlice{makeSlice("node-a", 2, "a100")},
			pods:   []*corev1.Pod{pod1, pod2, pod3},
			claims: []*resourcev1.ResourceClaim{generatedClaim(pod1, "gpu"), generatedClaim(pod2, "gpu"), generatedClaim(pod3, "gpu")},
			keys:   []string{"default/pod-1", "default/pod-2", "default/pod-3"},
			// The third pod does not fit: an error-free park.
			expectedErrors:        []string{"", "", errUnschedulable.Error()},
			expectedNodes:         map[string]string{"pod-1": "node-a", "pod-2": "node-a", "pod-3": ""},
			expectedAllocations:   map[string]string{"pod-1-gpu": "node-a/gpu-0", "pod-2-gpu": "node-a/gpu-1", "pod-3-gpu": ""},
			expectedUnschedulable: map[string]string{"pod-3": "0/1 nodes fit"},
			expectedEvents:        []string{"Normal Scheduled", "Normal Scheduled", "Warning FailedScheduling"},
			expectedPending:       2,
			expectedAttempts:      map[string]int{resultPlaced: 2, resultUnschedulable: 1},
		},
		"devices allocated to others: unschedulable with a readable reason": {
			nodes:  []*corev1.Node{makeNode("node-a")},
			slices: []*resourcev1.ResourceSlice{makeSlice("node-a", 1, "a100")},
			pods:   []*corev1.Pod{pod1},
			claims: []*resourcev1.ResourceClaim{
				generatedClaim(pod1, "gpu"),
				makeClaim("taken", allocatedOn("node-a", "gpu-0"), reservedFor(other)),
			},
			expectedErrors:        []string{errUnschedulable.Error()},
			expectedNodes:         map[string]string{"pod-1": ""},
			expectedAllocations:   map[string]string{"pod-1-gpu": ""},
			expectedUnschedulable: map[string]string{"pod-1": "already allocated"},
			expectedEvents:        []string{"Warning FailedScheduling"},
			expectedAttempts:      map[string]int{resultUnschedulable: 1},
		},
		"CEL selector picks the only matching node": {
			nodes: three, slices: threeSlices,
			pods:                []*corev1.Pod{pod1},
			claims:              []*resourcev1.ResourceClaim{generatedClaim(pod1, "gpu", withSelector(`device.attributes["gpu.example.com"].model == "h100"`))},
			expectedNodes:       map[string]string{"pod-1": "node-c"},
			expectedAllocations: map[string]string{"pod-1-gpu": "node-c/gpu-0"},
			expectedEvents:      []string{"Normal Scheduled"},
			expectedPending:     1,
			expectedAttempts:    map[string]int{resultPlaced: 1},
		},
		"not ready, unselected and tainted nodes are skipped": {
			nodes: []*corev1.Node{
				makeNode("node-a", notReady()),
				makeNode("node-b", withLabel("pool", "blue")),
				makeNode("node-c", withNodeTaint("dedicated")),
				makeNode("node-d"),
			},
			slices:              []*resourcev1.ResourceSlice{makeSlice("node-a", 1, "a100"), makeSlice("node-b", 1, "a100"), makeSlice("node-c", 1, "a100"), makeSlice("node-d", 1, "a100")},
			pods:                []*corev1.Pod{makePod("pod-1", withGeneratedClaim("gpu"), withNodeSelector("pool", "red"))},
			claims:              []*resourcev1.ResourceClaim{generatedClaim(pod1, "gpu")},
			expectedErrors:      []string{errUnschedulable.Error()},
			expectedNodes:       map[string]string{"pod-1": ""},
			expectedAllocations: map[string]string{"pod-1-gpu": ""},
			expectedUnschedulable: map[string]string{
				"pod-1": "0/4 nodes are available: 1 not ready, 0 unschedulable, 3 not matching the pod's node selector or affinity",
			},
			expectedEvents:   []string{"Warning FailedScheduling"},
			expectedAttempts: map[string]int{resultUnschedulable: 1},
		},
		"DeviceTaintRule on a node's devices: the pod goes elsewhere": {
			nodes: three, slices: threeSlices,
			taintRules: []*resourcev1.DeviceTaintRule{{
				ObjectMeta: metav1.ObjectMeta{Name: "maintenance"},
				Spec: resourcev1.DeviceTaintRuleSpec{
					DeviceSelector: &resourcev1.DeviceTaintSelector{Pool: ptr("node-a")},
					Taint:          resourcev1.DeviceTaint{Key: "maintenance", Effect: resourcev1.DeviceTaintEffectNoSchedule},
				},
			}},
			pods:                []*corev1.Pod{pod1},
			claims:              []*resourcev1.ResourceClaim{generatedClaim(pod1, "gpu")},
			expectedNodes:       map[string]string{"pod-1": "node-b"},
			expectedAllocations: map[string]string{"pod-1-gpu": "node-b/gpu-0"},
			expectedEvents:      []string{"Normal Scheduled"},
			expectedPending:     1,
			expectedAttempts:    map[string]int{resultPlaced: 1},
		},
		"tolerated node taint": {
			nodes:               []*corev1.Node{makeNode("node-a", withNodeTaint("dedicated"))},
			slices:              []*resourcev1.ResourceSlice{makeSlice("node-a", 1, "a100")},
			pods:                []*corev1.Pod{makePod("pod-1", withGeneratedClaim("gpu"), withToleration("dedicated"))},
			claims:              []*resourcev1.ResourceClaim{generatedClaim(pod1, "gpu")},
			expectedNodes:       map[string]string{"pod-1": "node-a"},
			expectedAllocations: map[string]string{"pod-1-gpu": "node-a/gpu-0"},
			expectedEvents:      []string{"Normal Scheduled"},
			expectedPending:     1,
			expectedAttempts:    map[string]int{resultPlaced: 1},
		},
		"shared claim allocated elsewhere: pod follows it and only reserves": {
			nodes: three, slices: threeSlices,
			pods: []*corev1.Pod{makePod("pod-1", withSharedClaim("gpu", "shared"))},
			claims: []*resourcev1.ResourceClaim{
				makeClaim("shared", allocatedOn("node-b", "gpu-1"), reservedFor(other)),
			},
			expectedNodes:       map[string]string{"pod-1": "node-b"},
			expectedAllocations: map[string]string{"shared": "node-b/gpu-1"},
			expectedReservedFor: map[string][]string{"shared": {"other", "pod-1"}},
			expectedEvents:      []string{"Normal Scheduled"},
			expectedAttempts:    map[string]int{resultPlaced: 1},
		},
		"shared claim used by two pods: allocated once, both on one node": {
			nodes: three, slices: threeSlices,
			pods: []*corev1.Pod{
				makePod("pod-1", withSharedClaim("gpu", "shared")),
				makePod("pod-2", withSharedClaim("gpu", "shared")),
			},
			claims:              []*resourcev1.ResourceClaim{makeClaim("shared")},
			expectedNodes:       map[string]string{"pod-1": "node-a", "pod-2": "node-a"},
			expectedAllocations: map[string]string{"shared": "node-a/gpu-0"},
			expectedReservedFor: map[string][]string{"shared": {"pod-1", "pod-2"}},
			expectedEvents:      []string{"Normal Scheduled", "Normal Scheduled"},
			expectedPending:     1,
			expectedAttempts:    map[string]int{resultPlaced: 2},
		},
		"shared claim being allocated by another worker: retry later": {
			nodes: three, slices: threeSlices,
			pods:   []*corev1.Pod{makePod("pod-1", withSharedClaim("gpu", "shared"))},
			claims: []*resourcev1.ResourceClaim{makeClaim("shared")},
			before: func(c *testController) {
				c.state.mutex.Lock()
				defer c.state.mutex.Unlock()
				c.state.tracker.addPendingLocked("uid-shared", "uid-other", "uid-other", &resourceapi.AllocationResult{})
			},
			expectedErrors:      []string{"claim default/shared is being allocated for another pod"},
			expectedNodes:       map[string]string{"pod-1": ""},
			expectedAllocations: map[string]string{"shared": ""},
			expectedPending:     1,
		},
		"shared claim that does not exist: unschedulable until it is created": {
			nodes: three, slices: threeSlices,
			pods:                  []*corev1.Pod{makePod("pod-1", withSharedClaim("gpu", "missing"))},
			expectedErrors:        []string{errUnschedulable.Error()},
			expectedNodes:         map[string]string{"pod-1": ""},
			expectedUnschedulable: map[string]string{"pod-1": "ResourceClaim missing does not exist"},
			expectedEvents:        []string{"Warning FailedScheduling"},
			expectedAttempts:      map[string]int{resultUnschedulable: 1},
		},
		"pod with scheduling gates waits": {
			nodes: three, slices: threeSlices,
			pods: []*corev1.Pod{makePod("pod-1", withGeneratedClaim("gpu"), func(pod *corev1.Pod) {
				pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}}
			})},
			claims:              []*resourcev1.ResourceClaim{generatedClaim(pod1, "gpu")},
			expectedNodes:       map[string]string{"pod-1": ""},
			expectedAllocations: map[string]string{"pod-1-gpu": ""},
		},
		"claim named twice: allocated and reserved once": {
			nodes: three, slices: threeSlices,
			pods:                []*corev1.Pod{makePod("pod-1", withSharedClaim("a", "shared"), withSharedClaim("b", "shared"))},
			claims:              []*resourcev1.ResourceClaim{makeClaim("shared")},
			expectedNodes:       map[string]string{"pod-1": "node-a"},
			expectedAllocations: map[string]string{"shared": "node-a/gpu-0"},
			expectedReservedFor: map[string][]string{"shared": {"pod-1"}},
			expectedEvents:      []string{"Normal Scheduled"},
			expectedPending:     1,
			expectedAttempts:    map[string]int{resultPlaced: 1},
		},
		"shared claim at 256 consumers": {
			nodes: three, slices: threeSlices,
			pods: []*corev1.Pod{makePod("pod-1", withSharedClaim("gpu", "shared"))},
			claims: []*resourcev1.ResourceClaim{makeClaim("shared", allocatedOn("node-b", "gpu-1"), func(claim *resourcev1.ResourceClaim) {
				for i := range resourceapi.ResourceClaimReservedForMaxSize {
					claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: fmt.Sprintf("p%d", i), UID: types.UID(fmt.Sprintf("u%d", i))})
				}
			})},
			expectedErrors:        []string{errUnschedulable.Error()},
			expectedNodes:         map[string]string{"pod-1": ""},
			expectedUnschedulable: map[string]string{"pod-1": "reserved for 256 consumers already"},
			expectedEvents:        []string{"Warning FailedScheduling"},
			expectedAttempts:      map[string]int{resultUnschedulable: 1},
		},
		"pod with spec.nodeName: allocated on that node, not bound": {
			nodes: three, slices: threeSlices,
			pods:                []*corev1.Pod{makePod("pod-1", withGeneratedClaim("gpu"), withNodeName("node-c"))},
			claims:              []*resourcev1.ResourceClaim{generatedClaim(pod1, "gpu")},
			expectedNodes:       map[string]string{"pod-1": "node-c"},
			expectedAllocations: map[string]string{"pod-1-gpu": "node-c/gpu-0"},
			expectedReservedFor: map[string][]string{"pod-1-gpu": {"pod-1"}},
			expectedPending:     1,
			expectedAttempts:    map[string]int{resultAllocated: 1},
		},
		"pod bound by this controller before the informer shows its claim: nothing to do": {
			nodes: three, slices: threeSlices,
			pods:   []*corev1.Pod{makePod("pod-1", withGeneratedClaim("gpu"), withNodeName("node-a"))},
			claims: []*resourcev1.ResourceClaim{generatedClaim(pod1, "gpu")},
			before: func(c *testController) {
				c.state.mutex.Lock()
				c.state.tracker.addPendingLocked("uid-pod-1-gpu", "uid-pod-1", "uid-pod-1", &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
					Request: "gpu", Driver: testDriver, Pool: "node-a", Device: "gpu-0",
				}}}})
				c.state.mutex.Unlock()
				c.state.written("uid-pod-1-gpu", "200")
				c.resourceClient.ClearActions()
			},
			expectedNodes:       map[string]string{"pod-1": "node-a"},
			expectedReservedFor: map[string][]string{"pod-1-gpu": nil},
			expectedPending:     1,
			expectNoClaimWrites: true,
		},
		"pod with spec.nodeName whose node has no matching device": {
			nodes: three, slices: threeSlices,
			pods:                    []*corev1.Pod{makePod("pod-1", withGeneratedClaim("gpu"), withNodeName("node-a"))},
			claims:                  []*resourcev1.ResourceClaim{generatedClaim(pod1, "gpu", withSelector(`device.attributes["gpu.example.com"].model == "h100"`))},
			expectedErrors:          []string{errUnschedulable.Error()},
			expectedNodes:           map[string]string{"pod-1": "node-a"},
			expectedAllocations:     map[string]string{"pod-1-gpu": ""},
			expectedClaimsAllocated: map[string]string{"pod-1": "SelectorMismatch"},
			expectedEvents:          []string{"Warning FailedResourceAllocation"},
			expectedAttempts:        map[string]int{resultUnschedulable: 1},
		},
		"binding fails: claim unreserved and deallocated": {
			nodes: three, slices: threeSlices,
			pods:                []*corev1.Pod{pod1},
			claims:              []*resourcev1.ResourceClaim{generatedClaim(pod1, "gpu")},
			bindFailure:         apierrors.NewInternalError(errors.New("injected")),
			expectedErrors:      []string{"bind pod default/pod-1 to node node-a"},
			expectedNodes:       map[string]string{"pod-1": ""},
			expectedAllocations: map[string]string{"pod-1-gpu": ""},
			expectedReservedFor: map[string][]string{"pod-1-gpu": nil},
			expectedEvents:      []string{"Warning FailedScheduling"},
			expectedAttempts:    map[string]int{resultError: 1},
		},
		"binding fails: shared claim allocated before stays allocated": {
			nodes: three, slices: threeSlices,
			pods:                []*corev1.Pod{makePod("pod-1", withSharedClaim("gpu", "shared"))},
			claims:              []*resourcev1.ResourceClaim{makeClaim("shared", allocatedOn("node-b", "gpu-1"), reservedFor(other))},
			bindFailure:         apierrors.NewInternalError(errors.New("injected")),
			expectedErrors:      []string{"bind pod"},
			expectedNodes:       map[string]string{"pod-1": ""},
			expectedAllocations: map[string]string{"shared": "node-b/gpu-1"},
			expectedReservedFor: map[string][]string{"shared": {"other"}},
			expectedEvents:      []string{"Warning FailedScheduling"},
			expectedAttempts:    map[string]int{resultError: 1},
		},
		"claim changed on the server meanwhile: conflict retried": {
			nodes: three, slices: threeSlices,
			pods:   []*corev1.Pod{pod1},
			claims: []*resourcev1.ResourceClaim{generatedClaim(pod1, "gpu")},
			serverClaims: []*resourcev1.ResourceClaim{generatedClaim(pod1, "gpu", func(claim *resourcev1.ResourceClaim) {
				claim.ResourceVersion = "7"
				claim.Labels = map[string]string{"touched": "by someone"}
			})},
			expectedNodes:       map[string]string{"pod-1": "node-a"},
			expectedAllocations: map[string]string{"pod-1-gpu": "node-a/gpu-0"},
			expectedReservedFor: map[string][]string{"pod-1-gpu": {"pod-1"}},
			expectedEvents:      []string{"Normal Scheduled"},
			expectedPending:     1,
			expectedAttempts:    map[string]int{resultPlaced: 1},
		},
		"claim allocated by someone else meanwhile: attempt fails, nothing pending": {
			nodes: three, slices: threeSlices,
			pods:                []*corev1.Pod{pod1},
			claims:              []*resourcev1.ResourceClaim{generatedClaim(pod1, "gpu")},
			serverClaims:        []*resourcev1.ResourceClaim{generatedClaim(pod1, "gpu", allocatedOn("node-c", "gpu-1"), withResourceVersion("7"))},
			expectedErrors:      []string{"was allocated by someone else meanwhile"},
			expectedNodes:       map[string]string{"pod-1": ""},
			expectedAllocations: map[string]string{"pod-1-gpu": "node-c/gpu-1"},
			expectedAttempts:    map[string]int{resultError: 1},
		},
		"reservation of the second claim fails: the first is deallocated again": {
			nodes: three, slices: threeSlices,
			pods: []*corev1.Pod{makePod("pod-1", withGeneratedClaim("gpu"), withSharedClaim("shared", "shared"))},
			claims: []*resourcev1.ResourceClaim{
				generatedClaim(pod1, "gpu"),
				makeClaim("shared", allocatedOn("node-b", "gpu-1"), reservedFor(other)),
			},
			claimPatchFailure:   apierrors.NewInternalError(errors.New("injected")),
			expectedErrors:      []string{"reserve claim default/shared for pod default/pod-1"},
			expectedNodes:       map[string]string{"pod-1": ""},
			expectedAllocations: map[string]string{"pod-1-gpu": "", "shared": "node-b/gpu-1"},
			expectedReservedFor: map[string][]string{"pod-1-gpu": nil, "shared": {"other"}},
			expectedAttempts:    map[string]int{resultError: 1},
		},
		"pod with spec.nodeName on another node than its allocated claim: not reserved, explained": {
			nodes: three, slices: threeSlices,
			pods:                    []*corev1.Pod{makePod("pod-1", withSharedClaim("gpu", "shared"), withNodeName("node-a"))},
			claims:                  []*resourcev1.ResourceClaim{makeClaim("shared", allocatedOn("node-b", "gpu-1"), reservedFor(other))},
			expectedErrors:          []string{errUnschedulable.Error()},
			expectedNodes:           map[string]string{"pod-1": "node-a"},
			expectedAllocations:     map[string]string{"shared": "node-b/gpu-1"},
			expectedReservedFor:     map[string][]string{"shared": {"other"}},
			expectedClaimsAllocated: map[string]string{"pod-1": "claim default/shared is allocated for node node-b"},
			expectedEvents:          []string{"Warning FailedResourceAllocation"},
			expectedEventText:       []string{"claim default/shared is allocated for node node-b"},
			expectedAttempts:        map[string]int{resultUnschedulable: 1},
			expectNoClaimWrites:     true,
		},
		"pod with spec.nodeName that was not allocatable before: condition turns True": {
			nodes: three, slices: threeSlices,
			pods: []*corev1.Pod{makePod("pod-1", withSharedClaim("gpu", "shared"), withNodeName("node-b"), func(pod *corev1.Pod) {
				pod.Status.Conditions = []corev1.PodCondition{{Type: ConditionClaimsAllocated, Status: corev1.ConditionFalse, Reason: ReasonFailedAllocation}}
			})},
			claims:              []*resourcev1.ResourceClaim{makeClaim("shared", allocatedOn("node-b", "gpu-1"), reservedFor(other))},
			expectedNodes:       map[string]string{"pod-1": "node-b"},
			expectedReservedFor: map[string][]string{"shared": {"other", "pod-1"}},
			expectedAttempts:    map[string]int{resultAllocated: 1},
		},
		"admin access in a namespace without the label: unschedulable, nothing written": {
			nodes: three, slices: threeSlices,
			namespaces:            []*corev1.Namespace{makeNamespace(testNamespace, nil)},
			pods:                  []*corev1.Pod{pod1},
			claims:                []*resourcev1.ResourceClaim{generatedClaim(pod1, "gpu", withAdminAccess())},
			expectedErrors:        []string{errUnschedulable.Error()},
			expectedNodes:         map[string]string{"pod-1": ""},
			expectedAllocations:   map[string]string{"pod-1-gpu": ""},
			expectedUnschedulable: map[string]string{"pod-1": "namespace default lacks the label resource.kubernetes.io/admin-access=true"},
			expectedEvents:        []string{"Warning FailedScheduling"},
			expectedAttempts:      map[string]int{resultUnschedulable: 1},
			expectNoClaimWrites:   true,
		},
		"admin access without namespaces to check: refused": {
			nodes: three, slices: threeSlices,
			pods:                  []*corev1.Pod{pod1},
			claims:                []*resourcev1.ResourceClaim{generatedClaim(pod1, "gpu", withAdminAccess())},
			expectedErrors:        []string{errUnschedulable.Error()},
			expectedNodes:         map[string]string{"pod-1": ""},
			expectedUnschedulable: map[string]string{"pod-1": "cannot be checked"},
			expectedEvents:        []string{"Warning FailedScheduling"},
			expectedAttempts:      map[string]int{resultUnschedulable: 1},
			expectNoClaimWrites:   true,
		},
		"claim granted admin access, namespace label since removed: not reserved for a new pod": {
			nodes: three, slices: threeSlices,
			namespaces:            []*corev1.Namespace{makeNamespace(testNamespace, nil)},
			pods:                  []*corev1.Pod{makePod("pod-1", withSharedClaim("gpu", "shared"))},
			claims:                []*resourcev1.ResourceClaim{makeClaim("shared", withAdminAccess(), allocatedOn("node-b", "gpu-1"), grantedAdminAccess(), reservedFor(other))},
			expectedErrors:        []string{errUnschedulable.Error()},
			expectedNodes:         map[string]string{"pod-1": ""},
			expectedReservedFor:   map[string][]string{"shared": {"other"}},
			expectedUnschedulable: map[string]string{"pod-1": "claim default/shared was granted admin access (status.allocation.devices.results[0].adminAccess) and is not reserved for new pods, but namespace default lacks the label resource.kubernetes.io/admin-access=true"},
			expectedEvents:        []string{"Warning FailedScheduling"},
			expectedAttempts:      map[string]int{resultUnschedulable: 1},
			expectNoClaimWrites:   true,
		},
		"claim granted admin access in a namespace still labelled: reserved for a new pod": {
			nodes: three, slices: threeSlices,
			namespaces:          []*corev1.Namespace{makeNamespace(testNamespace, map[string]string{resourceapi.AdminAccessNamespaceLabel: "true"})},
			pods:                []*corev1.Pod{makePod("pod-1", withSharedClaim("gpu", "shared"), withNodeName("node-b"))},
			claims:              []*resourcev1.ResourceClaim{makeClaim("shared", withAdminAccess(), allocatedOn("node-b", "gpu-1"), grantedAdminAccess(), reservedFor(other))},
			expectedNodes:       map[string]string{"pod-1": "node-b"},
			expectedReservedFor: map[string][]string{"shared": {"other", "pod-1"}},
			expectedAttempts:    map[string]int{resultAllocated: 1},
		},
		"admin access in a labelled namespace: allocated": {
			nodes: three, slices: threeSlices,
			namespaces:          []*corev1.Namespace{makeNamespace(testNamespace, map[string]string{resourceapi.AdminAccessNamespaceLabel: "true"})},
			pods:                []*corev1.Pod{pod1},
			claims:              []*resourcev1.ResourceClaim{generatedClaim(pod1, "gpu", withAdminAccess())},
			expectedNodes:       map[string]string{"pod-1": "node-a"},
			expectedAllocations: map[string]string{"pod-1-gpu": "node-a/gpu-0"},
			expectedEvents:      []string{"Normal Scheduled"},
			expectedPending:     1,
			expectedAttempts:    map[string]int{resultPlaced: 1},
		},
		"allocation the API would refuse (too many configs): unschedulable before any write": {
			nodes: three, slices: threeSlices,
			pods: []*corev1.Pod{makePod("pod-1", withGeneratedClaim("gpu"), withSharedClaim("heavy", "heavy"))},
			claims: []*resourcev1.ResourceClaim{
				generatedClaim(pod1, "gpu"),
				makeClaim("heavy", withConfigs(2*resourceapi.DeviceConfigMaxSize+1)),
			},
			expectedErrors:        []string{errUnschedulable.Error()},
			expectedNodes:         map[string]string{"pod-1": ""},
			expectedAllocations:   map[string]string{"pod-1-gpu": "", "heavy": ""},
			expectedUnschedulable: map[string]string{"pod-1": "claim default/heavy cannot take its allocation"},
			expectedEvents:        []string{"Warning FailedScheduling"},
			expectedEventText:     []string{"status.allocation.devices.config"},
			expectedAttempts:      map[string]int{resultUnschedulable: 1},
			expectNoClaimWrites:   true,
		},
		"claim status write refused: unschedulable with the reason, nothing pending": {
			nodes: three, slices: threeSlices,
			pods:                  []*corev1.Pod{pod1},
			claims:                []*resourcev1.ResourceClaim{generatedClaim(pod1, "gpu")},
			claimUpdateFailure:    apierrors.NewForbidden(claimsResource.GroupResource(), "pod-1-gpu", errors.New("injected refusal")),
			expectedErrors:        []string{errUnschedulable.Error()},
			expectedNodes:         map[string]string{"pod-1": ""},
			expectedAllocations:   map[string]string{"pod-1-gpu": ""},
			expectedUnschedulable: map[string]string{"pod-1": "injected refusal"},
			expectedEvents:        []string{"Warning FailedScheduling"},
			expectedAttempts:      map[string]int{resultUnschedulable: 1},
		},
		"reservation of the second claim refused: the first is deallocated, the pod parked": {
			nodes: three, slices: threeSlices,
			pods: []*corev1.Pod{makePod("pod-1", withGeneratedClaim("gpu"), withSharedClaim("shared", "shared"))},
			claims: []*resourcev1.ResourceClaim{
				generatedClaim(pod1, "gpu"),
				makeClaim("shared", allocatedOn("node-b", "gpu-1"), reservedFor(other)),
			},
			claimPatchFailure:     apierrors.NewInvalid(schema.GroupKind{Group: claimsResource.Group, Kind: "ResourceClaim"}, "shared", nil),
			expectedErrors:        []string{errUnschedulable.Error()},
			expectedNodes:         map[string]string{"pod-1": ""},
			expectedAllocations:   map[string]string{"pod-1-gpu": "", "shared": "node-b/gpu-1"},
			expectedReservedFor:   map[string][]string{"pod-1-gpu": nil, "shared": {"other"}},
			expectedUnschedulable: map[string]string{"pod-1": "the API refused a write"},
			expectedEvents:        []string{"Warning FailedScheduling"},
			expectedAttempts:      map[string]int{resultUnschedulable: 1},
		},
		"claim status write fails: nothing bound, nothing pending": {
			nodes: three, slices: threeSlices,
			pods:                []*corev1.Pod{pod1},
			claims:              []*resourcev1.ResourceClaim{generatedClaim(pod1, "gpu")},
			claimUpdateFailure:  apierrors.NewInternalError(errors.New("injected")),
			expectedErrors:      []string{"allocate claim default/pod-1-gpu"},
			expectedNodes:       map[string]string{"pod-1": ""},
			expectedAllocations: map[string]string{"pod-1-gpu": ""},
			expectedAttempts:    map[string]int{resultError: 1},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) { runSyncTest(t, tc) })
	}
}

type testController struct {
	*Controller
	kubeClient     *kubefake.Clientset
	resourceClient *resourcefake.Clientset
	podStore       cache.Store
	claimStore     cache.Store
	nodeStore      cache.Store
	recorder       *record.FakeRecorder
	// t and logger are set by tests of the event handlers.
	t      *testing.T
	logger klog.Logger
}

func newTestController(t testing.TB, logger klog.Logger, tc testCase) *testController {
	t.Helper()
	var kubeObjects []runtime.Object
	for _, pod := range tc.pods {
		kubeObjects = append(kubeObjects, pod)
	}
	for _, node := range tc.nodes {
		kubeObjects = append(kubeObjects, node)
	}
	resourceObjects := []runtime.Object{makeClass()}
	for _, claim := range tc.claims {
		if i := slices.IndexFunc(tc.serverClaims, func(c *resourcev1.ResourceClaim) bool { return c.Name == claim.Name }); i >= 0 {
			claim = tc.serverClaims[i]
		}
		resourceObjects = append(resourceObjects, claim)
	}
	for _, slice := range tc.slices {
		resourceObjects = append(resourceObjects, slice)
	}
	kubeClient := kubefake.NewClientset(kubeObjects...)
	resourceClient := resourcefake.NewSimpleClientset(resourceObjects...)
	if tc.claimUpdateFailure != nil {
		resourceClient.PrependReactor("update", "resourceclaims", func(action k8stesting.Action) (bool, runtime.Object, error) {
			if action.GetSubresource() == "status" {
				return true, nil, tc.claimUpdateFailure
			}
			return false, nil, nil
		})
	}
	if tc.claimPatchFailure != nil {
		resourceClient.PrependReactor("patch", "resourceclaims", func(action k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, tc.claimPatchFailure
		})
	}
	serverLike(kubeClient, resourceClient, tc.bindFailure)

	kubeInformers := informers.NewSharedInformerFactory(kubeClient, 0)
	resourceInformers := resourceinformers.NewSharedInformerFactory(resourceClient, 0)
	podInformer := kubeInformers.Core().V1().Pods()
	nodeInformer := kubeInformers.Core().V1().Nodes()
	claimInformer := resourceInformers.Resource().V1().ResourceClaims()
	classInformer := resourceInformers.Resource().V1().DeviceClasses()
	sliceInformer := resourceInformers.Resource().V1().ResourceSlices()
	taintRuleInformer := resourceInformers.Resource().V1().DeviceTaintRules()
	opts := Options{Mode: tc.mode, FitNodeResources: tc.fitNodeResources, Finalizer: tc.finalizer}
	if tc.namespaces != nil {
		opts.Namespaces = kubeInformers.Core().V1().Namespaces()
		for _, namespace := range tc.namespaces {
			mustAdd(t, opts.Namespaces.Informer().GetStore(), namespace)
		}
	}
	c, err := NewController(logger, kubeClient, resourceClient, podInformer, nodeInformer, claimInformer, classInformer, sliceInformer, taintRuleInformer, opts)
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	recorder := record.NewFakeRecorder(100)
	c.recorder = recorder

	// Fill the informer stores directly: the test decides what the
	// controller has seen. Claims also go through the handler, which
	// feeds the allocation tracker.
	for _, pod := range tc.pods {
		mustAdd(t, podInformer.Informer().GetStore(), pod)
		if c.nodeRequests != nil {
			// What the pod informer's handler does.
			c.nodeRequests.observe(pod)
		}
	}
	for _, node := range tc.nodes {
		mustAdd(t, nodeInformer.Informer().GetStore(), node)
	}
	for _, claim := range tc.claims {
		mustAdd(t, claimInformer.Informer().GetStore(), claim)
		c.onClaim(logger, claim, false)
	}
	mustAdd(t, classInformer.Informer().GetStore(), makeClass())
	for _, slice := range tc.slices {
		mustAdd(t, sliceInformer.Informer().GetStore(), slice)
	}
	for _, rule := range tc.taintRules {
		mustAdd(t, taintRuleInformer.Informer().GetStore(), rule)
	}
	return &testController{Controller: c, kubeClient: kubeClient, resourceClient: resourceClient,
		podStore: podInformer.Informer().GetStore(), claimStore: claimInformer.Informer().GetStore(),
		nodeStore: nodeInformer.Informer().GetStore(), recorder: recorder}
}

func runSyncTest(t *testing.T, tc testCase) {
	_, ctx := ktesting.NewTestContext(t)
	logger := klog.FromContext(ctx)
	c := newTestController(t, logger, tc)
	if tc.before != nil {
		tc.before(c)
	}

	attemptsBefore := attemptCounts(t)
	placedBefore := counterValue(t, podsPlaced)
	latenciesBefore := histogramCount(t)

	keys := tc.keys
	if keys == nil {
		for _, pod := range tc.pods {
			keys = append(keys, podKey(pod))
		}
	}
	for i, key := range keys {
		err := c.syncPod(ctx, key)
		expected := ""
		if i < len(tc.expectedErrors) {
			expected = tc.expectedErrors[i]
		}
		switch {
		case expected == "" && err != nil:
			t.Errorf("sync %d (%s): unexpected error: %v", i, key, err)
		case expected != "" && err == nil:
			t.Errorf("sync %d (%s): expected error containing %q, got none", i, key, expected)
		case expected != "" && !strings.Contains(err.Error(), expected):
			t.Errorf("sync %d (%s): expected error containing %q, got: %v", i, key, expected, err)
		}
		if errors.Is(err, errUnschedulable) && !c.isUnschedulable(key) {
			t.Errorf("sync %d (%s): unschedulable pod not parked", i, key)
		}
	}

	for name, expected := range tc.expectedNodes {
		pod, err := c.kubeClient.CoreV1().Pods(testNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get pod %s: %v", name, err)
		}
		if pod.Spec.NodeName != expected {
			t.Errorf("pod %s: expected node %q, got %q", name, expected, pod.Spec.NodeName)
		}
		var scheduled *corev1.PodCondition
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Type == corev1.PodScheduled {
				scheduled = &pod.Status.Conditions[i]
			}
		}
		want, unschedulable := tc.expectedUnschedulable[name]
		switch {
		case unschedulable && (scheduled == nil || scheduled.Status != corev1.ConditionFalse || scheduled.Reason != corev1.PodReasonUnschedulable || !strings.Contains(scheduled.Message, want)):
			t.Errorf("pod %s: expected PodScheduled=False/Unschedulable with message containing %q, got %+v", name, want, scheduled)
		case !unschedulable && scheduled != nil:
			t.Errorf("pod %s: unexpected PodScheduled condition %+v", name, scheduled)
		}
		allocated := podCondition(pod, ConditionClaimsAllocated)
		want, notAllocated := tc.expectedClaimsAllocated[name]
		switch {
		case notAllocated && (allocated == nil || allocated.Status != corev1.ConditionFalse || allocated.Reason != ReasonFailedAllocation || !strings.Contains(allocated.Message, want)):
			t.Errorf("pod %s: expected %s=False/%s with message containing %q, got %+v", name, ConditionClaimsAllocated, ReasonFailedAllocation, want, allocated)
		case !notAllocated && allocated != nil && allocated.Status == corev1.ConditionFalse:
			t.Errorf("pod %s: unexpected condition %+v", name, allocated)
		}
	}

	for name, expected := range tc.expectedAllocations {
		claim, err := c.resourceClient.ResourceV1().ResourceClaims(testNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get claim %s: %v", name, err)
		}
		if got := describeAllocation(claim); got != expected {
			t.Errorf("claim %s: expected allocation %q, got %q", name, expected, got)
		}
		if claim.Status.Allocation != nil && !slices.Contains(claim.Finalizers, c.finalizer) {
			t.Errorf("claim %s: allocated without finalizer", name)
		}
	}
	for name, expected := range tc.expectedReservedFor {
		claim, err := c.resourceClient.ResourceV1().ResourceClaims(testNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get claim %s: %v", name, err)
		}
		var got []string
		for _, consumer := range claim.Status.ReservedFor {
			got = append(got, consumer.Name)
		}
		sort.Strings(got)
		if !slices.Equal(got, expected) {
			t.Errorf("claim %s: expected reservedFor %v, got %v", name, expected, got)
		}
	}
	for name, expected := range tc.expectedFinalizers {
		claim, err := c.resourceClient.ResourceV1().ResourceClaims(testNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get claim %s: %v", name, err)
		}
		if !slices.Equal(claim.Finalizers, expected) {
			t.Errorf("claim %s: expected finalizers %v, got %v", name, expected, claim.Finalizers)
		}
	}

	close(c.recorder.Events)
	var events []string
	for event := range c.recorder.Events {
		events = append(events, event)
	}
	if len(events) != len(tc.expectedEvents) {
		t.Errorf("expected events %v, got %q", tc.expectedEvents, events)
	} else {
		for i, event := range events {
			if !strings.HasPrefix(event, tc.expectedEvents[i]+" ") {
				t.Errorf("event %d: expected %q..., got %q", i, tc.expectedEvents[i], event)
			}
			if i < len(tc.expectedEventText) && !strings.Contains(event, tc.expectedEventText[i]) {
				t.Errorf("event %d: expected it to contain %q, got %q", i, tc.expectedEventText[i], event)
			}
		}
	}
	if got := c.state.pendingCount(); got != tc.expectedPending {
		t.Errorf("expected %d pending allocations, got %d", tc.expectedPending, got)
	}

	if tc.expectNoClaimWrites {
		for _, action := range c.resourceClient.Actions() {
			if action.GetVerb() != "get" && action.GetVerb() != "list" && action.GetVerb() != "watch" {
				t.Errorf("unexpected claim write: %v", action)
			}
		}
	}

	if tc.expectedClaimWrites != nil {
		if got := claimWrites(c.resourceClient.Actions()); !slices.Equal(got, tc.expectedClaimWrites) {
			t.Errorf("claim writes: expected %q, got %q", tc.expectedClaimWrites, got)
		}
	}

	attemptsAfter := attemptCounts(t)
	for _, result := range []string{resultPlaced, resultAllocated, resultUnschedulable, resultError} {
		if delta := attemptsAfter[result] - attemptsBefore[result]; delta != tc.expectedAttempts[result] {
			t.Errorf("attempts with result %q: expected %d, got %d", result, tc.expectedAttempts[result], delta)
		}
	}
	placed := tc.expectedAttempts[resultPlaced]
	if delta := int(counterValue(t, podsPlaced) - placedBefore); delta != placed {
		t.Errorf("pods placed: expected %d, got %d", placed, delta)
	}
	if delta := int(histogramCount(t) - latenciesBefore); delta != placed {
		t.Errorf("binding latencies observed: expected %d, got %d", placed, delta)
	}
}

// claimWrites describes the writes of claims among actions.
func claimWrites(actions []k8stesting.Action) []string {
	var writes []string
	for _, action := range actions {
		if action.GetResource().Resource != "resourceclaims" {
			continue
		}
		var name string
		switch action := action.(type) {
		case k8stesting.UpdateAction: // and CreateAction: the two interfaces have the same methods
			name = action.GetObject().(metav1.Object).GetName()
		case k8stesting.PatchAction:
			name = action.GetName()
		case k8stesting.DeleteAction:
			name = action.GetName()
		default:
			continue
		}
		if sub := action.GetSubresource(); sub != "" {
			name += "/" + sub
		}
		writes = append(writes, action.GetVerb()+" "+name)
	}
	return writes
}

func attemptCounts(t *testing.T) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for _, result := range []string{resultPlaced, resultAllocated, resultUnschedulable, resultError} {
		counts[result] = int(counterValue(t, allocationAttempts.WithLabelValues(result)))
	}
	return counts
}

func counterValue(t *testing.T, counter metrics.CounterMetric) float64 {
	t.Helper()
	value, err := testutil.GetCounterMetricValue(counter)
	if err != nil {
		t.Fatalf("read counter: %v", err)
	}
	return value
}

func histogramCount(t *testing.T) uint64 {
	t.Helper()
	vec, err := testutil.GetHistogramVecFromGatherer(legacyregistry.DefaultGatherer, "draplane_allocation_controller_pod_creation_to_binding_seconds", nil)
	if err != nil {
		// Not gathered before the first observation.
		return 0
	}
	return vec.GetAggregatedSampleCount()
}

// describeAllocation renders an allocation as "<node>/<device>,...".
func describeAllocation(claim *resourcev1.ResourceClaim) string {
	if claim.Status.Allocation == nil {
		return ""
	}
	var devices []string
	for _, result := range claim.Status.Allocation.Devices.Results {
		devices = append(devices, result.Pool+"/"+result.Device)
	}
	return strings.Join(devices, ",")
}

func mustAdd(t testing.TB, store cache.Store, obj any) {
	t.Helper()
	if err := store.Add(obj); err != nil {
		t.Fatalf("add to informer store: %v", err)
	}
}

func mustUpdate(t *testing.T, store cache.Store, obj any) {
	t.Helper()
	if err := store.Update(obj); err != nil {
		t.Fatalf("update in informer store: %v", err)
	}
}
