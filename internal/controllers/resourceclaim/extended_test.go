package resourceclaim

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcefake "github.com/draplane/draplane/generated/clientset/versioned/fake"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions"
	"github.com/draplane/draplane/internal/controllers/podmode"
	"github.com/draplane/draplane/internal/podclaims"
)

func withExtendedResource(container, name, quantity string) podOption {
	return func(pod *corev1.Pod) {
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			if c.Name != container {
				continue
			}
			if c.Resources.Requests == nil {
				c.Resources.Requests = corev1.ResourceList{}
				c.Resources.Limits = corev1.ResourceList{}
			}
			c.Resources.Requests[corev1.ResourceName(name)] = resource.MustParse(quantity)
			c.Resources.Limits[corev1.ResourceName(name)] = resource.MustParse(quantity)
		}
	}
}

func withExtendedClaimStatus(claimName string) podOption {
	return func(pod *corev1.Pod) { pod.Status.ExtendedResourceClaimStatus = gpuMapping(claimName) }
}

func gpuMapping(claimName string) *corev1.PodExtendedResourceClaimStatus {
	return &corev1.PodExtendedResourceClaimStatus{
		ResourceClaimName: claimName,
		RequestMappings:   []corev1.ContainerExtendedResourceRequest{{ContainerName: "ctr", ResourceName: "example.com/gpu", RequestName: "container-0-request-0"}},
	}
}

func extendedClaimFor(pod *corev1.Pod) claimOption {
	return func(claim *resourcev1.ResourceClaim) {
		generatedFor(pod, "")(claim)
		claim.Annotations = map[string]string{podclaims.ExtendedResourceClaimAnnotation: "true"}
		claim.Spec = resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "container-0-request-0",
			Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: "gpu.example.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 2,
			},
		}}}}
	}
}

// expectedExtendedClaim is the claim the controller makes for the pod's
// two example.com/gpu, the n-th claim the fake server creates.
func expectedExtendedClaim(pod *corev1.Pod, n int) *resourcev1.ResourceClaim {
	generateName := claimGenerateName(pod.Name, "extended-resources")
	claim := makeClaim(generatedName(generateName, n), extendedClaimFor(pod))
	claim.GenerateName = generateName
	claim.UID = ""
	claim.Finalizers = []string{resourceapi.Finalizer}
	return claim
}

func TestSyncExtendedResources(t *testing.T) {
	gpuClass := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"}}
	gpuClass.Spec.ExtendedResourceName = new("example.com/gpu")
	classes := []*resourcev1.DeviceClass{gpuClass}

	pod := makePod("pod-x", "uid-x", withExtendedResource("ctr", "example.com/gpu", "2"))
	created := expectedExtendedClaim(pod, 1)
	recordedPod := makePod("pod-x", "uid-x", withExtendedResource("ctr", "example.com/gpu", "2"), withExtendedClaimStatus("pod-x-extended-resources-abcde"))
	existing := makeClaim("pod-x-extended-resources-abcde", extendedClaimFor(pod))
	implicitPod := makePod("pod-x", "uid-x", withExtendedResource("ctr", "deviceclass.resource.kubernetes.io/gpu.example.com", "2"))
	mixedPod := makePod("pod-x", "uid-x", withExtendedResource("ctr", "example.com/gpu", "2"), withTemplateClaim("nic", "nic-template"))
	boundPod := makePod("pod-x", "uid-x", withNodeName("node-1"), withPhase(corev1.PodRunning),
		withExtendedResource("ctr", "example.com/gpu", "2"), withExtendedClaimStatus("pod-x-extended-resources-abcde"))
	donePod := makePod("pod-x", "uid-x", withNodeName("node-1"), withPhase(corev1.PodSucceeded),
		withExtendedResource("ctr", "example.com/gpu", "2"), withExtendedClaimStatus("pod-x-extended-resources-abcde"))
	otherPod := makePod("pod-x", "uid-other", withExtendedResource("ctr", "example.com/gpu", "2"), withExtendedClaimStatus("pod-x-extended-resources-abcde"))

	podKey := podKeyPrefix + testNamespace + "/pod-x"
	for name, tc := range map[string]testCase{
		"claim made and recorded": {
			keys: []string{podKey}, pods: []*corev1.Pod{pod}, classes: classes,
			expectedClaims:           []*resourcev1.ResourceClaim{created},
			expectedExtendedStatuses: map[string]*corev1.PodExtendedResourceClaimStatus{"pod-x": gpuMapping(created.Name)},
			expectedEvents:           []string{"Normal CreatedExtendedResourceClaim"},
			expectedCreates:          map[string]int{createSuccess: 1},
		},
		"implicit class name": {
			keys: []string{podKey}, pods: []*corev1.Pod{implicitPod}, classes: classes,
			expectedClaims: []*resourcev1.ResourceClaim{expectedExtendedClaim(implicitPod, 1)},
			expectedExtendedStatuses: map[string]*corev1.PodExtendedResourceClaimStatus{"pod-x": {
				ResourceClaimName: created.Name,
				RequestMappings: []corev1.ContainerExtendedResourceRequest{{
					ContainerName: "ctr", ResourceName: "deviceclass.resource.kubernetes.io/gpu.example.com", RequestName: "container-0-request-0",
				}},
			}},
			expectedEvents:  []string{"Normal CreatedExtendedResourceClaim"},
			expectedCreates: map[string]int{createSuccess: 1},
		},
		"no class backs the resource": {
			keys: []string{podKey}, pods: []*corev1.Pod{pod}, classes: []*resourcev1.DeviceClass{},
		},
		"off without classes": {
			keys: []string{podKey}, pods: []*corev1.Pod{pod},
		},
		"recorded claim exists": {
			keys: []string{podKey}, pods: []*corev1.Pod{recordedPod}, classes: classes,
			claims:         []*resourcev1.ResourceClaim{existing},
			expectedClaims: []*resourcev1.ResourceClaim{existing},
		},
		"claim made earlier is adopted": {
			keys: []string{podKey}, pods: []*corev1.Pod{pod}, classes: classes,
			claims:                   []*resourcev1.ResourceClaim{existing},
			expectedClaims:           []*resourcev1.ResourceClaim{existing},
			expectedExtendedStatuses: map[string]*corev1.PodExtendedResourceClaimStatus{"pod-x": gpuMapping(existing.Name)},
		},
		"recorded claim gone": {
			keys: []string{podKey}, pods: []*corev1.Pod{recordedPod}, classes: classes,
			expectedClaims:           []*resourcev1.ResourceClaim{created},
			expectedExtendedStatuses: map[string]*corev1.PodExtendedResourceClaimStatus{"pod-x": gpuMapping(created.Name)},
			expectedEvents:           []string{"Normal CreatedExtendedResourceClaim"},
			expectedCreates:          map[string]int{createSuccess: 1},
		},
		"recorded claim of another pod": {
			keys: []string{podKey}, pods: []*corev1.Pod{otherPod}, classes: classes,
			claims: []*resourcev1.ResourceClaim{existing},
			expectedClaims: []*resourcev1.ResourceClaim{existing, func() *resourcev1.ResourceClaim {
				claim := expectedExtendedClaim(otherPod, 1)
				return claim
			}()},
			expectedExtendedStatuses: map[string]*corev1.PodExtendedResourceClaimStatus{"pod-x": gpuMapping(created.Name)},
			expectedEvents:           []string{"Normal CreatedExtendedResourceClaim"},
			expectedCreates:          map[string]int{createSuccess: 1},
		},
		"with a claim from a template": {
			keys: []string{podKey}, pods: []*corev1.Pod{mixedPod}, classes: classes,
			templates:                []*resourcev1.ResourceClaimTemplate{makeTemplate("nic-template")},
			expectedClaims:           []*resourcev1.ResourceClaim{expectedGenerated(mixedPod, "nic", 1), expectedExtendedClaim(mixedPod, 2)},
			expectedStatuses:         map[string][]corev1.PodResourceClaimStatus{"pod-x": {{Name: "nic", ResourceClaimName: new(generatedName(claimGenerateName("pod-x", "nic"), 1))}}},
			expectedExtendedStatuses: map[string]*corev1.PodExtendedResourceClaimStatus{"pod-x": gpuMapping(generatedName(created.GenerateName, 2))},
			expectedEvents:           []string{"Normal CreatedExtendedResourceClaim"},
			expectedCreates:          map[string]int{createSuccess: 2},
		},
		"reserved for a pod bound to its node": {
			keys: []string{podKey}, pods: []*corev1.Pod{boundPod}, classes: classes,
			claims:         []*resourcev1.ResourceClaim{makeClaim(existing.Name, extendedClaimFor(pod), allocatedFor("node-1"))},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim(existing.Name, extendedClaimFor(pod), allocatedFor("node-1"), reservedFor(boundPod))},
		},
		"deleted when the pod is done": {
			keys: []string{claimKeyPrefix + testNamespace + "/" + existing.Name}, pods: []*corev1.Pod{donePod}, classes: classes,
			claims: []*resourcev1.ResourceClaim{makeClaim(existing.Name, extendedClaimFor(pod), allocatedFor("node-1"), reservedFor(donePod))},
		},
	} {
		t.Run(name, func(t *testing.T) { runSyncTest(t, tc) })
	}
}

// TestSyncExtendedResourcesOnly: in cluster mode the controller only
// makes the claims for the extended resources of the unbound pods that
// name draplane's scheduler, without a finalizer (the allocation adds
// upstream's), and leaves templates and reservations to the host's
// kube-controller-manager.
func TestSyncExtendedResourcesOnly(t *testing.T) {
	gpuClass := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"}}
	gpuClass.Spec.ExtendedResourceName = new("example.com/gpu")
	classes := []*resourcev1.DeviceClass{gpuClass}
	mode := podmode.Cluster{SchedulerName: "draplane"}
	ours := func(pod *corev1.Pod) { pod.Spec.SchedulerName = "draplane" }

	pod := makePod("pod-x", "uid-x", ours, withExtendedResource("ctr", "example.com/gpu", "2"))
	created := expectedExtendedClaim(pod, 1)
	created.Finalizers = nil
	mixedPod := makePod("pod-x", "uid-x", ours, withExtendedResource("ctr", "example.com/gpu", "2"), withTemplateClaim("nic", "nic-template"))
	mixedCreated := expectedExtendedClaim(mixedPod, 1)
	mixedCreated.Finalizers = nil
	existing := makeClaim("pod-x-extended-resources-abcde", extendedClaimFor(pod), allocatedFor("node-1"))
	boundPod := makePod("pod-x", "uid-x", ours, withNodeName("node-1"), withPhase(corev1.PodRunning),
		withExtendedResource("ctr", "example.com/gpu", "2"), withExtendedClaimStatus(existing.Name))

	podKey := podKeyPrefix + testNamespace + "/pod-x"
	for name, tc := range map[string]testCase{
		"claim made without a finalizer and recorded": {
			keys: []string{podKey}, pods: []*corev1.Pod{pod}, classes: classes, mode: mode, extendedOnly: true,
			expectedClaims:           []*resourcev1.ResourceClaim{created},
			expectedExtendedStatuses: map[string]*corev1.PodExtendedResourceClaimStatus{"pod-x": gpuMapping(created.Name)},
			expectedEvents:           []string{"Normal CreatedExtendedResourceClaim"},
			expectedCreates:          map[string]int{createSuccess: 1},
		},
		"another scheduler's pod": {
			keys: []string{podKey}, pods: []*corev1.Pod{makePod("pod-x", "uid-x", withExtendedResource("ctr", "example.com/gpu", "2"))},
			classes: classes, mode: mode, extendedOnly: true,
		},
		"no claim from a template": {
			keys: []string{podKey}, pods: []*corev1.Pod{mixedPod}, classes: classes, mode: mode, extendedOnly: true,
			templates:                []*resourcev1.ResourceClaimTemplate{makeTemplate("nic-template")},
			expectedClaims:           []*resourcev1.ResourceClaim{mixedCreated},
			expectedExtendedStatuses: map[string]*corev1.PodExtendedResourceClaimStatus{"pod-x": gpuMapping(mixedCreated.Name)},
			expectedEvents:           []string{"Normal CreatedExtendedResourceClaim"},
			expectedCreates:          map[string]int{createSuccess: 1},
		},
		"no reservation for a bound pod": {
			keys: []string{podKey}, pods: []*corev1.Pod{boundPod}, classes: classes, mode: mode, extendedOnly: true,
			claims:         []*resourcev1.ResourceClaim{existing},
			expectedClaims: []*resourcev1.ResourceClaim{existing},
		},
	} {
		t.Run(name, func(t *testing.T) { runSyncTest(t, tc) })
	}
}

// TestNeedsWorkExtendedResources: the event handlers queue a pod whose
// extended resources need a claim, and one whose recorded claim is gone.
func TestNeedsWorkExtendedResources(t *testing.T) {
	gpuClass := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.example.com"}}
	gpuClass.Spec.ExtendedResourceName = new("example.com/gpu")
	for name, tc := range map[string]struct {
		pod     *corev1.Pod
		classes []*resourcev1.DeviceClass
		want    bool
	}{
		"needs a claim":           {makePod("p", "u", withExtendedResource("ctr", "example.com/gpu", "1")), []*resourcev1.DeviceClass{gpuClass}, true},
		"no class":                {makePod("p", "u", withExtendedResource("ctr", "example.com/gpu", "1")), nil, false},
		"recorded claim is gone":  {makePod("p", "u", withExtendedResource("ctr", "example.com/gpu", "1"), withExtendedClaimStatus("gone")), []*resourcev1.DeviceClass{gpuClass}, true},
		"no extended resources":   {makePod("p", "u"), []*resourcev1.DeviceClass{gpuClass}, false},
		"other extended resource": {makePod("p", "u", withExtendedResource("ctr", "example.com/fpga", "1")), []*resourcev1.DeviceClass{gpuClass}, false},
	} {
		t.Run(name, func(t *testing.T) {
			c := newHandlerTestController(t, tc.classes)
			if got, reason := c.podNeedsWork(tc.pod); got != tc.want {
				t.Errorf("podNeedsWork: expected %v, got %v (%s)", tc.want, got, reason)
			}
		})
	}
}

// newHandlerTestController builds a controller whose caches hold the
// classes (nil classes: extended resources off).
func newHandlerTestController(t *testing.T, classes []*resourcev1.DeviceClass) *Controller {
	_, ctx := ktesting.NewTestContext(t)
	kubeClient := kubefake.NewClientset()
	resourceClient := resourcefake.NewSimpleClientset()
	kubeInformers := informers.NewSharedInformerFactory(kubeClient, 0)
	resourceInformers := resourceinformers.NewSharedInformerFactory(resourceClient, 0)
	options := Options{}
	if classes != nil {
		options.Classes = resourceInformers.Resource().V1().DeviceClasses()
		for _, class := range classes {
			mustAdd(t, options.Classes.Informer().GetStore(), class)
		}
	}
	c, err := NewControllerWithOptions(klog.FromContext(ctx), kubeClient, resourceClient, kubeInformers.Core().V1().Pods(),
		resourceInformers.Resource().V1().ResourceClaims(), resourceInformers.Resource().V1().ResourceClaimTemplates(), options)
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	return c
}
