package simulator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/draplane/draplane/allocator"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/controllers/podclaims"
	"github.com/draplane/draplane/controllers/worker"
	dra "github.com/draplane/draplane/driver"
	"github.com/draplane/draplane/features"
)

// enqueuePod queues pods bound to a simulated node that still have a
// status transition ahead of them. Cheap: no API calls.
func (s *Simulator) enqueuePod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || !s.nodes[pod.Spec.NodeName] {
		return
	}
	key, err := cache.MetaNamespaceKeyFunc(pod)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	if (pod.DeletionTimestamp != nil || podDone(pod)) && !s.isPrepared(key) {
		return
	}
	s.queue.Add(key)
}

// enqueueDeletedPod queues a deleted pod whose claims are still prepared.
func (s *Simulator) enqueueDeletedPod(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	if s.isPrepared(key) {
		s.queue.Add(key)
	}
}

func (s *Simulator) isPrepared(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.prepared[key]
	return ok
}

// enqueueConsumers queues the pods a claim is reserved for: a pod whose
// claims were not ready yet may start now.
func (s *Simulator) enqueueConsumers(obj any) {
	claim, ok := obj.(*resourcev1.ResourceClaim)
	if !ok || claim.Status.Allocation == nil {
		return
	}
	for _, consumer := range claim.Status.ReservedFor {
		if consumer.APIGroup == "" && consumer.Resource == "pods" {
			s.queue.Add(claim.Namespace + "/" + consumer.Name)
		}
	}
}

// handle moves one pod along and looks at it again when it asks to.
func (s *Simulator) handle(ctx context.Context, key string) {
	requeueAfter, err := s.syncPod(ctx, key)
	worker.Requeue(ctx, s.queue, key, requeueAfter, err, "Simulating pod failed", "pod")
}

// syncPod moves a pod on a simulated node one step along its life: a
// pending pod starts Running; with a pod duration, a Running pod that
// cannot restart Succeeds once the duration is over. It returns when to
// look at the pod again.
func (s *Simulator) syncPod(ctx context.Context, key string) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	pod, err := s.podLister.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return 0, s.unprepare(ctx, key)
	}
	if err != nil {
		return 0, err
	}
	if !s.nodes[pod.Spec.NodeName] || pod.DeletionTimestamp != nil || podDone(pod) {
		// A kubelet unprepares once the pod's containers are gone.
		return 0, s.unprepare(ctx, key)
	}
	now := s.clock.Now()
	switch pod.Status.Phase {
	case "", corev1.PodPending:
		claims, waitingFor := s.readyClaims(pod)
		if waitingFor != "" {
			// A claim event queues the pod again.
			logger.V(4).Info("Pod waits for its claims", "pod", klog.KObj(pod), "reason", waitingFor)
			return 0, nil
		}
		if err := s.prepare(ctx, key, pod, claims); err != nil {
			return 0, err
		}
		if err := s.writeStatus(ctx, runningStatus(pod, now)); err != nil {
			return 0, err
		}
		logger.V(2).Info("Simulated pod started", "pod", klog.KObj(pod), "node", pod.Spec.NodeName)
		if s.finishes(pod) {
			return s.opts.PodDuration, nil
		}
		return 0, nil
	case corev1.PodRunning:
		if !s.finishes(pod) {
			return 0, nil
		}
		started := now
		if pod.Status.StartTime != nil {
			started = pod.Status.StartTime.Time
		}
		if left := started.Add(s.opts.PodDuration).Sub(now); left > 0 {
			return left, nil
		}
		if err := s.writeStatus(ctx, succeededStatus(pod, now)); err != nil {
			return 0, err
		}
		logger.V(2).Info("Simulated pod succeeded", "pod", klog.KObj(pod), "node", pod.Spec.NodeName)
		return 0, s.unprepare(ctx, key)
	}
	return 0, nil
}

// readyClaims returns the pod's claims once each is allocated and
// reserved for it, or says which claim keeps the pod from starting. A
// kubelet starts a pod only then (and prepares the devices first): that
// matters for pods created with spec.nodeName, which are bound before
// their claims are allocated.
func (s *Simulator) readyClaims(pod *corev1.Pod) ([]*resourcev1.ResourceClaim, string) {
	var claims []*resourcev1.ResourceClaim
	for _, podClaim := range podclaims.ClaimsOf(pod) {
		name, mustCheckOwner, err := podclaims.ClaimName(pod, podClaim)
		if err != nil {
			return nil, err.Error()
		}
		if name == nil {
			continue
		}
		claim, err := s.claimLister.ResourceClaims(pod.Namespace).Get(*name)
		if err != nil {
			return nil, fmt.Sprintf("claim %s: %v", *name, err)
		}
		if mustCheckOwner {
			if err := podclaims.IsForPod(pod, claim); err != nil {
				return nil, err.Error()
			}
		}
		if claim.Status.Allocation == nil || !podclaims.IsReservedForPod(pod, claim) {
			return nil, fmt.Sprintf("claim %s not allocated and reserved for the pod yet", *name)
		}
		if selector := claim.Status.Allocation.NodeSelector; selector != nil && !allocator.NodeSelectorMatches(selector, s.kubeletNode(pod.Spec.NodeName)) {
			// Its devices are attached elsewhere: no driver on this
			// node could prepare them, whoever reserved the claim.
			return nil, fmt.Sprintf("claim %s is allocated for other nodes than %s", *name, pod.Spec.NodeName)
		}
		claims = append(claims, claim)
	}
	return claims, ""
}

// ReasonFailedPrepare is the reason of the event on a pod whose claims
// could not be prepared (as a kubelet reports it).
const ReasonFailedPrepare = "FailedPrepareDynamicResources"

// prepare asks the driver to prepare every claim of the pod that has
// devices of the driver, all in one call. A claim that fails keeps the
// pod from starting: the pod gets a Warning event naming the claim and the
// driver's error, and is tried again with backoff. As a kubelet, it skips
// the calls that every device of the driver in a claim lists in
// skipNodeOperations.
func (s *Simulator) prepare(ctx context.Context, key string, pod *corev1.Pod, claims []*resourcev1.ResourceClaim) error {
	var toPrepare []*resourcev1.ResourceClaim
	var held []dra.NamespacedObject
	var failed []*dra.ClaimError
	for _, claim := range claims {
		results := dra.AllocatedDevices(claim, s.opts.Driver)
		if len(results) == 0 {
			continue
		}
		name := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}
		if !features.Enabled(features.DRAOptionalNodeOperations) && slices.ContainsFunc(results, func(r resourcev1.DeviceRequestAllocationResult) bool { return len(r.SkipNodeOperations) > 0 }) {
			// A claim allocated while the gate was on: upstream's kubelet
			// refuses it rather than guess which calls to make.
			failed = append(failed, &dra.ClaimError{Claim: name, Err: errors.New("skipNodeOperations is set but the DRAOptionalNodeOperations feature gate is off")})
			continue
		}
		if !skipsNodeOperation(results, resourcev1.SkipNodeOperationNodePrepareResources) {
			toPrepare = append(toPrepare, claim)
		}
		if !skipsNodeOperation(results, resourcev1.SkipNodeOperationNodeUnprepareResources) {
			held = append(held, dra.NamespacedObject{NamespacedName: name, UID: claim.UID})
		}
	}
	if len(failed) == 0 {
		_, failed = dra.Prepare(ctx, s.preparer, toPrepare)
	}
	if len(failed) > 0 {
		var errs []error
		for _, f := range failed {
			if s.recorder != nil {
				s.recorder.Eventf(pod, corev1.EventTypeWarning, ReasonFailedPrepare,
					"Failed to prepare claim %s with driver %s: %v", f.Claim.Name, s.opts.Driver, f.Err)
			}
			errs = append(errs, f)
		}
		return fmt.Errorf("prepare the claims of pod %s: %w", klog.KObj(pod), errors.Join(errs...))
	}
	if len(held) == 0 {
		return nil
	}
	s.mu.Lock()
	s.prepared[key] = held
	s.mu.Unlock()
	klog.FromContext(ctx).V(2).Info("Prepared the claims of the pod", "pod", klog.KObj(pod), "prepared", len(toPrepare), "held", len(held))
	return nil
}

// skipsNodeOperation reports whether every device of the driver in a
// claim lets the node skip the operation, which is when upstream's kubelet
// does not call the driver for it.
func skipsNodeOperation(results []resourcev1.DeviceRequestAllocationResult, op resourcev1.SkipNodeOperation) bool {
	for _, r := range results {
		if !slices.Contains(r.SkipNodeOperations, op) && !slices.Contains(r.SkipNodeOperations, resourcev1.SkipNodeOperationAll) {
			return false
		}
	}
	return len(results) > 0
}

// unprepare releases the claims prepared for the pod, once.
func (s *Simulator) unprepare(ctx context.Context, key string) error {
	s.mu.Lock()
	held, ok := s.prepared[key]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	if failed := dra.Unprepare(ctx, s.preparer, held); len(failed) > 0 {
		errs := make([]error, 0, len(failed))
		for _, f := range failed {
			errs = append(errs, f)
		}
		return fmt.Errorf("unprepare the claims of pod %s: %w", key, errors.Join(errs...))
	}
	s.mu.Lock()
	delete(s.prepared, key)
	s.mu.Unlock()
	klog.FromContext(ctx).V(2).Info("Unprepared the claims of the pod", "pod", key, "claims", len(held))
	return nil
}

// AnnotationPrepareError on a claim makes the fake driver fail to prepare
// it, with the annotation's value as the error: a way to see what a
// failing driver does to a pod.
const AnnotationPrepareError = "simulator.draplane.dev/prepare-error"

// fakePreparer is the fake driver's side of prepare: nothing to set up,
// so every claim succeeds unless it asks to fail.
type fakePreparer struct {
	driver string
}

func (f *fakePreparer) PrepareResourceClaims(ctx context.Context, claims []*resourcev1.ResourceClaim) (map[types.UID]dra.PrepareResult, error) {
	results := make(map[types.UID]dra.PrepareResult, len(claims))
	for _, claim := range claims {
		if msg, ok := claim.Annotations[AnnotationPrepareError]; ok {
			results[claim.UID] = dra.PrepareResult{Err: errors.New(msg)}
			continue
		}
		var devices []dra.PreparedDevice
		for _, result := range dra.AllocatedDevices(claim, f.driver) {
			devices = append(devices, dra.PreparedDevice{Request: result.Request, Pool: result.Pool, Device: result.Device})
		}
		results[claim.UID] = dra.PrepareResult{Devices: devices}
	}
	return results, nil
}

func (f *fakePreparer) UnprepareResourceClaims(ctx context.Context, claims []dra.NamespacedObject) (map[types.UID]error, error) {
	results := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		results[claim.UID] = nil
	}
	return results, nil
}

// kubeletNode is the node as its kubelet knows it: the name and labels
// the simulator registers.
func (s *Simulator) kubeletNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: s.nodeLabels(name)}}
}

// finishes: with a pod duration, the pod's containers exit then; a pod
// with restartPolicy Always would be restarted by its kubelet, so it runs on.
func (s *Simulator) finishes(pod *corev1.Pod) bool {
	return s.opts.PodDuration > 0 && pod.Spec.RestartPolicy != corev1.RestartPolicyAlways && pod.Spec.RestartPolicy != ""
}

func (s *Simulator) writeStatus(ctx context.Context, pod *corev1.Pod) error {
	_, err := s.kubeClient.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{FieldManager: ControllerName})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("update status of pod %s to %s: %w", klog.KObj(pod), pod.Status.Phase, err)
	}
	return nil
}

func podDone(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// runningStatus is what a kubelet reports once every container started.
func runningStatus(pod *corev1.Pod, now time.Time) *corev1.Pod {
	pod = pod.DeepCopy()
	t := metav1.NewTime(now)
	pod.Status.Phase = corev1.PodRunning
	pod.Status.StartTime = &t
	pod.Status.Reason, pod.Status.Message = "", ""
	for _, c := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		setCondition(pod, c, corev1.ConditionTrue, "", t)
	}
	pod.Status.InitContainerStatuses = nil
	for _, c := range pod.Spec.InitContainers {
		pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: imageID(c.Image), ContainerID: containerID(pod, c.Name),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", StartedAt: t, FinishedAt: t, ContainerID: containerID(pod, c.Name),
			}},
		})
	}
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: imageID(c.Image), ContainerID: containerID(pod, c.Name),
			Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t}},
		})
	}
	return pod
}

// succeededStatus is what a kubelet reports once every container exited 0.
func succeededStatus(pod *corev1.Pod, now time.Time) *corev1.Pod {
	if len(pod.Status.ContainerStatuses) != len(pod.Spec.Containers) {
		// Marked Running by someone else: fill in what we would have.
		started := now
		if pod.Status.StartTime != nil {
			started = pod.Status.StartTime.Time
		}
		pod = runningStatus(pod, started)
	} else {
		pod = pod.DeepCopy()
	}
	t := metav1.NewTime(now)
	pod.Status.Phase = corev1.PodSucceeded
	for _, c := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.ContainersReady, corev1.PodReady} {
		setCondition(pod, c, corev1.ConditionFalse, "PodCompleted", t)
	}
	for i := range pod.Status.ContainerStatuses {
		status := &pod.Status.ContainerStatuses[i]
		started := t
		if status.State.Running != nil {
			started = status.State.Running.StartedAt
		}
		status.Ready, status.Started = false, ptr.To(false)
		status.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 0, Reason: "Completed", StartedAt: started, FinishedAt: t, ContainerID: status.ContainerID,
		}}
	}
	return pod
}

// setCondition sets a pod condition, keeping its transition time when the
// status does not change.
func setCondition(pod *corev1.Pod, conditionType corev1.PodConditionType, status corev1.ConditionStatus, reason string, now metav1.Time) {
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type != conditionType {
			continue
		}
		if c.Status != status {
			c.LastTransitionTime = now
		}
		c.Status, c.Reason, c.Message = status, reason, ""
		c.LastProbeTime = metav1.Time{}
		return
	}
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
		Type: conditionType, Status: status, Reason: reason, LastTransitionTime: now,
	})
}

func containerID(pod *corev1.Pod, container string) string {
	return fmt.Sprintf("sim://%s/%s", pod.UID, container)
}

func imageID(image string) string { return "sim://" + image }
