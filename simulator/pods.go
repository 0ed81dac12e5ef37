package simulator

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/draplane/draplane/allocator"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/controllers/podclaims"
)

// enqueuePod queues pods bound to a simulated node that still have a
// status transition ahead of them. Cheap: no API calls.
func (s *Simulator) enqueuePod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || !s.nodes[pod.Spec.NodeName] || pod.DeletionTimestamp != nil || podDone(pod) {
		return
	}
	key, err := cache.MetaNamespaceKeyFunc(pod)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	s.queue.Add(key)
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
	switch {
	case err != nil:
		utilruntime.HandleErrorWithContext(ctx, err, "Simulating pod failed", "pod", key)
		s.queue.AddRateLimited(key)
	case requeueAfter > 0:
		s.queue.Forget(key)
		s.queue.AddAfter(key, requeueAfter)
	default:
		s.queue.Forget(key)
	}
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
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if !s.nodes[pod.Spec.NodeName] || pod.DeletionTimestamp != nil || podDone(pod) {
		return 0, nil
	}
	now := s.clock.Now()
	switch pod.Status.Phase {
	case "", corev1.PodPending:
		if waitingFor := s.unpreparedClaim(pod); waitingFor != "" {
			// A claim event queues the pod again.
			logger.V(4).Info("Pod waits for its claims", "pod", klog.KObj(pod), "reason", waitingFor)
			return 0, nil
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
	}
	return 0, nil
}

// unpreparedClaim says which claim keeps the pod from starting, or "" when
// none does. A kubelet starts a pod only once each of its claims is
// allocated and reserved for it (it then prepares the devices): that
// matters for pods created with spec.nodeName, which are bound before
// their claims are allocated.
func (s *Simulator) unpreparedClaim(pod *corev1.Pod) string {
	for _, podClaim := range podclaims.ClaimsOf(pod) {
		name, mustCheckOwner, err := podclaims.ClaimName(pod, podClaim)
		if err != nil {
			return err.Error()
		}
		if name == nil {
			continue
		}
		claim, err := s.claimLister.ResourceClaims(pod.Namespace).Get(*name)
		if err != nil {
			return fmt.Sprintf("claim %s: %v", *name, err)
		}
		if mustCheckOwner {
			if err := podclaims.IsForPod(pod, claim); err != nil {
				return err.Error()
			}
		}
		if claim.Status.Allocation == nil || !podclaims.IsReservedForPod(pod, claim) {
			return fmt.Sprintf("claim %s not allocated and reserved for the pod yet", *name)
		}
		if selector := claim.Status.Allocation.NodeSelector; selector != nil && !allocator.NodeSelectorMatches(selector, s.kubeletNode(pod.Spec.NodeName)) {
			// Its devices are attached elsewhere: no driver on this
			// node could prepare them, whoever reserved the claim.
			return fmt.Sprintf("claim %s is allocated for other nodes than %s", *name, pod.Spec.NodeName)
		}
	}
	return ""
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
