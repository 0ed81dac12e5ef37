package resourceclaim

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcefake "github.com/draplane/draplane/generated/clientset/versioned/fake"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions"
	"github.com/draplane/draplane/internal/controllers/podmode"
	"github.com/draplane/draplane/internal/features"
	"github.com/draplane/draplane/internal/podclaims"
	"github.com/draplane/draplane/internal/testing/apitest"
)

const testNamespace = "default"

var (
	claimsResource = schema.GroupVersionResource{Group: "resource.draplane.dev", Version: "v1", Resource: "resourceclaims"}
)

// --- object builders -------------------------------------------------

type podOption func(*corev1.Pod)

func makePod(name string, uid types.UID, options ...podOption) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, UID: uid},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "ctr", Image: "busybox"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	for _, option := range options {
		option(pod)
	}
	return pod
}

func withTemplateClaim(podClaimName, templateName string) podOption {
	return func(pod *corev1.Pod) {
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: podClaimName, ResourceClaimTemplateName: &templateName})
	}
}

func withSharedClaim(podClaimName, claimName string) podOption {
	return func(pod *corev1.Pod) {
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: podClaimName, ResourceClaimName: &claimName})
	}
}

func withClaimStatus(podClaimName, claimName string) podOption {
	return func(pod *corev1.Pod) {
		pod.Status.ResourceClaimStatuses = append(pod.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: podClaimName, ResourceClaimName: &claimName})
	}
}

func withPhase(phase corev1.PodPhase) podOption {
	return func(pod *corev1.Pod) { pod.Status.Phase = phase }
}

func withNodeName(node string) podOption {
	return func(pod *corev1.Pod) { pod.Spec.NodeName = node }
}

func withPodDeletion() podOption {
	return func(pod *corev1.Pod) {
		now := metav1.Now()
		pod.DeletionTimestamp = &now
	}
}

type claimOption func(*resourcev1.ResourceClaim)

func makeClaim(name string, options ...claimOption) *resourcev1.ResourceClaim {
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, UID: types.UID("uid-" + name), ResourceVersion: "5"},
		Spec:       testClaimSpec(),
	}
	for _, option := range options {
		option(claim)
	}
	return claim
}

func generatedFor(pod *corev1.Pod, podClaimName string) claimOption {
	return func(claim *resourcev1.ResourceClaim) {
		isTrue := true
		claim.Annotations = map[string]string{resourceapi.PodClaimNameAnnotation: podClaimName}
		claim.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
			Controller: &isTrue, BlockOwnerDeletion: &isTrue,
		}}
	}
}

func allocated() claimOption {
	return func(claim *resourcev1.ResourceClaim) {
		claim.Finalizers = append(claim.Finalizers, resourceapi.Finalizer)
		claim.Status.Allocation = &resourcev1.AllocationResult{
			Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
				Request: "gpu", Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-0",
			}}},
		}
	}
}

// allocatedFor limits the allocation to nodes: by name, or with
// matchExpressions on labels for "label:<key>=<value>".
func allocatedFor(node string) claimOption {
	return func(claim *resourcev1.ResourceClaim) {
		allocated()(claim)
		term := corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}
		if label, ok := strings.CutPrefix(node, "label:"); ok {
			key, value, _ := strings.Cut(label, "=")
			term = corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}}}
		}
		claim.Status.Allocation.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term}}
	}
}

// protected: the delete protection alone, as a claim made for a pod
// has it before it is allocated.
func protected() claimOption {
	return func(claim *resourcev1.ResourceClaim) {
		claim.Finalizers = append(claim.Finalizers, resourceapi.Finalizer)
	}
}

func deallocated() claimOption {
	return func(claim *resourcev1.ResourceClaim) {
		claim.Finalizers = nil
		claim.Status.Allocation = nil
	}
}

func reservedFor(pods ...*corev1.Pod) claimOption {
	return func(claim *resourcev1.ResourceClaim) {
		for _, pod := range pods {
			claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: pod.UID})
		}
	}
}

func reservedForConsumer(consumer resourcev1.ResourceClaimConsumerReference) claimOption {
	return func(claim *resourcev1.ResourceClaim) {
		claim.Status.ReservedFor = append(claim.Status.ReservedFor, consumer)
	}
}

func withClaimDeletion() claimOption {
	return func(claim *resourcev1.ResourceClaim) {
		now := metav1.Now()
		claim.DeletionTimestamp = &now
	}
}

func withResourceVersion(rv string) claimOption {
	return func(claim *resourcev1.ResourceClaim) { claim.ResourceVersion = rv }
}

func testClaimSpec() resourcev1.ResourceClaimSpec {
	return resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
		Name:    "gpu",
		Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com"},
	}}}}
}

func makeTemplate(name string) *resourcev1.ResourceClaimTemplate {
	return &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, UID: types.UID("uid-" + name)},
		Spec: resourcev1.ResourceClaimTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{
				Labels:      map[string]string{"app": "inference"},
				Annotations: map[string]string{"team": "ml"},
			},
			Spec: testClaimSpec(),
		},
	}
}

// expectedGenerated is the claim that the controller generates from
// makeTemplate for a pod claim, with the name that the fake server gives
// the n-th created claim. It is protected against deletion from the
// start, so that its allocation needs no update of its own.
func expectedGenerated(pod *corev1.Pod, podClaimName string, n int) *resourcev1.ResourceClaim {
	return expectedFromTemplate(claimGenerateName(pod.Name, podClaimName), generatedFor(pod, podClaimName), n)
}

// expectedFromTemplate is the claim generated from makeTemplate with
// generateName for the owner that generatedBy sets.
func expectedFromTemplate(generateName string, generatedBy claimOption, n int) *resourcev1.ResourceClaim {
	claim := makeClaim(generatedName(generateName, n), generatedBy)
	claim.GenerateName = generateName
	claim.UID = ""
	claim.Finalizers = []string{resourceapi.Finalizer}
	claim.Labels = map[string]string{"app": "inference"}
	claim.Annotations["team"] = "ml"
	return claim
}

func generatedName(generateName string, n int) string {
	return fmt.Sprintf("%sx%04d", generateName, n)
}

// --- fake server behaviour -------------------------------------------

// serverLikeClaims makes the fake resource client behave like the real
// server where the controller relies on it: generateName produces a
// name (a counter instead of random characters) and updates with a
// stale resourceVersion fail with a conflict.
func serverLikeClaims(client *resourcefake.Clientset) {
	created := 0
	nextRV := 100
	client.PrependReactor("create", "resourceclaims", func(action k8stesting.Action) (bool, runtime.Object, error) {
		claim := action.(k8stesting.CreateAction).GetObject().(*resourcev1.ResourceClaim)
		if claim.Name == "" && claim.GenerateName != "" {
			created++
			claim.Name = generatedName(claim.GenerateName, created)
		}
		nextRV++
		claim.ResourceVersion = strconv.Itoa(nextRV)
		return false, nil, nil
	})
	apitest.UpdateConflicts(client, claimsResource, func() string {
		nextRV++
		return strconv.Itoa(nextRV)
	})
}

// finalizersHonoured makes deletion of claims work as on the server: a
// claim with finalizers only gets its deletionTimestamp, and goes once an
// update removes the last finalizer.
func finalizersHonoured(client *resourcefake.Clientset) {
	client.PrependReactor("delete", "resourceclaims", func(action k8stesting.Action) (bool, runtime.Object, error) {
		deleteAction := action.(k8stesting.DeleteAction)
		stored, err := client.Tracker().Get(claimsResource, deleteAction.GetNamespace(), deleteAction.GetName())
		if err != nil {
			return true, nil, err
		}
		claim := stored.(*resourcev1.ResourceClaim)
		if len(claim.Finalizers) == 0 {
			return false, nil, nil
		}
		claim = claim.DeepCopy()
		if claim.DeletionTimestamp == nil {
			now := metav1.Now()
			claim.DeletionTimestamp = &now
		}
		return true, claim, client.Tracker().Update(claimsResource, claim, claim.Namespace)
	})
	client.PrependReactor("update", "resourceclaims", func(action k8stesting.Action) (bool, runtime.Object, error) {
		claim := action.(k8stesting.UpdateAction).GetObject().(*resourcev1.ResourceClaim)
		if claim.DeletionTimestamp == nil || len(claim.Finalizers) > 0 {
			return false, nil, nil
		}
		return true, claim, client.Tracker().Delete(claimsResource, claim.Namespace, claim.Name)
	})
}

// --- test runner -----------------------------------------------------

type testCase struct {
	// key is the work item; several keys are synced in order.
	keys []string
	// pods are in the informer and on the server.
	pods []*corev1.Pod
	// serverOnlyPods exist on the server, the informer hasn't seen them.
	serverOnlyPods []*corev1.Pod
	// claims are in the informer and, unless replaced by serverClaims,
	// on the server.
	claims []*resourcev1.ResourceClaim
	// serverClaims replace or add to claims on the server only.
	serverClaims []*resourcev1.ResourceClaim
	// createdClaims are on the server and in the mutation cache, as if
	// the controller had created them and the informer lagged behind.
	createdClaims []*resourcev1.ResourceClaim
	templates     []*resourcev1.ResourceClaimTemplate
	// deletedPods were reported deleted by the informer.
	deletedPods []types.UID
	// reactors install injected failures.
	reactors func(*kubefake.Clientset, *resourcefake.Clientset)
	// beforeSync, if set, runs before the sync of keys[i] and may change
	// what the informers have seen.
	beforeSync func(t *testing.T, i int, env *testEnv)

	// expectedErrors, one per key: "" for success, else a substring of
	// the error.
	expectedErrors []string
	expectedClaims []*resourcev1.ResourceClaim
	// expectedStatuses maps pod name to status.resourceClaimStatuses;
	// pods not listed must have the status they started with.
	expectedStatuses map[string][]corev1.PodResourceClaimStatus
	// expectedEvents are prefixes ("<type> <reason>") of the events.
	expectedEvents []string
	// expectedCreates counts create attempts by result.
	expectedCreates map[string]int
	// expectNoPodGets says that no pod may be fetched from the server.
	expectNoPodGets bool
	// mode of the controller; standalone when nil.
	mode podmode.Mode
	// podGroups are in the informer and on the server; when set, the
	// controller acts on group claims (the gates are on).
	podGroups []*schedulingv1beta1.PodGroup
	// expectedGroupStatuses maps PodGroup name to its
	// status.resourceClaimStatuses; groups not listed keep theirs.
	expectedGroupStatuses map[string][]schedulingv1beta1.PodGroupResourceClaimStatus
	// expectedAnnotatedStatuses maps pod name to the generated claims in
	// its claim-statuses annotation (aggregated mode).
	expectedAnnotatedStatuses map[string][]corev1.PodResourceClaimStatus
	// classes, when not nil, turn on claims for extended resources.
	classes []*resourcev1.DeviceClass
	// expectedExtendedStatuses maps pod name to
	// status.extendedResourceClaimStatus; pods not listed must have the
	// one they started with.
	expectedExtendedStatuses map[string]*corev1.PodExtendedResourceClaimStatus
	// extendedOnly sets Options.ExtendedResourcesOnly, without a
	// template informer.
	extendedOnly bool
}

func TestSync(t *testing.T) {
	podA := makePod("pod-a", "uid-a", withTemplateClaim("gpu", "gpu-template"))
	podB := makePod("pod-b", "uid-b", withTemplateClaim("gpu", "gpu-template"), withTemplateClaim("nic", "nic-template"))
	podAWithStatus := makePod("pod-a", "uid-a", withTemplateClaim("gpu", "gpu-template"), withClaimStatus("gpu", "pod-a-gpu-abcde"))
	claimA := makeClaim("pod-a-gpu-abcde", generatedFor(podA, "gpu"))
	createdA := expectedGenerated(podA, "gpu", 1)
	gpuTemplate := makeTemplate("gpu-template")
	nicTemplate := makeTemplate("nic-template")

	longPod := makePod(strings.Repeat("p", 60), "uid-long", withTemplateClaim(strings.Repeat("c", 30), "gpu-template"))

	boundPod := makePod("pod-bound", "uid-bound", withNodeName("node-1"), withPhase(corev1.PodRunning), withSharedClaim("gpu", "shared"))
	boundPodTemplate := makePod("pod-bound", "uid-bound", withNodeName("node-1"), withPhase(corev1.PodRunning),
		withTemplateClaim("gpu", "gpu-template"), withClaimStatus("gpu", "pod-bound-gpu-abcde"))

	runningPod := func(name string, uid types.UID) *corev1.Pod {
		return makePod(name, uid, withNodeName("node-1"), withPhase(corev1.PodRunning), withSharedClaim("gpu", "shared"))
	}
	pod1, pod2, pod3 := runningPod("pod-1", "uid-1"), runningPod("pod-2", "uid-2"), runningPod("pod-3", "uid-3")
	pod1Done := makePod("pod-1", "uid-1", withNodeName("node-1"), withPhase(corev1.PodSucceeded), withSharedClaim("gpu", "shared"))
	pod1Failed := makePod("pod-1", "uid-1", withNodeName("node-1"), withPhase(corev1.PodFailed), withSharedClaim("gpu", "shared"))
	pod1Replaced := makePod("pod-1", "uid-1-new", withNodeName("node-1"), withPhase(corev1.PodRunning), withSharedClaim("gpu", "shared"))
	pod1DeletedUnbound := makePod("pod-1", "uid-1", withPodDeletion(), withSharedClaim("gpu", "shared"))
	pod1DeletedBound := makePod("pod-1", "uid-1", withPodDeletion(), withNodeName("node-1"), withPhase(corev1.PodRunning), withSharedClaim("gpu", "shared"))
	podADone := makePod("pod-a", "uid-a", withNodeName("node-1"), withPhase(corev1.PodSucceeded),
		withTemplateClaim("gpu", "gpu-template"), withClaimStatus("gpu", "pod-a-gpu-abcde"))
	podARunning := makePod("pod-a", "uid-a", withNodeName("node-1"), withPhase(corev1.PodRunning),
		withTemplateClaim("gpu", "gpu-template"), withClaimStatus("gpu", "pod-a-gpu-abcde"))
	otherConsumer := resourcev1.ResourceClaimConsumerReference{APIGroup: "example.com", Resource: "jobsets", Name: "training", UID: "uid-jobset"}

	fullClaim := makeClaim("shared", allocated())
	for i := range resourceapi.ResourceClaimReservedForMaxSize {
		fullClaim.Status.ReservedFor = append(fullClaim.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{
			Resource: "pods", Name: fmt.Sprintf("other-%d", i), UID: types.UID(fmt.Sprintf("uid-other-%d", i)),
		})
	}

	podKey := func(pod *corev1.Pod) string { return podKeyPrefix + pod.Namespace + "/" + pod.Name }
	claimKey := func(name string) string { return claimKeyPrefix + testNamespace + "/" + name }
	status := func(entries ...string) []corev1.PodResourceClaimStatus {
		var statuses []corev1.PodResourceClaimStatus
		for i := 0; i < len(entries); i += 2 {
			name := entries[i+1]
			statuses = append(statuses, corev1.PodResourceClaimStatus{Name: entries[i], ResourceClaimName: &name})
		}
		return statuses
	}

	tests := map[string]testCase{
		"create": {
			keys:             []string{podKey(podA)},
			pods:             []*corev1.Pod{podA},
			templates:        []*resourcev1.ResourceClaimTemplate{gpuTemplate},
			expectedClaims:   []*resourcev1.ResourceClaim{createdA},
			expectedStatuses: map[string][]corev1.PodResourceClaimStatus{"pod-a": status("gpu", createdA.Name)},
			expectedCreates:  map[string]int{createSuccess: 1},
		},
		"create two": {
			keys:      []string{podKey(podB)},
			pods:      []*corev1.Pod{podB},
			templates: []*resourcev1.ResourceClaimTemplate{gpuTemplate, nicTemplate},
			expectedClaims: []*resourcev1.ResourceClaim{
				expectedGenerated(podB, "gpu", 1),
				expectedGenerated(podB, "nic", 2),
			},
			expectedStatuses: map[string][]corev1.PodResourceClaimStatus{"pod-b": status(
				"gpu", expectedGenerated(podB, "gpu", 1).Name,
				"nic", expectedGenerated(podB, "nic", 2).Name,
			)},
			expectedCreates: map[string]int{createSuccess: 2},
		},
		"template missing": {
			keys:           []string{podKey(podA)},
			pods:           []*corev1.Pod{podA},
			expectedErrors: []string{`"gpu-template" not found`},
			expectedEvents: []string{"Warning " + ReasonFailedClaimCreation},
		},
		"one template missing, other claim still recorded": {
			keys:           []string{podKey(podB)},
			pods:           []*corev1.Pod{podB},
			templates:      []*resourcev1.ResourceClaimTemplate{gpuTemplate},
			expectedErrors: []string{`"nic-template" not found`},
			expectedClaims: []*resourcev1.ResourceClaim{expectedGenerated(podB, "gpu", 1)},
			expectedStatuses: map[string][]corev1.PodResourceClaimStatus{"pod-b": status(
				"gpu", expectedGenerated(podB, "gpu", 1).Name,
			)},
			expectedEvents:  []string{"Warning " + ReasonFailedClaimCreation},
			expectedCreates: map[string]int{createSuccess: 1},
		},
		"claim generated later keeps the earlier one in the status": {
			keys:      []string{podKey(podB), podKey(podB)},
			pods:      []*corev1.Pod{podB},
			templates: []*resourcev1.ResourceClaimTemplate{gpuTemplate},
			beforeSync: func(t *testing.T, i int, env *testEnv) {
				if i == 1 {
					// The informer has seen the first status write, and
					// the missing template appears.
					env.catchUpPod(t, podB.Name)
					mustAdd(t, env.templateInformer.GetStore(), nicTemplate)
				}
			},
			expectedErrors: []string{`"nic-template" not found`, ""},
			expectedClaims: []*resourcev1.ResourceClaim{
				expectedGenerated(podB, "gpu", 1),
				expectedGenerated(podB, "nic", 2),
			},
			expectedStatuses: map[string][]corev1.PodResourceClaimStatus{"pod-b": status(
				"gpu", expectedGenerated(podB, "gpu", 1).Name,
				"nic", expectedGenerated(podB, "nic", 2).Name,
			)},
			expectedEvents:  []string{"Warning " + ReasonFailedClaimCreation},
			expectedCreates: map[string]int{createSuccess: 2},
		},
		"create fails": {
			keys:      []string{podKey(podA)},
			pods:      []*corev1.Pod{podA},
			templates: []*resourcev1.ResourceClaimTemplate{gpuTemplate},
			reactors: func(_ *kubefake.Clientset, resource *resourcefake.Clientset) {
				resource.PrependReactor("create", "resourceclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(claimsResource.GroupResource(), "", errors.New("quota exceeded"))
				})
			},
			expectedErrors:  []string{"quota exceeded"},
			expectedEvents:  []string{"Warning " + ReasonFailedClaimCreation},
			expectedCreates: map[string]int{createFailure: 1},
		},
		"nothing to do": {
			keys:           []string{podKey(podAWithStatus)},
			pods:           []*corev1.Pod{podAWithStatus},
			claims:         []*resourcev1.ResourceClaim{claimA},
			templates:      []*resourcev1.ResourceClaimTemplate{gpuTemplate},
			expectedClaims: []*resourcev1.ResourceClaim{claimA},
		},
		"recreate deleted claim": {
			keys:             []string{podKey(podAWithStatus)},
			pods:             []*corev1.Pod{podAWithStatus},
			templates:        []*resourcev1.ResourceClaimTemplate{gpuTemplate},
			expectedClaims:   []*resourcev1.ResourceClaim{createdA},
			expectedStatuses: map[string][]corev1.PodResourceClaimStatus{"pod-a": status("gpu", createdA.Name)},
			expectedCreates:  map[string]int{createSuccess: 1},
		},
		"claim named in the status but not yet seen by the informer is not generated again": {
			keys:           []string{podKey(podAWithStatus)},
			pods:           []*corev1.Pod{podAWithStatus},
			serverClaims:   []*resourcev1.ResourceClaim{claimA},
			templates:      []*resourcev1.ResourceClaimTemplate{gpuTemplate},
			expectedClaims: []*resourcev1.ResourceClaim{claimA},
		},
		"replace claim owned by someone else": {
			keys:             []string{podKey(podAWithStatus)},
			pods:             []*corev1.Pod{podAWithStatus},
			claims:           []*resourcev1.ResourceClaim{makeClaim("pod-a-gpu-abcde", generatedFor(makePod("pod-a", "uid-old"), "gpu"))},
			templates:        []*resourcev1.ResourceClaimTemplate{gpuTemplate},
			expectedClaims:   []*resourcev1.ResourceClaim{createdA, makeClaim("pod-a-gpu-abcde", generatedFor(makePod("pod-a", "uid-old"), "gpu"))},
			expectedStatuses: map[string][]corev1.PodResourceClaimStatus{"pod-a": status("gpu", createdA.Name)},
			expectedCreates:  map[string]int{createSuccess: 1},
		},
		"find created claim in cache": {
			keys:             []string{podKey(podA)},
			pods:             []*corev1.Pod{podA},
			createdClaims:    []*resourcev1.ResourceClaim{claimA},
			templates:        []*resourcev1.ResourceClaimTemplate{gpuTemplate},
			expectedClaims:   []*resourcev1.ResourceClaim{claimA},
			expectedStatuses: map[string][]corev1.PodResourceClaimStatus{"pod-a": status("gpu", claimA.Name)},
		},
		"adopt claim from informer": {
			keys:             []string{podKey(podA)},
			pods:             []*corev1.Pod{podA},
			claims:           []*resourcev1.ResourceClaim{claimA},
			templates:        []*resourcev1.ResourceClaimTemplate{gpuTemplate},
			expectedClaims:   []*resourcev1.ResourceClaim{claimA},
			expectedStatuses: map[string][]corev1.PodResourceClaimStatus{"pod-a": status("gpu", claimA.Name)},
		},
		"do not adopt claim of earlier pod instance": {
			keys:             []string{podKey(podA)},
			pods:             []*corev1.Pod{podA},
			claims:           []*resourcev1.ResourceClaim{makeClaim("pod-a-gpu-abcde", generatedFor(makePod("pod-a", "uid-old"), "gpu"))},
			templates:        []*resourcev1.ResourceClaimTemplate{gpuTemplate},
			expectedClaims:   []*resourcev1.ResourceClaim{createdA, makeClaim("pod-a-gpu-abcde", generatedFor(makePod("pod-a", "uid-old"), "gpu"))},
			expectedStatuses: map[string][]corev1.PodResourceClaimStatus{"pod-a": status("gpu", createdA.Name)},
			expectedCreates:  map[string]int{createSuccess: 1},
		},
		"adopt after failed status write": {
			keys:      []string{podKey(podA), podKey(podA)},
			pods:      []*corev1.Pod{podA},
			templates: []*resourcev1.ResourceClaimTemplate{gpuTemplate},
			reactors: func(kube *kubefake.Clientset, _ *resourcefake.Clientset) {
				failed := false
				kube.PrependReactor("update", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
					if action.GetSubresource() != "status" || failed {
						return false, nil, nil
					}
					failed = true
					return true, nil, apierrors.NewInternalError(errors.New("injected status failure"))
				})
			},
			expectedErrors:   []string{"injected status failure", ""},
			expectedClaims:   []*resourcev1.ResourceClaim{createdA},
			expectedStatuses: map[string][]corev1.PodResourceClaimStatus{"pod-a": status("gpu", createdA.Name)},
			expectedEvents:   []string{"Warning " + ReasonFailedPodStatusUpdate},
			expectedCreates:  map[string]int{createSuccess: 1},
		},
		"long names shortened": {
			keys:      []string{podKey(longPod)},
			pods:      []*corev1.Pod{longPod},
			templates: []*resourcev1.ResourceClaimTemplate{gpuTemplate},
			expectedClaims: []*resourcev1.ResourceClaim{
				expectedGenerated(longPod, strings.Repeat("c", 30), 1),
			},
			expectedStatuses: map[string][]corev1.PodResourceClaimStatus{longPod.Name: status(
				strings.Repeat("c", 30), generatedName(strings.Repeat("p", 28)+"-"+strings.Repeat("c", 28)+"-", 1),
			)},
			expectedCreates: map[string]int{createSuccess: 1},
		},
		"no claims for done pod": {
			keys:      []string{podKey(podA)},
			pods:      []*corev1.Pod{makePod("pod-a", "uid-a", withTemplateClaim("gpu", "gpu-template"), withPhase(corev1.PodSucceeded))},
			templates: []*resourcev1.ResourceClaimTemplate{gpuTemplate},
		},
		"no claims for deleted pod": {
			keys:      []string{podKey(podA)},
			pods:      []*corev1.Pod{makePod("pod-a", "uid-a", withTemplateClaim("gpu", "gpu-template"), withPodDeletion(), withNodeName("node-1"))},
			templates: []*resourcev1.ResourceClaimTemplate{gpuTemplate},
		},
		"pod gone": {
			keys:      []string{podKey(podA)},
			templates: []*resourcev1.ResourceClaimTemplate{gpuTemplate},
		},
		"nodeName preset: reserve allocated shared claim": {
			keys:           []string{podKey(boundPod)},
			pods:           []*corev1.Pod{boundPod},
			claims:         []*resourcev1.ResourceClaim{makeClaim("shared", allocated())},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedFor(boundPod))},
		},
		"nodeName preset: reserve allocated generated claim": {
			keys:           []string{podKey(boundPodTemplate)},
			pods:           []*corev1.Pod{boundPodTemplate},
			claims:         []*resourcev1.ResourceClaim{makeClaim("pod-bound-gpu-abcde", generatedFor(boundPodTemplate, "gpu"), allocated(), reservedFor(pod2))},
			templates:      []*resourcev1.ResourceClaimTemplate{gpuTemplate},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("pod-bound-gpu-abcde", generatedFor(boundPodTemplate, "gpu"), allocated(), reservedFor(pod2, boundPodTemplate))},
		},
		"nodeName preset: reserve claim allocated for the pod's node by name": {
			keys:           []string{podKey(boundPod)},
			pods:           []*corev1.Pod{boundPod},
			claims:         []*resourcev1.ResourceClaim{makeClaim("shared", allocatedFor("node-1"))},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("shared", allocatedFor("node-1"), reservedFor(boundPod))},
		},
		"nodeName preset: claim allocated for another node is not reserved": {
			keys:           []string{podKey(boundPod)},
			pods:           []*corev1.Pod{boundPod},
			claims:         []*resourcev1.ResourceClaim{makeClaim("shared", allocatedFor("node-2"), reservedFor(pod2))},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("shared", allocatedFor("node-2"), reservedFor(pod2))},
		},
		"nodeName preset: claim allocated by node labels is left to the allocation controller": {
			keys:           []string{podKey(boundPod)},
			pods:           []*corev1.Pod{boundPod},
			claims:         []*resourcev1.ResourceClaim{makeClaim("shared", allocatedFor("label:zone=a"))},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("shared", allocatedFor("label:zone=a"))},
		},
		"template refused by the API: event, no retry until something changes": {
			keys:      []string{podKey(podA)},
			pods:      []*corev1.Pod{podA},
			templates: []*resourcev1.ResourceClaimTemplate{gpuTemplate},
			reactors: func(_ *kubefake.Clientset, resource *resourcefake.Clientset) {
				resource.PrependReactor("create", "resourceclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(claimsResource.GroupResource(), "", errors.New("admin access requires the label"))
				})
			},
			expectedErrors:  []string{errWaiting.Error()},
			expectedEvents:  []string{"Warning " + ReasonFailedClaimCreation},
			expectedCreates: map[string]int{createFailure: 1},
		},
		"nodeName preset: claim not allocated yet": {
			keys:           []string{podKey(boundPod)},
			pods:           []*corev1.Pod{boundPod},
			claims:         []*resourcev1.ResourceClaim{makeClaim("shared")},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("shared")},
		},
		"nodeName preset: already reserved": {
			keys:           []string{podKey(boundPod)},
			pods:           []*corev1.Pod{boundPod},
			claims:         []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedFor(boundPod))},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedFor(boundPod))},
		},
		"nodeName preset: reservedFor full": {
			keys:           []string{podKey(boundPod)},
			pods:           []*corev1.Pod{boundPod},
			claims:         []*resourcev1.ResourceClaim{fullClaim},
			expectedClaims: []*resourcev1.ResourceClaim{fullClaim},
		},
		"nodeName preset: claim being deleted takes no new consumers": {
			keys:           []string{podKey(boundPod)},
			pods:           []*corev1.Pod{boundPod},
			claims:         []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), withClaimDeletion())},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), withClaimDeletion())},
		},
		"nodeName preset: reservation fails": {
			keys:   []string{podKey(boundPod)},
			pods:   []*corev1.Pod{boundPod},
			claims: []*resourcev1.ResourceClaim{makeClaim("shared", allocated())},
			reactors: func(_ *kubefake.Clientset, resource *resourcefake.Clientset) {
				resource.PrependReactor("patch", "resourceclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewInvalid(resourcev1.SchemeGroupVersion.WithKind("ResourceClaim").GroupKind(), "shared", nil)
				})
			},
			expectedErrors: []string{"reserve claim default/shared for pod default/pod-bound"},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("shared", allocated())},
			expectedEvents: []string{"Warning " + ReasonFailedClaimReservation},
		},
		"clear reservedFor when done": {
			keys:           []string{claimKey("shared")},
			pods:           []*corev1.Pod{pod1Done},
			claims:         []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedFor(pod1))},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("shared", deallocated())},
		},
		"clear reservedFor when failed": {
			keys:           []string{claimKey("shared")},
			pods:           []*corev1.Pod{pod1Failed},
			claims:         []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedFor(pod1))},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("shared", deallocated())},
		},
		"clear reservedFor when replaced": {
			keys:           []string{claimKey("shared")},
			pods:           []*corev1.Pod{pod1Replaced},
			claims:         []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedFor(pod1))},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("shared", deallocated())},
		},
		"clear reservedFor when deleted before bound": {
			keys:           []string{claimKey("shared")},
			pods:           []*corev1.Pod{pod1DeletedUnbound},
			claims:         []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedFor(pod1))},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("shared", deallocated())},
		},
		"keep reservedFor of bound pod being deleted": {
			keys:           []string{claimKey("shared")},
			pods:           []*corev1.Pod{pod1DeletedBound},
			claims:         []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedFor(pod1))},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedFor(pod1))},
		},
		"clear reservedFor of pod known deleted without asking": {
			keys:            []string{claimKey("shared")},
			deletedPods:     []types.UID{pod1.UID},
			claims:          []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedFor(pod1))},
			expectedClaims:  []*resourcev1.ResourceClaim{makeClaim("shared", deallocated())},
			expectNoPodGets: true,
		},
		"clear reservedFor of pod gone from server": {
			keys:           []string{claimKey("shared")},
			claims:         []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedFor(pod1))},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("shared", deallocated())},
		},
		"keep reservedFor of pod the informer does not know yet": {
			keys:           []string{claimKey("shared")},
			serverOnlyPods: []*corev1.Pod{pod1},
			claims:         []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedFor(pod1))},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedFor(pod1))},
		},
		"keep reservedFor of new pod instance the informer knows only as the old one": {
			keys:           []string{claimKey("shared")},
			pods:           []*corev1.Pod{pod1},
			serverOnlyPods: []*corev1.Pod{pod1Replaced},
			claims:         []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedFor(pod1Replaced))},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedFor(pod1Replaced))},
		},
		"clear reservedFor of finished pod the informer does not know yet": {
			keys:           []string{claimKey("shared")},
			serverOnlyPods: []*corev1.Pod{pod1Done},
			claims:         []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedFor(pod1, pod2))},
			pods:           []*corev1.Pod{pod2},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedFor(pod2))},
		},
		"pod lookup fails: keep everything, retry": {
			keys:   []string{claimKey("shared")},
			claims: []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedFor(pod1))},
			reactors: func(kube *kubefake.Clientset, _ *resourcefake.Clientset) {
				kube.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewServiceUnavailable("etcd is down")
				})
			},
			expectedErrors: []string{"etcd is down"},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedFor(pod1))},
		},
		"keep non-pod consumers": {
			keys:           []string{claimKey("shared")},
			pods:           []*corev1.Pod{pod1Done},
			claims:         []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedFor(pod1), reservedForConsumer(otherConsumer))},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedForConsumer(otherConsumer))},
		},
		"shared claim: one of three pods finishes": {
			keys:           []string{claimKey("shared")},
			pods:           []*corev1.Pod{pod1, makePod("pod-2", "uid-2", withNodeName("node-1"), withPhase(corev1.PodSucceeded), withSharedClaim("gpu", "shared")), pod3},
			claims:         []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedFor(pod1, pod2, pod3))},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedFor(pod1, pod3))},
		},
		"concurrent addition conflicts instead of being lost": {
			keys:           []string{claimKey("shared")},
			pods:           []*corev1.Pod{pod1Done, pod2, pod3},
			claims:         []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedFor(pod1, pod2))},
			serverClaims:   []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedFor(pod1, pod2, pod3), withResourceVersion("6"))},
			expectedErrors: []string{"the object has been modified"},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), reservedFor(pod1, pod2, pod3), withResourceVersion("6"))},
		},
		"keep allocated claim that waits for its first consumer": {
			keys:           []string{claimKey("shared")},
			claims:         []*resourcev1.ResourceClaim{makeClaim("shared", allocated())},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("shared", allocated())},
		},
		"release deleted unused claim": {
			keys:           []string{claimKey("shared")},
			claims:         []*resourcev1.ResourceClaim{makeClaim("shared", allocated(), withClaimDeletion())},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("shared", deallocated(), withClaimDeletion())},
		},
		"delete generated claim when pod done": {
			keys:   []string{claimKey("pod-a-gpu-abcde")},
			pods:   []*corev1.Pod{podADone},
			claims: []*resourcev1.ResourceClaim{makeClaim("pod-a-gpu-abcde", generatedFor(podA, "gpu"), allocated(), reservedFor(podA))},
		},
		"delete unreserved generated claim when pod done": {
			keys:   []string{claimKey("pod-a-gpu-abcde")},
			pods:   []*corev1.Pod{podADone},
			claims: []*resourcev1.ResourceClaim{claimA},
		},
		"delete generated claim when pod gone": {
			keys:   []string{claimKey("pod-a-gpu-abcde")},
			claims: []*resourcev1.ResourceClaim{claimA},
		},
		"keep generated claim of running pod": {
			keys:           []string{claimKey("pod-a-gpu-abcde")},
			pods:           []*corev1.Pod{podARunning},
			claims:         []*resourcev1.ResourceClaim{makeClaim("pod-a-gpu-abcde", generatedFor(podA, "gpu"), allocated(), reservedFor(podA))},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("pod-a-gpu-abcde", generatedFor(podA, "gpu"), allocated(), reservedFor(podA))},
		},
		"keep generated claim of pod the informer does not know yet": {
			keys:           []string{claimKey("pod-a-gpu-abcde")},
			serverOnlyPods: []*corev1.Pod{podA},
			claims:         []*resourcev1.ResourceClaim{claimA},
			expectedClaims: []*resourcev1.ResourceClaim{claimA},
		},
		"release deleted generated claim that was never allocated": {
			keys:           []string{claimKey("pod-a-gpu-abcde")},
			pods:           []*corev1.Pod{podAWithStatus},
			claims:         []*resourcev1.ResourceClaim{makeClaim("pod-a-gpu-abcde", generatedFor(podA, "gpu"), protected(), withClaimDeletion())},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("pod-a-gpu-abcde", generatedFor(podA, "gpu"), withClaimDeletion())},
		},
		"generated claim of pod gone before allocation: deleted, then released": {
			keys:     []string{claimKey("pod-a-gpu-abcde"), claimKey("pod-a-gpu-abcde")},
			claims:   []*resourcev1.ResourceClaim{makeClaim("pod-a-gpu-abcde", generatedFor(podA, "gpu"), protected())},
			reactors: func(_ *kubefake.Clientset, resource *resourcefake.Clientset) { finalizersHonoured(resource) },
			beforeSync: func(t *testing.T, i int, env *testEnv) {
				if i == 1 {
					env.catchUpClaim(t, "pod-a-gpu-abcde")
				}
			},
		},
		"claim gone": {
			keys: []string{claimKey("shared")},
		},
		"bad key": {
			keys:           []string{"node:default/x"},
			expectedErrors: []string{"unknown prefix"},
		},
	}

	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			runSyncTest(t, tc)
		})
	}
}

func runSyncTest(t *testing.T, tc testCase) {
	_, ctx := ktesting.NewTestContext(t)
	logger := klog.FromContext(ctx)

	var kubeObjects []runtime.Object
	for _, pod := range append(append([]*corev1.Pod(nil), tc.pods...), tc.serverOnlyPods...) {
		replaced := false
		for i, obj := range kubeObjects {
			if obj.(*corev1.Pod).Name == pod.Name {
				kubeObjects[i] = pod
				replaced = true
			}
		}
		if !replaced {
			kubeObjects = append(kubeObjects, pod)
		}
	}
	serverClaims := map[string]*resourcev1.ResourceClaim{}
	for _, claim := range tc.claims {
		serverClaims[claim.Name] = claim
	}
	for _, claim := range append(append([]*resourcev1.ResourceClaim(nil), tc.serverClaims...), tc.createdClaims...) {
		serverClaims[claim.Name] = claim
	}
	for _, group := range tc.podGroups {
		kubeObjects = append(kubeObjects, group)
	}
	var resourceObjects []runtime.Object
	for _, claim := range serverClaims {
		resourceObjects = append(resourceObjects, claim)
	}
	for _, template := range tc.templates {
		resourceObjects = append(resourceObjects, template)
	}

	kubeClient := kubefake.NewClientset(kubeObjects...)
	// NewSimpleClientset: the field-managed tracker of NewClientset cannot
	// convert our types (its apply schema names them differently from the
	// model names), and the controller needs no apply for claims.
	resourceClient := resourcefake.NewSimpleClientset(resourceObjects...)
	if tc.reactors != nil {
		tc.reactors(kubeClient, resourceClient)
	}
	serverLikeClaims(resourceClient)

	kubeInformers := informers.NewSharedInformerFactory(kubeClient, 0)
	resourceInformers := resourceinformers.NewSharedInformerFactory(resourceClient, 0)
	podInformer := kubeInformers.Core().V1().Pods()
	claimInformer := resourceInformers.Resource().V1().ResourceClaims()
	templateInformer := resourceInformers.Resource().V1().ResourceClaimTemplates()

	options := Options{Mode: tc.mode, ExtendedResourcesOnly: tc.extendedOnly}
	if tc.classes != nil {
		options.Classes = resourceInformers.Resource().V1().DeviceClasses()
		for _, class := range tc.classes {
			mustAdd(t, options.Classes.Informer().GetStore(), class)
		}
	}
	if tc.podGroups != nil {
		featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, featuregatetesting.FeatureOverrides{features.GenericWorkload: true, features.DRAWorkloadResourceClaims: true})
		options.PodGroups = kubeInformers.Scheduling().V1beta1().PodGroups()
		for _, group := range tc.podGroups {
			mustAdd(t, options.PodGroups.Informer().GetStore(), group)
		}
	}
	controllerTemplates := templateInformer
	if tc.extendedOnly {
		controllerTemplates = nil
	}
	c, err := NewControllerWithOptions(logger, kubeClient, resourceClient, podInformer, claimInformer, controllerTemplates, options)
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	recorder := record.NewFakeRecorder(100)
	c.recorder = recorder

	// Fill the informer stores directly: the test decides what the
	// controller has seen.
	for _, pod := range tc.pods {
		mustAdd(t, podInformer.Informer().GetStore(), pod)
	}
	for _, claim := range tc.claims {
		mustAdd(t, claimInformer.Informer().GetStore(), claim)
	}
	for _, template := range tc.templates {
		mustAdd(t, templateInformer.Informer().GetStore(), template)
	}
	for _, claim := range tc.createdClaims {
		c.claimCache.Mutation(claim)
	}
	for _, uid := range tc.deletedPods {
		c.deletedPods.Add(uid)
	}

	createsBefore := createCounts(t)
	kubeClient.ClearActions()

	env := &testEnv{kubeClient: kubeClient, resourceClient: resourceClient, podInformer: podInformer.Informer(), templateInformer: templateInformer.Informer(), claimInformer: claimInformer.Informer()}
	for i, key := range tc.keys {
		if tc.beforeSync != nil {
			tc.beforeSync(t, i, env)
		}
		err := c.sync(ctx, key)
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
	}

	// Claims on the server.
	claimList, err := resourceClient.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list claims: %v", err)
	}
	actualClaims := normalizeClaims(claimList.Items)
	var expectedClaims []resourcev1.ResourceClaim
	for _, claim := range tc.expectedClaims {
		expectedClaims = append(expectedClaims, *claim)
	}
	expectedClaims = normalizeClaims(expectedClaims)
	if diff := cmp.Diff(expectedClaims, actualClaims); diff != "" {
		t.Errorf("claims on the server (-expected, +actual):\n%s", diff)
	}

	// Pod statuses on the server.
	for _, group := range tc.podGroups {
		expected, ok := tc.expectedGroupStatuses[group.Name]
		if !ok {
			expected = group.Status.ResourceClaimStatuses
		}
		actual, err := kubeClient.SchedulingV1beta1().PodGroups(group.Namespace).Get(ctx, group.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get PodGroup %s: %v", group.Name, err)
		}
		if diff := cmp.Diff(expected, actual.Status.ResourceClaimStatuses); diff != "" {
			t.Errorf("status.resourceClaimStatuses of PodGroup %s (-expected, +actual):\n%s", group.Name, diff)
		}
	}
	for _, obj := range kubeObjects {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			continue
		}
		expected, ok := tc.expectedStatuses[pod.Name]
		if !ok {
			expected = pod.Status.ResourceClaimStatuses
		}
		actual, err := kubeClient.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get pod %s: %v", pod.Name, err)
		}
		if diff := cmp.Diff(expected, actual.Status.ResourceClaimStatuses, sortStatuses()); diff != "" {
			t.Errorf("status.resourceClaimStatuses of pod %s (-expected, +actual):\n%s", pod.Name, diff)
		}
		expectedExtended, ok := tc.expectedExtendedStatuses[pod.Name]
		if !ok {
			expectedExtended = pod.Status.ExtendedResourceClaimStatus
		}
		if diff := cmp.Diff(expectedExtended, actual.Status.ExtendedResourceClaimStatus); diff != "" {
			t.Errorf("status.extendedResourceClaimStatus of pod %s (-expected, +actual):\n%s", pod.Name, diff)
		}
		if expected, ok := tc.expectedAnnotatedStatuses[pod.Name]; ok {
			var annotated []corev1.PodResourceClaimStatus
			if value, ok := actual.Annotations[podclaims.ClaimStatusesAnnotation]; ok {
				if err := json.Unmarshal([]byte(value), &annotated); err != nil {
					t.Errorf("annotation %s of pod %s: %v", podclaims.ClaimStatusesAnnotation, pod.Name, err)
				}
			}
			if diff := cmp.Diff(expected, annotated, sortStatuses()); diff != "" {
				t.Errorf("annotation %s of pod %s (-expected, +actual):\n%s", podclaims.ClaimStatusesAnnotation, pod.Name, diff)
			}
		}
	}

	// Events.
	close(recorder.Events)
	var events []string
	for event := range recorder.Events {
		events = append(events, event)
	}
	if len(events) != len(tc.expectedEvents) {
		t.Errorf("expected events %v, got %q", tc.expectedEvents, events)
	} else {
		for i, event := range events {
			if !strings.HasPrefix(event, tc.expectedEvents[i]+" ") {
				t.Errorf("event %d: expected %q..., got %q", i, tc.expectedEvents[i], event)
			}
		}
	}

	// Metrics.
	createsAfter := createCounts(t)
	for _, result := range []string{createSuccess, createFailure} {
		if delta := createsAfter[result] - createsBefore[result]; delta != tc.expectedCreates[result] {
			t.Errorf("claim creates with status %q: expected %d, got %d", result, tc.expectedCreates[result], delta)
		}
	}

	if tc.expectNoPodGets {
		for _, action := range kubeClient.Actions() {
			if action.Matches("get", "pods") {
				t.Errorf("unexpected pod lookup on the server: %v", action)
			}
		}
	}
}

// testEnv gives beforeSync access to the fakes.
type testEnv struct {
	kubeClient       *kubefake.Clientset
	resourceClient   *resourcefake.Clientset
	podInformer      cache.SharedIndexInformer
	templateInformer cache.SharedIndexInformer
	claimInformer    cache.SharedIndexInformer
}

// catchUpClaim copies the claim from the server into the informer.
func (env *testEnv) catchUpClaim(t *testing.T, name string) {
	t.Helper()
	claim, err := env.resourceClient.ResourceV1().ResourceClaims(testNamespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get claim %s: %v", name, err)
	}
	if err := env.claimInformer.GetStore().Update(claim); err != nil {
		t.Fatalf("update claim %s in informer: %v", name, err)
	}
}

// catchUpPod copies the pod from the server into the informer.
func (env *testEnv) catchUpPod(t *testing.T, name string) {
	t.Helper()
	pod, err := env.kubeClient.CoreV1().Pods(testNamespace).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod %s: %v", name, err)
	}
	if err := env.podInformer.GetStore().Update(pod); err != nil {
		t.Fatalf("update pod %s in informer: %v", name, err)
	}
}

func mustAdd(t *testing.T, store cache.Store, obj any) {
	t.Helper()
	if err := store.Add(obj); err != nil {
		t.Fatalf("add to informer store: %v", err)
	}
}

// normalizeClaims sorts claims and removes what the fake server adds and
// the tests don't care about.
func normalizeClaims(claims []resourcev1.ResourceClaim) []resourcev1.ResourceClaim {
	var result []resourcev1.ResourceClaim
	for _, claim := range claims {
		claim := *claim.DeepCopy()
		claim.ManagedFields = nil
		claim.TypeMeta = metav1.TypeMeta{}
		// Only a conflict test pins the version; the others don't
		// care how often the fake server bumped it.
		if claim.ResourceVersion != "6" {
			claim.ResourceVersion = ""
		}
		claim.DeletionTimestamp = normalizeTime(claim.DeletionTimestamp)
		if len(claim.Finalizers) == 0 {
			claim.Finalizers = nil
		}
		if len(claim.Status.ReservedFor) == 0 {
			claim.Status.ReservedFor = nil
		}
		// A strategic merge patch may add in front; the order carries no
		// meaning.
		sort.Slice(claim.Status.ReservedFor, func(i, j int) bool {
			return claim.Status.ReservedFor[i].UID < claim.Status.ReservedFor[j].UID
		})
		result = append(result, claim)
	}
	sort.Slice(result, func(i, j int) bool { return result[i].Name < result[j].Name })
	return result
}

func normalizeTime(t *metav1.Time) *metav1.Time {
	if t == nil {
		return nil
	}
	return &metav1.Time{}
}

func sortStatuses() cmp.Option {
	return cmp.Transformer("sortStatuses", func(in []corev1.PodResourceClaimStatus) []corev1.PodResourceClaimStatus {
		out := append([]corev1.PodResourceClaimStatus(nil), in...)
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		if len(out) == 0 {
			return nil
		}
		return out
	})
}

func createCounts(t *testing.T) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for _, result := range []string{createSuccess, createFailure} {
		value, err := testutil.GetCounterMetricValue(claimCreates.WithLabelValues(result))
		if err != nil {
			t.Fatalf("read metric: %v", err)
		}
		counts[result] = int(value)
	}
	return counts
}
