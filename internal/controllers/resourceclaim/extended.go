package resourceclaim

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions/resource/v1"
	"github.com/draplane/draplane/internal/controllers/podmode"
	"github.com/draplane/draplane/internal/podclaims"
)

// Extended resources backed by devices (see podclaims): a pod whose
// containers ask for an extended resource that a DeviceClass backs gets
// one claim for all of them, made here like the claims from templates,
// owned by the pod and deleted with it, and recorded in
// pod.status.extendedResourceClaimStatus. The allocation controller
// waits for that record before it places the pod.

const (
	// ReasonCreatedExtendedResourceClaim: the Normal event on a pod that
	// names the claim made for its extended resources, so that `kubectl
	// describe pod` shows it.
	ReasonCreatedExtendedResourceClaim = "CreatedExtendedResourceClaim"

	// podsByExtendedResourceIndex maps an extended resource name to the
	// pods that ask for it and have no claim for their extended
	// resources yet: a class that starts backing the name gives them
	// work.
	podsByExtendedResourceIndex = "pods-by-extended-resource"
)

// addExtendedResourceHandlers makes the controller handle extended
// resources, resolved through the classes of the informer.
func (c *Controller) addExtendedResourceHandlers(logger klog.Logger, classes resourceinformers.DeviceClassInformer) error {
	c.classLister = classes.Lister()
	c.classesSynced = classes.Informer().HasSynced
	if err := c.podIndexer.AddIndexers(cache.Indexers{podsByExtendedResourceIndex: podsByExtendedResourceIndexFunc}); err != nil {
		return fmt.Errorf("add pod indexer: %w", err)
	}
	if _, err := classes.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueueClassPods(logger, obj) },
		UpdateFunc: func(_, obj any) { c.enqueueClassPods(logger, obj) },
	}, cache.HandlerOptions{Logger: &logger}); err != nil {
		return fmt.Errorf("add device class event handler: %w", err)
	}
	return nil
}

// hasClaimWork: the pod uses claims, or may need one for its extended
// resources.
func (c *Controller) hasClaimWork(pod *corev1.Pod) bool {
	return podclaims.HasClaims(pod) || (c.classLister != nil && len(podclaims.ExtendedResourceCandidates(pod)) > 0)
}

// extendedResourceClaimMissing: the pod asks for extended resources that
// a class backs and has no claim recorded for them.
func (c *Controller) extendedResourceClaimMissing(pod *corev1.Pod) bool {
	if c.classLister == nil || podclaims.ExtendedResourceClaimName(pod) != "" || len(podclaims.ExtendedResourceCandidates(pod)) == 0 {
		return false
	}
	resolver, err := c.classResolver()
	return err != nil || podclaims.NeedsExtendedResourceClaim(pod, resolver)
}

func (c *Controller) classResolver() (*podclaims.ClassResolver, error) {
	classes, err := c.classLister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list device classes from cache: %w", err)
	}
	return podclaims.NewClassResolver(classes), nil
}

// extendedResourceClaimNeeded decides, for ExtendedResourcesOnly, from
// the caches alone: the pod is ours, unbound and alive, and its claim
// for extended resources is not recorded or the recorded one is gone.
func (c *Controller) extendedResourceClaimNeeded(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || podclaims.IsDone(pod) || !podmode.Ours(c.mode, pod) {
		return false
	}
	name := podclaims.ExtendedResourceClaimName(pod)
	if name == "" {
		return c.extendedResourceClaimMissing(pod)
	}
	claim, err := c.cachedClaim(pod.Namespace, name)
	return err != nil || claim == nil
}

// syncExtendedResourceClaim makes sure that the claim for the pod's
// extended resources exists and is recorded in the pod status.
func (c *Controller) syncExtendedResourceClaim(ctx context.Context, pod *corev1.Pod) error {
	if c.classLister == nil || (podclaims.ExtendedResourceClaimName(pod) == "" && len(podclaims.ExtendedResourceCandidates(pod)) == 0) {
		return nil
	}
	logger := klog.FromContext(ctx)
	if exists, err := c.recordedExtendedResourceClaimExists(ctx, pod); err != nil || exists {
		return err
	}
	resolver, err := c.classResolver()
	if err != nil {
		return err
	}
	if !podclaims.NeedsExtendedResourceClaim(pod, resolver) {
		// No class backs what the pod asks for (yet): a class event
		// brings the pod back.
		return nil
	}
	requests, mappings := podclaims.ExtendedResourceRequests(pod, resolver)
	claim, err := c.findExtendedResourceClaim(pod)
	if err != nil {
		return err
	}
	if claim == nil {
		claim, err = c.createExtendedResourceClaim(ctx, pod, requests)
		if err != nil {
			c.eventf(pod, corev1.EventTypeWarning, ReasonFailedClaimCreation, "Claim for extended resources: %v", err)
			return err
		}
		c.eventf(pod, corev1.EventTypeNormal, ReasonCreatedExtendedResourceClaim, "Created ResourceClaim %s for extended resources: %s", claim.Name, describeMappings(mappings))
	} else {
		logger.V(4).Info("Found claim made earlier for extended resources", "claim", klog.KObj(claim))
	}
	if err := c.recordExtendedResourceClaim(ctx, pod, claim.Name, mappings); err != nil {
		c.eventf(pod, corev1.EventTypeWarning, ReasonFailedPodStatusUpdate, "Recording the claim for extended resources: %v", err)
		return err
	}
	return nil
}

// recordedExtendedResourceClaimExists: the pod status names a claim for
// its extended resources, and that claim exists and belongs to the pod.
// The server has the last word when the caches do not know the claim.
func (c *Controller) recordedExtendedResourceClaimExists(ctx context.Context, pod *corev1.Pod) (bool, error) {
	name := podclaims.ExtendedResourceClaimName(pod)
	if name == "" {
		return false, nil
	}
	claim, err := c.cachedClaim(pod.Namespace, name)
	if err != nil {
		return false, err
	}
	if claim == nil {
		claim, err = c.resourceClient.ResourceV1().ResourceClaims(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			klog.FromContext(ctx).V(4).Info("Claim for extended resources is gone, making a new one", "claim", klog.KRef(pod.Namespace, name))
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("get claim %s/%s recorded for extended resources: %w", pod.Namespace, name, err)
		}
		c.claimCache.Mutation(claim)
	}
	if err := podclaims.IsForPod(pod, claim); err != nil {
		klog.FromContext(ctx).Error(err, "Claim recorded for extended resources belongs to someone else, making a new one", "claim", klog.KObj(claim))
		return false, nil
	}
	return true, nil
}

// findExtendedResourceClaim returns a claim made earlier for the pod's
// extended resources whose name did not reach the pod status, or nil.
func (c *Controller) findExtendedResourceClaim(pod *corev1.Pod) (*resourcev1.ResourceClaim, error) {
	return c.findClaimOfPod(pod, podclaims.IsExtendedResourceClaim)
}

func (c *Controller) createExtendedResourceClaim(ctx context.Context, pod *corev1.Pod, requests []resourcev1.DeviceRequest) (*resourcev1.ResourceClaim, error) {
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    claimGenerateName(pod.Name, podclaims.ExtendedResourcesClaimSuffix),
			Namespace:       pod.Namespace,
			Annotations:     map[string]string{podclaims.ExtendedResourceClaimAnnotation: "true"},
			OwnerReferences: []metav1.OwnerReference{podOwnerReference(pod)},
			Finalizers:      generatedClaimFinalizers(),
		},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: requests}},
	}
	if c.extendedOnly {
		claim.Finalizers = nil
	}
	created, err := c.resourceClient.ResourceV1().ResourceClaims(pod.Namespace).Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		claimCreates.WithLabelValues(createFailure).Inc()
		if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
			return nil, fmt.Errorf("%w: create ResourceClaim for extended resources refused: %w", errWaiting, err)
		}
		return nil, fmt.Errorf("create ResourceClaim for extended resources: %w", err)
	}
	claimCreates.WithLabelValues(createSuccess).Inc()
	c.claimCache.Mutation(created)
	klog.FromContext(ctx).V(2).Info("Created ResourceClaim for extended resources", "claim", klog.KObj(created), "requests", len(requests))
	return created, nil
}

// recordExtendedResourceClaim writes status.extendedResourceClaimStatus
// with a merge patch of the status: it leaves the other status fields
// (and who owns them for server-side apply) alone. The UID makes sure
// that a pod of the same name created meanwhile is not patched.
func (c *Controller) recordExtendedResourceClaim(ctx context.Context, pod *corev1.Pod, claimName string, mappings []corev1.ContainerExtendedResourceRequest) error {
	status := &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: claimName, RequestMappings: mappings}
	if equality.Semantic.DeepEqual(pod.Status.ExtendedResourceClaimStatus, status) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status":   map[string]any{"extendedResourceClaimStatus": status},
	})
	if err != nil {
		return err
	}
	if _, err := c.kubeClient.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}, "status"); err != nil {
		return fmt.Errorf("record claim %s for extended resources in pod %s: %w", claimName, klog.KObj(pod), err)
	}
	klog.FromContext(ctx).V(4).Info("Recorded claim for extended resources in pod", "claim", claimName)
	return nil
}

// describeMappings says which container resource maps to which request.
func describeMappings(mappings []corev1.ContainerExtendedResourceRequest) string {
	parts := make([]string, 0, len(mappings))
	for _, m := range mappings {
		parts = append(parts, fmt.Sprintf("container %s %s -> request %s", m.ContainerName, m.ResourceName, m.RequestName))
	}
	return strings.Join(parts, ", ")
}

// enqueueClassPods queues the pods that wait for a class behind one of
// the extended resources they ask for.
func (c *Controller) enqueueClassPods(logger klog.Logger, obj any) {
	class, ok := obj.(*resourcev1.DeviceClass)
	if !ok {
		logger.Error(nil, "Unexpected object in device class event handler", "type", fmt.Sprintf("%T", obj))
		return
	}
	names := []string{podclaims.DeviceClassResourcePrefix + class.Name}
	if class.Spec.ExtendedResourceName != nil {
		names = append(names, *class.Spec.ExtendedResourceName)
	}
	for _, name := range names {
		pods, err := c.podIndexer.ByIndex(podsByExtendedResourceIndex, name)
		if err != nil {
			logger.Error(err, "Listing pods of extended resource from cache", "resource", name)
			return
		}
		for _, pod := range pods {
			c.enqueuePod(logger, pod, false)
		}
	}
}

// podsByExtendedResourceIndexFunc indexes pods without a claim for their
// extended resources by the extended resources they ask for.
func podsByExtendedResourceIndexFunc(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || podclaims.ExtendedResourceClaimName(pod) != "" {
		return nil, nil
	}
	candidates := podclaims.ExtendedResourceCandidates(pod)
	keys := make([]string, 0, len(candidates))
	for _, name := range candidates {
		keys = append(keys, string(name))
	}
	return keys, nil
}
