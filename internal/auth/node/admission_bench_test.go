package node

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager"
	"k8s.io/apiserver/pkg/endpoints/request"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// podWithManagedFields is a pod as the simulator's pods look after they
// started: managedFields entries of the pod's creator, the claim and
// allocation controllers and the node agent's status writes.
func podWithManagedFields() *corev1.Pod {
	status := `{"f:status":{"f:conditions":{` +
		strings.Join([]string{
			`"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}`,
			`"k:{\"type\":\"Initialized\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}`,
			`"k:{\"type\":\"PodReadyToStartContainers\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}`,
			`"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}`,
		}, ",") +
		`},"f:containerStatuses":{},"f:phase":{},"f:startTime":{}}}`
	entries := []metav1.ManagedFieldsEntry{
		{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"main\"}":{".":{},"f:image":{},"f:name":{},"f:resources":{".":{},"f:claims":{}}}},"f:resourceClaims":{".":{},"k:{\"name\":\"gpu\"}":{".":{},"f:name":{},"f:resourceClaimTemplateName":{}}},"f:restartPolicy":{}}}`)},
		{Manager: "podclaims", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Subresource: "status",
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:resourceClaimStatuses":{".":{},"k:{\"name\":\"gpu\"}":{".":{},"f:name":{},"f:resourceClaimName":{}}}}}`)},
		{Manager: "allocation", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Subresource: "binding",
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:nodeName":{}}}`)},
		{Manager: "simulator", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Subresource: "status",
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(status)},
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-p", ManagedFields: entries}}
}

// BenchmarkUpdateAdmission measures what an update of a pod's status
// costs in the admission step of the API handlers, which wrap the chain in
// upstream's managedFields check
// (fieldmanager.NewManagedFieldsValidatingAdmissionController): once a
// plugin of the chain handles updates, every update's managedFields are
// decoded again after mutating admission, whoever sends it. The node
// restriction no longer handles updates (the stores of slices and claim
// status run its checks of updates); "a plugin that handles updates" is
// the node restriction as it was, for comparison.
func BenchmarkUpdateAdmission(b *testing.B) {
	pods := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	handlingUpdates := &Admission{Handler: admission.NewHandler(admission.Create, admission.Update, admission.Delete)}
	for _, tc := range []struct {
		name  string
		chain admission.Interface
		user  user.Info
	}{
		{"no plugin handles updates", admission.NewChainHandler(), &user.DefaultInfo{Name: "system:apiserver"}},
		{"node restriction, controller's update", admission.NewChainHandler(NewAdmission()), &user.DefaultInfo{Name: "system:apiserver"}},
		{"node restriction, node's update", admission.NewChainHandler(NewAdmission()), nodeA},
		{"a plugin that handles updates, controller's update", admission.NewChainHandler(handlingUpdates), &user.DefaultInfo{Name: "system:apiserver"}},
		{"a plugin that handles updates, node's update", admission.NewChainHandler(handlingUpdates), nodeA},
	} {
		b.Run(tc.name, func(b *testing.B) {
			wrapped := fieldmanager.NewManagedFieldsValidatingAdmissionController(tc.chain)
			mutating := wrapped.(admission.MutationInterface)
			old := podWithManagedFields()
			b.ReportAllocs()
			for b.Loop() {
				pod := old.DeepCopy()
				attrs := admission.NewAttributesRecord(pod, old, schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, "ns", "p", pods, "status", admission.Update, nil, false, tc.user)
				// As the update handler: mutating admission only if the
				// chain handles updates, then validating admission.
				if mutating.Handles(admission.Update) {
					if err := mutating.Admit(context.Background(), attrs, nil); err != nil {
						b.Fatal(err)
					}
				}
				if v, ok := tc.chain.(admission.ValidationInterface); ok && v.Handles(admission.Update) {
					if err := v.Validate(context.Background(), attrs, nil); err != nil {
						b.Fatal(fmt.Errorf("validate: %w", err))
					}
				}
			}
		})
	}
}

// BenchmarkUpdateCheck measures the check the status store of claims runs
// on every status update instead: a controller's update (not node-bound,
// as the allocation controller's one per placed pod) and a node's.
func BenchmarkUpdateCheck(b *testing.B) {
	check := NewAdmission().UpdateCheck(resourcev1.SchemeGroupVersion.WithResource("resourceclaims"), "status")
	old := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	claim := old.DeepCopy()
	claim.Status.Devices = []resourceapi.AllocatedDeviceStatus{{Driver: "gpu.example.com", Pool: "a", Device: "d0"}}
	info := &request.RequestInfo{IsResourceRequest: true, APIGroup: "resource.draplane.dev", APIVersion: "v1", Resource: "resourceclaims", Subresource: "status"}
	for _, tc := range []struct {
		name string
		user user.Info
	}{
		{"controller's update", &user.DefaultInfo{Name: "system:apiserver", Groups: []string{"system:masters"}}},
		{"node's update", nodeA},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := request.WithRequestInfo(request.WithUser(context.Background(), tc.user), info)
			b.ReportAllocs()
			for b.Loop() {
				if err := check(ctx, claim, old); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
