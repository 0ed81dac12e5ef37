package resourceclaim

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/podclaims"
)

func makeGroup(name string, uid types.UID, claims ...schedulingv1beta1.PodGroupResourceClaim) *schedulingv1beta1.PodGroup {
	return &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace, UID: uid},
		Spec: schedulingv1beta1.PodGroupSpec{
			SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 2}},
			ResourceClaims:   claims,
		},
	}
}

func groupTemplateClaim(name, template string) schedulingv1beta1.PodGroupResourceClaim {
	return schedulingv1beta1.PodGroupResourceClaim{Name: name, ResourceClaimTemplateName: &template}
}

func withGroupClaimStatus(group *schedulingv1beta1.PodGroup, entry, claimName string) *schedulingv1beta1.PodGroup {
	group = group.DeepCopy()
	group.Status.ResourceClaimStatuses = append(group.Status.ResourceClaimStatuses, schedulingv1beta1.PodGroupResourceClaimStatus{Name: entry, ResourceClaimName: &claimName})
	return group
}

func inGroup(group string) podOption {
	return func(pod *corev1.Pod) {
		pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &group}
	}
}

func generatedForGroup(group *schedulingv1beta1.PodGroup, entry string) claimOption {
	return func(claim *resourcev1.ResourceClaim) {
		claim.Annotations = map[string]string{resourceapi.PodClaimNameAnnotation: entry}
		claim.OwnerReferences = []metav1.OwnerReference{groupOwnerReference(group)}
	}
}

// expectedGroupGenerated is the claim generated from makeTemplate for a
// group entry, the n-th claim the fake server creates.
func expectedGroupGenerated(group *schedulingv1beta1.PodGroup, entry string, n int) *resourcev1.ResourceClaim {
	return expectedFromTemplate(claimGenerateName(group.Name, entry), generatedForGroup(group, entry), n)
}

func TestSyncGroupClaims(t *testing.T) {
	podKey := func(pod *corev1.Pod) string { return podKeyPrefix + pod.Namespace + "/" + pod.Name }
	claimKey := func(name string) string { return claimKeyPrefix + testNamespace + "/" + name }
	groupKey := func(name string) string { return groupKeyPrefix + testNamespace + "/" + name }

	train := makeGroup("train", "uid-train", groupTemplateClaim("fabric", "fabric"))
	groupClaimName := generatedName(claimGenerateName("train", "fabric"), 1)
	trainRecorded := withGroupClaimStatus(train, "fabric", groupClaimName)
	groupClaim := makeClaim(groupClaimName, generatedForGroup(train, "fabric"), protected())
	trainConsumer := podclaims.GroupConsumer(train)
	podA := makePod("pod-a", "uid-a", inGroup("train"), withTemplateClaim("fabric", "fabric"))
	podABound := makePod("pod-a", "uid-a", inGroup("train"), withTemplateClaim("fabric", "fabric"), withClaimStatus("fabric", groupClaimName), withNodeName("node-1"))
	// Same template, another name: the pod's own claim.
	podOwn := makePod("pod-own", "uid-own", inGroup("train"), withTemplateClaim("gpu", "fabric"))
	other := makeGroup("other", "uid-other")
	reservedGroupClaim := makeClaim(groupClaimName, generatedForGroup(train, "fabric"), allocated(), reservedForConsumer(trainConsumer))
	podARunning := makePod("pod-a", "uid-a", inGroup("train"), withTemplateClaim("fabric", "fabric"), withClaimStatus("fabric", groupClaimName), withNodeName("node-1"), withPhase(corev1.PodRunning))
	podATerminating := makePod("pod-a", "uid-a", inGroup("train"), withTemplateClaim("fabric", "fabric"), withClaimStatus("fabric", groupClaimName), withNodeName("node-1"), withPhase(corev1.PodRunning), withPodDeletion())
	podADone := makePod("pod-a", "uid-a", inGroup("train"), withTemplateClaim("fabric", "fabric"), withClaimStatus("fabric", groupClaimName), withNodeName("node-1"), withPhase(corev1.PodSucceeded))
	// Names the group's claim but is in no group: not a member.
	podOtherGroup := makePod("pod-b", "uid-b", inGroup("other"), withSharedClaim("fabric", groupClaimName), withNodeName("node-1"), withPhase(corev1.PodRunning))

	tests := map[string]testCase{
		"group claim generated once for the group, owned by it": {
			keys:                  []string{groupKey("train"), groupKey("train")},
			podGroups:             []*schedulingv1beta1.PodGroup{train},
			templates:             []*resourcev1.ResourceClaimTemplate{makeTemplate("fabric")},
			expectedClaims:        []*resourcev1.ResourceClaim{expectedGroupGenerated(train, "fabric", 1)},
			expectedGroupStatuses: map[string][]schedulingv1beta1.PodGroupResourceClaimStatus{"train": {{Name: "fabric", ResourceClaimName: &groupClaimName}}},
			expectedCreates:       map[string]int{createSuccess: 1},
		},
		"pod claim equal to the group's uses the group's claim": {
			keys:             []string{podKey(podA)},
			podGroups:        []*schedulingv1beta1.PodGroup{trainRecorded},
			pods:             []*corev1.Pod{podA},
			claims:           []*resourcev1.ResourceClaim{groupClaim},
			templates:        []*resourcev1.ResourceClaimTemplate{makeTemplate("fabric")},
			expectedClaims:   []*resourcev1.ResourceClaim{groupClaim},
			expectedStatuses: map[string][]corev1.PodResourceClaimStatus{"pod-a": {{Name: "fabric", ResourceClaimName: &groupClaimName}}},
		},
		"pod waits until the group's claim is generated": {
			keys:           []string{podKey(podA)},
			podGroups:      []*schedulingv1beta1.PodGroup{train},
			pods:           []*corev1.Pod{podA},
			templates:      []*resourcev1.ResourceClaimTemplate{makeTemplate("fabric")},
			expectedErrors: []string{"the claim of PodGroup train is not generated yet"},
		},
		"pod waits for its group to exist": {
			keys:           []string{podKey(podA)},
			podGroups:      []*schedulingv1beta1.PodGroup{other},
			pods:           []*corev1.Pod{podA},
			templates:      []*resourcev1.ResourceClaimTemplate{makeTemplate("fabric")},
			expectedErrors: []string{"PodGroup train does not exist"},
		},
		"pod claim that differs from the group's gets its own claim": {
			keys:             []string{podKey(podOwn)},
			podGroups:        []*schedulingv1beta1.PodGroup{trainRecorded},
			pods:             []*corev1.Pod{podOwn},
			claims:           []*resourcev1.ResourceClaim{groupClaim},
			templates:        []*resourcev1.ResourceClaimTemplate{makeTemplate("fabric")},
			expectedClaims:   []*resourcev1.ResourceClaim{groupClaim, expectedGenerated(podOwn, "gpu", 1)},
			expectedStatuses: map[string][]corev1.PodResourceClaimStatus{"pod-own": {{Name: "gpu", ResourceClaimName: new(generatedName(claimGenerateName("pod-own", "gpu"), 1))}}},
			expectedCreates:  map[string]int{createSuccess: 1},
		},
		"bound pod: the group's allocated claim is reserved for the group": {
			keys:           []string{podKey(podABound)},
			podGroups:      []*schedulingv1beta1.PodGroup{trainRecorded},
			pods:           []*corev1.Pod{podABound},
			claims:         []*resourcev1.ResourceClaim{makeClaim(groupClaimName, generatedForGroup(train, "fabric"), allocated())},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim(groupClaimName, generatedForGroup(train, "fabric"), allocated(), reservedForConsumer(trainConsumer))},
		},
		"claim reserved for an existing group with a running pod stays": {
			keys:           []string{claimKey(groupClaimName)},
			podGroups:      []*schedulingv1beta1.PodGroup{trainRecorded},
			pods:           []*corev1.Pod{podARunning},
			claims:         []*resourcev1.ResourceClaim{reservedGroupClaim},
			expectedClaims: []*resourcev1.ResourceClaim{reservedGroupClaim},
		},
		"group deleted while its pods run: claim stays allocated and reserved": {
			keys:           []string{claimKey(groupClaimName)},
			podGroups:      []*schedulingv1beta1.PodGroup{other},
			pods:           []*corev1.Pod{podARunning},
			claims:         []*resourcev1.ResourceClaim{reservedGroupClaim},
			expectedClaims: []*resourcev1.ResourceClaim{reservedGroupClaim},
		},
		"group deleted while its pod is terminating on its node: claim stays": {
			keys:           []string{claimKey(groupClaimName)},
			podGroups:      []*schedulingv1beta1.PodGroup{other},
			pods:           []*corev1.Pod{podATerminating},
			claims:         []*resourcev1.ResourceClaim{reservedGroupClaim},
			expectedClaims: []*resourcev1.ResourceClaim{reservedGroupClaim},
		},
		"group deleted, its pod known only to the server: claim stays": {
			keys:           []string{claimKey(groupClaimName)},
			podGroups:      []*schedulingv1beta1.PodGroup{other},
			serverOnlyPods: []*corev1.Pod{podARunning},
			claims:         []*resourcev1.ResourceClaim{reservedGroupClaim},
			expectedClaims: []*resourcev1.ResourceClaim{reservedGroupClaim},
		},
		"group deleted and its last pod done: claim deallocated and deleted": {
			keys:      []string{claimKey(groupClaimName)},
			podGroups: []*schedulingv1beta1.PodGroup{other},
			pods:      []*corev1.Pod{podADone},
			claims:    []*resourcev1.ResourceClaim{reservedGroupClaim},
		},
		"existing group whose pods are all gone: claim deallocated, not deleted": {
			keys:           []string{claimKey(groupClaimName)},
			podGroups:      []*schedulingv1beta1.PodGroup{trainRecorded},
			claims:         []*resourcev1.ResourceClaim{reservedGroupClaim},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim(groupClaimName, generatedForGroup(train, "fabric"))},
		},
		"existing group whose pods are all done: claim deallocated, not deleted": {
			keys:           []string{claimKey(groupClaimName)},
			podGroups:      []*schedulingv1beta1.PodGroup{trainRecorded},
			pods:           []*corev1.Pod{podADone, podOtherGroup},
			claims:         []*resourcev1.ResourceClaim{reservedGroupClaim},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim(groupClaimName, generatedForGroup(train, "fabric"))},
		},
		"existing group, its pod known only to the server: claim stays": {
			keys:           []string{claimKey(groupClaimName)},
			podGroups:      []*schedulingv1beta1.PodGroup{trainRecorded},
			serverOnlyPods: []*corev1.Pod{podABound},
			claims:         []*resourcev1.ResourceClaim{reservedGroupClaim},
			expectedClaims: []*resourcev1.ResourceClaim{reservedGroupClaim},
		},
		"group gone: reservation dropped, claim deallocated and deleted": {
			keys:      []string{claimKey(groupClaimName)},
			podGroups: []*schedulingv1beta1.PodGroup{other},
			claims:    []*resourcev1.ResourceClaim{makeClaim(groupClaimName, generatedForGroup(train, "fabric"), allocated(), reservedForConsumer(trainConsumer))},
		},
		"group replaced: the old instance's claim goes": {
			keys:      []string{claimKey(groupClaimName)},
			podGroups: []*schedulingv1beta1.PodGroup{makeGroup("train", "uid-train-2", groupTemplateClaim("fabric", "fabric"))},
			claims:    []*resourcev1.ResourceClaim{makeClaim(groupClaimName, generatedForGroup(train, "fabric"), allocated(), reservedForConsumer(trainConsumer))},
		},
		"claim named by a gone group is released but not deleted": {
			keys:           []string{claimKey("fabric")},
			podGroups:      []*schedulingv1beta1.PodGroup{other},
			claims:         []*resourcev1.ResourceClaim{makeClaim("fabric", allocated(), reservedForConsumer(trainConsumer))},
			expectedClaims: []*resourcev1.ResourceClaim{makeClaim("fabric")},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			runSyncTest(t, tc)
		})
	}
}
