// Package pod serves core/v1 Pods with the status, binding and eviction
// subresources. There is no kubelet behind core-lite: pods never bound to a
// node are deleted at once, bound pods go through graceful deletion.
package pod

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/names"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	resourcevalidation "github.com/draplane/draplane/apis/resource/validation"
	"github.com/draplane/draplane/internal/features"
	"github.com/draplane/draplane/internal/registry/core/internal/corescheme"
)

type podStrategy struct {
	runtime.ObjectTyper
	names.NameGenerator
}

// Strategy is the create, update and delete strategy for pods.
var Strategy = podStrategy{corescheme.Scheme, names.SimpleNameGenerator}

func (podStrategy) NamespaceScoped() bool { return true }

// GetResetFields returns the fields a spec update leaves alone.
func (podStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		"v1": fieldpath.NewSet(fieldpath.MakePathOrDie("status")),
	}
}

// PrepareForCreate starts every pod Pending with its QoS class; the status a
// client sends is dropped.
func (podStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	pod := obj.(*corev1.Pod)
	pod.Generation = 1
	dropDisabledFields(&pod.Spec, nil)
	pod.Status = corev1.PodStatus{
		Phase:    corev1.PodPending,
		QOSClass: qosClass(&pod.Spec),
	}
}

// PrepareForUpdate keeps the status (only the status subresource changes it)
// and bumps the generation when the spec changes. A priority or
// preemptionPolicy the request leaves out stays what the Priority admission
// set at create, as upstream's plugin keeps it on update.
func (podStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	pod, oldPod := obj.(*corev1.Pod), old.(*corev1.Pod)
	pod.Status = oldPod.Status
	if pod.Spec.Priority == nil {
		pod.Spec.Priority = oldPod.Spec.Priority
	}
	if pod.Spec.PreemptionPolicy == nil {
		pod.Spec.PreemptionPolicy = oldPod.Spec.PreemptionPolicy
	}
	dropDisabledFields(&pod.Spec, &oldPod.Spec)
	if len(resourcevalidation.ValidateQuantityMagnitudes(&pod.Spec, nil)) == 0 && !apiequality.Semantic.DeepEqual(pod.Spec, oldPod.Spec) {
		pod.Generation = oldPod.Generation + 1
	}
}

// dropDisabledFields drops spec.schedulingGroup while the GenericWorkload
// gate is off, unless the pod had it already.
func dropDisabledFields(spec, oldSpec *corev1.PodSpec) {
	if !features.Enabled(features.GenericWorkload) && (oldSpec == nil || oldSpec.SchedulingGroup == nil) {
		spec.SchedulingGroup = nil
	}
}

func (podStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return ValidatePod(obj.(*corev1.Pod))
}

func (podStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidatePodUpdate(obj.(*corev1.Pod), old.(*corev1.Pod))
}

func (podStrategy) WarningsOnCreate(ctx context.Context, obj runtime.Object) []string { return nil }

func (podStrategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}

func (podStrategy) Canonicalize(obj runtime.Object) {}

func (podStrategy) AllowCreateOnUpdate(ctx context.Context) bool { return false }

func (podStrategy) AllowUnconditionalUpdate(ctx context.Context) bool { return true }

// CheckGracefulDelete picks the grace period of a deletion: the one asked for,
// else the pod's terminationGracePeriodSeconds; but zero for a pod that never
// reached a node or has already finished, because nothing would ever
// complete its deletion.
func (podStrategy) CheckGracefulDelete(ctx context.Context, obj runtime.Object, options *metav1.DeleteOptions) bool {
	if options == nil {
		return false
	}
	pod := obj.(*corev1.Pod)
	requested := options.GracePeriodSeconds
	// The store may call this first with a stale copy of the pod and then
	// again with the current one, passing the options this func already
	// changed; the request's own value is kept in ctx by REST.Delete.
	if fromRequest, ok := ctx.Value(requestedGracePeriodKey{}).(*int64); ok {
		requested = fromRequest
	}
	var period int64
	switch {
	case requested != nil:
		period = *requested
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		period = *pod.Spec.TerminationGracePeriodSeconds
	}
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		period = 0
	}
	if period < 0 {
		period = 1
	}
	options.GracePeriodSeconds = &period
	return true
}

type requestedGracePeriodKey struct{}

// withRequestedGracePeriod records the grace period a delete request asked
// for (nil if none) for CheckGracefulDelete.
func withRequestedGracePeriod(ctx context.Context, options *metav1.DeleteOptions) context.Context {
	var requested *int64
	if options != nil && options.GracePeriodSeconds != nil {
		requested = ptr.To(*options.GracePeriodSeconds)
	}
	return context.WithValue(ctx, requestedGracePeriodKey{}, requested)
}

type podStatusStrategy struct {
	podStrategy
}

// StatusStrategy is the update strategy of the status subresource.
var StatusStrategy = podStatusStrategy{Strategy}

// GetResetFields returns the fields a status update leaves alone.
func (podStatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		"v1": fieldpath.NewSet(
			fieldpath.MakePathOrDie("spec"),
			fieldpath.MakePathOrDie("metadata", "deletionTimestamp"),
			fieldpath.MakePathOrDie("metadata", "ownerReferences"),
		),
	}
}

func (podStatusStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	pod, oldPod := obj.(*corev1.Pod), old.(*corev1.Pod)
	pod.Spec = oldPod.Spec
	pod.DeletionTimestamp = oldPod.DeletionTimestamp
	pod.OwnerReferences = oldPod.OwnerReferences
	// The claim made for the pod's extended resources stays recorded
	// (as upstream): a status write that leaves it out keeps it.
	if pod.Status.ExtendedResourceClaimStatus == nil {
		pod.Status.ExtendedResourceClaimStatus = oldPod.Status.ExtendedResourceClaimStatus
	}
}

func (podStatusStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidatePodStatusUpdate(obj.(*corev1.Pod), old.(*corev1.Pod))
}

// qosClass classifies a pod as the kubelet does, looking at cpu and memory of
// its regular and init containers.
func qosClass(spec *corev1.PodSpec) corev1.PodQOSClass {
	containers := append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
	anySet, guaranteed := false, true
	for _, c := range containers {
		for _, resource := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			request, hasRequest := c.Resources.Requests[resource]
			limit, hasLimit := c.Resources.Limits[resource]
			if (hasRequest && !request.IsZero()) || (hasLimit && !limit.IsZero()) {
				anySet = true
			}
			// A quantity beyond int64 (refused by validation) is not
			// compared: that would compute 10^exponent.
			if !hasLimit || limit.IsZero() || !resourcevalidation.QuantityFitsInt64(limit) ||
				(hasRequest && (!resourcevalidation.QuantityFitsInt64(request) || request.Cmp(limit) != 0)) {
				guaranteed = false
			}
		}
	}
	switch {
	case !anySet:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

// GetAttrs returns the labels and selectable fields of a pod.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil, fmt.Errorf("not a pod: %T", obj)
	}
	return labels.Set(pod.Labels), ToSelectableFields(pod), nil
}

// ToSelectableFields returns the fields of a pod that field selectors can use
// (see corescheme.PodFieldLabels), leaving out those whose value is empty:
// a selector reads a missing field as empty (fields.Set.Get), so it matches
// the same pods. The watch cache keeps one set per event of its history,
// and a map of at most eight entries takes half the memory of a larger
// one; most pods have two or three empty fields of the ten.
func ToSelectableFields(pod *corev1.Pod) fields.Set {
	podIP := pod.Status.PodIP
	if len(pod.Status.PodIPs) > 0 {
		podIP = pod.Status.PodIPs[0].IP
	}
	set := make(fields.Set, 8)
	for _, field := range [...]struct{ name, value string }{
		{"metadata.name", pod.Name},
		{"metadata.namespace", pod.Namespace},
		{"spec.nodeName", pod.Spec.NodeName},
		{"spec.restartPolicy", string(pod.Spec.RestartPolicy)},
		{"spec.schedulerName", pod.Spec.SchedulerName},
		{"spec.serviceAccountName", pod.Spec.ServiceAccountName},
		{"spec.hostNetwork", strconv.FormatBool(pod.Spec.HostNetwork)},
		{"status.phase", string(pod.Status.Phase)},
		{"status.podIP", podIP},
		{"status.nominatedNodeName", pod.Status.NominatedNodeName},
	} {
		if field.value != "" {
			set[field.name] = field.value
		}
	}
	return set
}

// Matcher selects pods by labels and fields; spec.nodeName is answered from
// the watch cache index.
func Matcher(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{
		Label:       label,
		Field:       field,
		GetAttrs:    GetAttrs,
		IndexFields: []string{"spec.nodeName"},
	}
}

// NodeNameTriggerFunc tells the watch cache which node a pod event concerns,
// so watchers of one node's pods are woken only for their node.
func NodeNameTriggerFunc(obj runtime.Object) string {
	return obj.(*corev1.Pod).Spec.NodeName
}

// NodeNameIndexFunc indexes pods in the watch cache by spec.nodeName.
func NodeNameIndexFunc(obj interface{}) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("not a pod: %T", obj)
	}
	return []string{pod.Spec.NodeName}, nil
}

// Indexers are the watch cache indexes of pods.
func Indexers() *cache.Indexers {
	return &cache.Indexers{storage.FieldIndex("spec.nodeName"): NodeNameIndexFunc}
}
