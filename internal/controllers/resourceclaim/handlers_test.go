package resourceclaim

import (
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcefake "github.com/draplane/draplane/generated/clientset/versioned/fake"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions"
)

// TestEventHandlers checks what the event handlers queue, from the
// caches alone.
func TestEventHandlers(t *testing.T) {
	podNew := makePod("pod-a", "uid-a", withTemplateClaim("gpu", "gpu-template"))
	podRecorded := makePod("pod-a", "uid-a", withTemplateClaim("gpu", "gpu-template"), withClaimStatus("gpu", "pod-a-gpu-abcde"))
	podDone := makePod("pod-a", "uid-a", withTemplateClaim("gpu", "gpu-template"), withClaimStatus("gpu", "pod-a-gpu-abcde"), withPhase(corev1.PodSucceeded))
	podDoneUnrecorded := makePod("pod-a", "uid-a", withTemplateClaim("gpu", "gpu-template"), withPhase(corev1.PodFailed))
	claimA := makeClaim("pod-a-gpu-abcde", generatedFor(podNew, "gpu"))
	podWithoutClaims := makePod("plain", "uid-plain")
	boundPod := makePod("pod-bound", "uid-bound", withNodeName("node-1"), withPhase(corev1.PodRunning), withSharedClaim("gpu", "shared"))
	unboundPod := makePod("pod-unbound", "uid-unbound", withSharedClaim("gpu", "shared"))
	podRecorded2 := makePod("pod-b", "uid-b", withTemplateClaim("gpu", "gpu-template"), withClaimStatus("gpu", "pod-b-gpu-abcde"))
	podOtherTemplate := makePod("pod-c", "uid-c", withTemplateClaim("gpu", "other-template"))
	podOtherNamespace := makePod("pod-d", "uid-d", withTemplateClaim("gpu", "gpu-template"))
	podOtherNamespace.Namespace = "elsewhere"
	namespace := func(name, admin string) *corev1.Namespace {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if admin != "" {
			ns.Labels = map[string]string{resourceapi.AdminAccessNamespaceLabel: admin}
		}
		return ns
	}
	withNamespaceLabel := func(ns *corev1.Namespace, key, value string) *corev1.Namespace {
		ns = ns.DeepCopy()
		ns.Labels[key] = value
		return ns
	}

	type event struct {
		obj     any
		deleted bool
	}
	tests := map[string]struct {
		pods   []*corev1.Pod
		claims []*resourcev1.ResourceClaim
		// podEvents and claimEvents are delivered in that order.
		podEvents   []event
		claimEvents []event
		// templateEvents are added templates; namespaceEvents are
		// updates (old, new).
		templateEvents  []any
		namespaceEvents [][2]*corev1.Namespace

		expectedKeys        []string
		expectedDeletedPods []string
	}{
		"pod without claims is not queued": {
			podEvents: []event{{obj: podWithoutClaims}},
		},
		"deleted pod without claims is not queued": {
			podEvents: []event{{obj: cache.DeletedFinalStateUnknown{Key: "default/plain", Obj: podWithoutClaims}, deleted: true}},
		},
		"new pod needs a claim": {
			podEvents:    []event{{obj: podNew}},
			expectedKeys: []string{"pod:default/pod-a"},
		},
		"pod with existing claim needs nothing": {
			claims:    []*resourcev1.ResourceClaim{claimA},
			podEvents: []event{{obj: podRecorded}},
		},
		"pod whose claim is gone needs a new one": {
			podEvents:    []event{{obj: podRecorded}},
			expectedKeys: []string{"pod:default/pod-a"},
		},
		"done pod: its claims are checked, not the pod": {
			claims:       []*resourcev1.ResourceClaim{claimA},
			podEvents:    []event{{obj: podDone}},
			expectedKeys: []string{"claim:default/pod-a-gpu-abcde"},
		},
		"done pod: claim generated but not recorded is found by owner": {
			claims:       []*resourcev1.ResourceClaim{claimA},
			podEvents:    []event{{obj: podDoneUnrecorded}},
			expectedKeys: []string{"claim:default/pod-a-gpu-abcde"},
		},
		"deleted pod in tombstone": {
			claims:              []*resourcev1.ResourceClaim{claimA},
			podEvents:           []event{{obj: cache.DeletedFinalStateUnknown{Key: "default/pod-a", Obj: podRecorded}, deleted: true}},
			expectedKeys:        []string{"claim:default/pod-a-gpu-abcde"},
			expectedDeletedPods: []string{"uid-a"},
		},
		"bound pod with allocated, unreserved claim": {
			claims:       []*resourcev1.ResourceClaim{makeClaim("shared", allocated())},
			podEvents:    []event{{obj: boundPod}},
			expectedKeys: []string{"pod:default/pod-bound"},
		},
		"unbound pod with allocated claim is left to the allocation controller": {
			claims:    []*resourcev1.ResourceClaim{makeClaim("shared", allocated())},
			podEvents: []event{{obj: unboundPod}},
		},
		"claim change queues the claim and pods that now have work": {
			pods:         []*corev1.Pod{boundPod, unboundPod},
			claims:       []*resourcev1.ResourceClaim{makeClaim("shared", allocated())},
			claimEvents:  []event{{obj: makeClaim("shared", allocated())}},
			expectedKeys: []string{"claim:default/shared", "pod:default/pod-bound"},
		},
		"deleted claim in tombstone queues the pod that must recreate it": {
			pods:         []*corev1.Pod{podRecorded},
			claimEvents:  []event{{obj: cache.DeletedFinalStateUnknown{Key: "default/pod-a-gpu-abcde", Obj: claimA}, deleted: true}},
			expectedKeys: []string{"pod:default/pod-a"},
		},
		"unexpected objects are ignored": {
			podEvents:      []event{{obj: claimA}},
			claimEvents:    []event{{obj: podNew}},
			templateEvents: []any{podNew},
		},
		"bound pod with claim allocated for another node is not queued": {
			claims:    []*resourcev1.ResourceClaim{makeClaim("shared", allocatedFor("node-2"))},
			podEvents: []event{{obj: boundPod}},
		},
		"template that appears queues the pods waiting for it": {
			pods:           []*corev1.Pod{podNew, podRecorded2, podOtherTemplate, podOtherNamespace},
			claims:         []*resourcev1.ResourceClaim{makeClaim("pod-b-gpu-abcde", generatedFor(podRecorded2, "gpu"))},
			templateEvents: []any{makeTemplate("gpu-template")},
			expectedKeys:   []string{"pod:default/pod-a"},
		},
		"admin access label of the namespace changes: its pods are looked at": {
			pods:            []*corev1.Pod{podNew, podOtherNamespace},
			namespaceEvents: [][2]*corev1.Namespace{{namespace("default", ""), namespace("default", "true")}},
			expectedKeys:    []string{"pod:default/pod-a"},
		},
		"other label of the namespace changes: nothing": {
			pods:            []*corev1.Pod{podNew},
			namespaceEvents: [][2]*corev1.Namespace{{namespace("default", "true"), withNamespaceLabel(namespace("default", "true"), "team", "a")}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			kubeClient := kubefake.NewClientset()
			resourceClient := resourcefake.NewSimpleClientset()
			kubeInformers := informers.NewSharedInformerFactory(kubeClient, 0)
			resourceInformers := resourceinformers.NewSharedInformerFactory(resourceClient, 0)
			podInformer := kubeInformers.Core().V1().Pods()
			claimInformer := resourceInformers.Resource().V1().ResourceClaims()
			c, err := NewControllerWithOptions(logger, kubeClient, resourceClient, podInformer, claimInformer, resourceInformers.Resource().V1().ResourceClaimTemplates(),
				Options{Namespaces: kubeInformers.Core().V1().Namespaces()})
			if err != nil {
				t.Fatalf("NewController: %v", err)
			}
			for _, pod := range tc.pods {
				mustAdd(t, podInformer.Informer().GetStore(), pod)
			}
			for _, claim := range tc.claims {
				mustAdd(t, claimInformer.Informer().GetStore(), claim)
			}

			for _, e := range tc.podEvents {
				c.enqueuePod(logger, e.obj, e.deleted)
			}
			for _, e := range tc.claimEvents {
				c.enqueueClaim(logger, e.obj, e.deleted)
			}
			for _, obj := range tc.templateEvents {
				c.enqueueTemplatePods(logger, obj)
			}
			for _, e := range tc.namespaceEvents {
				c.onNamespaceUpdate(logger, e[0], e[1])
			}

			var keys []string
			for c.queue.Len() > 0 {
				key, _ := c.queue.Get()
				keys = append(keys, key)
				c.queue.Done(key)
			}
			sort.Strings(keys)
			if diff := cmp.Diff(tc.expectedKeys, keys); diff != "" {
				t.Errorf("queued keys (-expected, +actual):\n%s", diff)
			}
			for _, uid := range tc.expectedDeletedPods {
				if !c.deletedPods.Has(types.UID(uid)) {
					t.Errorf("pod %s not remembered as deleted", uid)
				}
			}
		})
	}
}

func TestUIDSetForgetsOldest(t *testing.T) {
	set := newUIDSet(2)
	for _, uid := range []string{"a", "b", "a", "c"} {
		set.Add(types.UID(uid))
	}
	for uid, expected := range map[string]bool{"a": false, "b": true, "c": true, "d": false} {
		if set.Has(types.UID(uid)) != expected {
			t.Errorf("Has(%s): expected %v", uid, expected)
		}
	}
}
