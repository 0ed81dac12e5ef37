// Package podmode is how the controllers write into pods in each mode
// (standalone, aggregated, cluster): where generated claims are recorded
// and how a pod is put on its node. What a pod's claims are is read the
// same way in every mode, by package podclaims below every controller.
package podmode

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/draplane/draplane/internal/podclaims"
)

// Mode is how the controllers write into pods: where they record the
// claims generated for a pod and how they put a pod on the node they
// chose. Reading is the same in every mode (podclaims.ClaimsOf, StatusOf). The
// controllers take a Mode in their options; nil means Standalone.
type Mode interface {
	// RecordGenerated records the claims generated for the pod's claims,
	// all of them: an entry left out may be removed.
	RecordGenerated(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, generated []corev1.PodResourceClaimStatus, fieldManager string) error
	// NotPlaceable says why an unbound pod is not for the allocation
	// controller to place now; "" means place it.
	NotPlaceable(pod *corev1.Pod) string
	// Place puts an unbound pod on the node. A pod that is on that node
	// already (a lost response) is not an error.
	Place(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, node string) error
}

var (
	// Standalone pods live in our own core-lite: generated claims go into
	// status.resourceClaimStatuses and the allocation controller binds
	// pods itself (binding subresource).
	Standalone Mode = standalone{}
	// Aggregated pods live in a host cluster whose scheduler binds them:
	// generated claims go into the podclaims.ClaimStatusesAnnotation, and a pod is
	// placed by requiring the chosen node in its node affinity and
	// removing the podclaims.SchedulingGate, in one update.
	Aggregated Mode = aggregated{}
)

// OrStandalone returns m, or Standalone for nil.
func OrStandalone(m Mode) Mode {
	if m == nil {
		return Standalone
	}
	return m
}

type standalone struct{}

func (standalone) String() string { return "standalone" }

func (standalone) RecordGenerated(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, generated []corev1.PodResourceClaimStatus, fieldManager string) error {
	// An update of the pod as the controller saw it costs the server less
	// than half of what a server-side apply does. It fails with a
	// conflict if the pod changed meanwhile; the apply then does it
	// without looking at the rest of the status.
	update := pod.DeepCopy()
	update.Status.ResourceClaimStatuses = generated
	// A status update keeps the stored managedFields whatever it carries.
	update.ManagedFields = nil
	_, err := client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, update, metav1.UpdateOptions{FieldManager: fieldManager})
	switch {
	case err == nil:
		return nil
	case !apierrors.IsConflict(err):
		return fmt.Errorf("update status.resourceClaimStatuses of pod %s: %w", klog.KObj(pod), err)
	}
	statuses := make([]*corev1apply.PodResourceClaimStatusApplyConfiguration, 0, len(generated))
	for _, status := range generated {
		apply := corev1apply.PodResourceClaimStatus().WithName(status.Name)
		if status.ResourceClaimName != nil {
			apply.WithResourceClaimName(*status.ResourceClaimName)
		}
		statuses = append(statuses, apply)
	}
	podApply := corev1apply.Pod(pod.Name, pod.Namespace).
		WithUID(pod.UID).
		WithStatus(corev1apply.PodStatus().WithResourceClaimStatuses(statuses...))
	if _, err := client.CoreV1().Pods(pod.Namespace).ApplyStatus(ctx, podApply, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
		return fmt.Errorf("apply status.resourceClaimStatuses of pod %s: %w", klog.KObj(pod), err)
	}
	return nil
}

func (standalone) NotPlaceable(pod *corev1.Pod) string {
	if len(pod.Spec.SchedulingGates) > 0 {
		return "pod has scheduling gates"
	}
	return ""
}

func (standalone) Place(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, node string) error {
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	if err := client.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		// A lost response to a binding that worked is not a failure.
		current, getErr := client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if getErr != nil || current.UID != pod.UID || current.Spec.NodeName != node {
			return fmt.Errorf("bind pod %s to node %s: %w", klog.KObj(pod), node, err)
		}
	}
	return nil
}

type aggregated struct{}

func (aggregated) String() string { return "aggregated" }

func (aggregated) RecordGenerated(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, generated []corev1.PodResourceClaimStatus, fieldManager string) error {
	value, err := json.Marshal(generated)
	if err != nil {
		return fmt.Errorf("encode annotation %s: %w", podclaims.ClaimStatusesAnnotation, err)
	}
	// The UID makes sure that a pod of the same name created meanwhile
	// is not patched: uid is immutable, a different one is rejected.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         pod.UID,
		"annotations": map[string]string{podclaims.ClaimStatusesAnnotation: string(value)},
	}})
	if err != nil {
		return err
	}
	if _, err := client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
		return fmt.Errorf("record generated claims in annotation %s of pod %s: %w", podclaims.ClaimStatusesAnnotation, klog.KObj(pod), err)
	}
	return nil
}

func (aggregated) NotPlaceable(pod *corev1.Pod) string {
	ours := false
	for _, gate := range pod.Spec.SchedulingGates {
		if gate.Name != podclaims.SchedulingGate {
			return fmt.Sprintf("pod has scheduling gate %s", gate.Name)
		}
		ours = true
	}
	if !ours {
		// Placed already, or never gated by us: the host scheduler
		// decides.
		return "pod has no " + podclaims.SchedulingGate + " scheduling gate, the host scheduler places it"
	}
	return ""
}

func (aggregated) Place(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, node string) error {
	pods := client.CoreV1().Pods(pod.Namespace)
	current := pod
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if current == nil {
			fresh, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			current = fresh
		}
		if current.UID != pod.UID {
			return apierrors.NewNotFound(corev1.Resource("pods"), pod.Name)
		}
		if current.Spec.NodeName != "" {
			if current.Spec.NodeName == node {
				return nil
			}
			return fmt.Errorf("pod is bound to node %s already", current.Spec.NodeName)
		}
		updated := current.DeepCopy()
		pinned := RequireNode(updated, node)
		ungated := removeGate(updated, podclaims.SchedulingGate)
		if !pinned && !ungated {
			return nil
		}
		// Node affinity may be narrowed while the pod is gated (the old
		// pod's gates count), so one update both pins and ungates it.
		_, err := pods.Update(ctx, updated, metav1.UpdateOptions{})
		current = nil
		return err
	})
	if err != nil {
		return fmt.Errorf("place pod %s on node %s (node affinity, remove scheduling gate %s): %w", klog.KObj(pod), node, podclaims.SchedulingGate, err)
	}
	return nil
}

// RequireNode narrows the pod's required node affinity to the node: each
// required term gets a matchFields requirement on metadata.name (a new
// term when there is none). It reports whether it changed the pod.
func RequireNode(pod *corev1.Pod, node string) bool {
	requirement := corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}
	if pod.Spec.Affinity == nil {
		pod.Spec.Affinity = &corev1.Affinity{}
	}
	if pod.Spec.Affinity.NodeAffinity == nil {
		pod.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	affinity := pod.Spec.Affinity.NodeAffinity
	if affinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		affinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	required := affinity.RequiredDuringSchedulingIgnoredDuringExecution
	if len(required.NodeSelectorTerms) == 0 {
		required.NodeSelectorTerms = []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{requirement}}}
		return true
	}
	changed := false
	for i := range required.NodeSelectorTerms {
		term := &required.NodeSelectorTerms[i]
		if slices.ContainsFunc(term.MatchFields, func(r corev1.NodeSelectorRequirement) bool {
			return r.Key == requirement.Key && r.Operator == requirement.Operator && slices.Equal(r.Values, requirement.Values)
		}) {
			continue
		}
		term.MatchFields = append(term.MatchFields, requirement)
		changed = true
	}
	return changed
}

func removeGate(pod *corev1.Pod, name string) bool {
	before := len(pod.Spec.SchedulingGates)
	pod.Spec.SchedulingGates = slices.DeleteFunc(pod.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == name })
	if len(pod.Spec.SchedulingGates) == 0 {
		pod.Spec.SchedulingGates = nil
	}
	return len(pod.Spec.SchedulingGates) != before
}

// UpstreamFinalizer protects a host cluster's claims while they are
// allocated, as kube-scheduler protects the claims it allocates: the
// host's resource claim controller removes it when it deallocates a
// claim, and would not know ours.
const UpstreamFinalizer = "resource.kubernetes.io/delete-protection"

// Cluster places a host cluster's own pods: those whose spec.schedulerName
// is SchedulerName, with the host's resource.k8s.io claims, beside the
// host's kube-scheduler, which keeps every other pod. Claims of templates
// are the host's kube-controller-manager's to generate; pods are bound
// through the binding subresource, as any scheduler binds them.
type Cluster struct {
	SchedulerName string
}

func (m Cluster) String() string { return "cluster (" + m.SchedulerName + ")" }

func (Cluster) RecordGenerated(context.Context, kubernetes.Interface, *corev1.Pod, []corev1.PodResourceClaimStatus, string) error {
	return fmt.Errorf("the claims of a host cluster's pods are generated by its kube-controller-manager")
}

func (m Cluster) NotPlaceable(pod *corev1.Pod) string {
	if pod.Spec.SchedulerName != m.SchedulerName {
		return fmt.Sprintf("pod's schedulerName is %q, not %q", pod.Spec.SchedulerName, m.SchedulerName)
	}
	if len(pod.Spec.SchedulingGates) > 0 {
		return "pod has scheduling gates"
	}
	return ""
}

func (Cluster) Place(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, node string) error {
	return standalone{}.Place(ctx, client, pod, node)
}

// Ours reports whether the pod is one the mode's controllers act on at
// all: in Cluster mode only the pods that name its scheduler, bound or
// not; in the other modes every pod.
func Ours(m Mode, pod *corev1.Pod) bool {
	cluster, ok := m.(Cluster)
	return !ok || pod.Spec.SchedulerName == cluster.SchedulerName
}
