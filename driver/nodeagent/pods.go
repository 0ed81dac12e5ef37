package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/driver"
	"github.com/draplane/draplane/internal/features"
	"github.com/draplane/draplane/internal/podclaims"
	"github.com/draplane/draplane/internal/podclaims/nodeaffinity"
)

var everything = labels.Everything()

const (
	// ReasonFailedPrepare is the reason of the Warning event on a pod
	// whose claims could not be prepared, as a kubelet reports it.
	ReasonFailedPrepare = "FailedPrepareDynamicResources"
	// ReasonPrepared is the reason of the event that shows what the
	// drivers returned for a pod's claims (their CDI device IDs).
	ReasonPrepared = "PreparedDynamicResources"
)

// SyncPod moves a pod on the agent's nodes one step along its life: a
// pending pod starts Running once its claims are prepared; with a pod
// duration, a Running pod that cannot restart Succeeds once the duration
// is over; the claims of a pod that is done or gone are unprepared. It
// returns when to look at the pod again.
func (a *Agent) SyncPod(ctx context.Context, key string) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	pod, err := a.podLister.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return 0, a.unprepare(ctx, key)
	}
	if err != nil {
		return 0, err
	}
	// A kubelet unprepares once the pod's containers are gone; a pod of
	// the same name but another UID replaced the one the claims were
	// prepared for, and goes on once those are unprepared.
	gone := !a.nodes[pod.Spec.NodeName] || pod.DeletionTimestamp != nil || podDone(pod)
	if gone || a.otherPod(key, pod) {
		if err := a.unprepare(ctx, key); err != nil || gone {
			if err == nil && pod.DeletionTimestamp != nil && a.opts.FinishDeletions && a.nodes[pod.Spec.NodeName] {
				err = a.finishDeletion(ctx, pod)
			}
			return 0, err
		}
	}
	now := a.clock.Now()
	switch pod.Status.Phase {
	case "", corev1.PodPending:
		claims, waitingFor := a.readyClaims(ctx, pod)
		if waitingFor != "" {
			logger.V(4).Info("Pod waits for its claims", "pod", klog.KObj(pod), "reason", waitingFor)
			return a.opts.ClaimRetry, nil
		}
		if err := a.prepare(ctx, key, pod, claims); err != nil {
			return 0, err
		}
		running := runningStatus(pod, now)
		a.setResourceHealth(running, claims)
		if err := a.writeStatus(ctx, running); err != nil {
			return 0, err
		}
		logger.V(2).Info("Pod started", "pod", klog.KObj(pod), "node", pod.Spec.NodeName)
		if a.finishes(pod) {
			return a.opts.PodDuration, nil
		}
		return 0, nil
	case corev1.PodRunning:
		if err := a.updateResourceHealth(ctx, pod); err != nil {
			return 0, err
		}
		if !a.finishes(pod) {
			return 0, nil
		}
		started := now
		if pod.Status.StartTime != nil {
			started = pod.Status.StartTime.Time
		}
		if left := started.Add(a.opts.PodDuration).Sub(now); left > 0 {
			return left, nil
		}
		if err := a.writeStatus(ctx, succeededStatus(pod, now)); err != nil {
			return 0, err
		}
		logger.V(2).Info("Pod succeeded", "pod", klog.KObj(pod), "node", pod.Spec.NodeName)
		return 0, a.unprepare(ctx, key)
	}
	return 0, nil
}

// finishDeletion removes a deleted pod whose claims are unprepared, as
// the kubelet removes a pod once its containers are gone.
func (a *Agent) finishDeletion(ctx context.Context, pod *corev1.Pod) error {
	uid := pod.UID
	err := a.nodeClient(pod.Spec.NodeName).CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("remove deleted pod %s: %w", klog.KObj(pod), err)
	}
	klog.FromContext(ctx).V(2).Info("Pod removed", "pod", klog.KObj(pod), "node", pod.Spec.NodeName)
	return nil
}

// otherPod reports whether claims are held for a pod of this key with
// another UID than pod's.
func (a *Agent) otherPod(key string, pod *corev1.Pod) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	held, ok := a.prepared[key]
	return ok && held.UID != string(pod.UID)
}

// readyClaims returns the pod's claims once each is allocated and
// reserved for it, or says which claim keeps the pod from starting. A
// kubelet starts a pod only then (and prepares the devices first): that
// matters for pods created with spec.nodeName, which are bound before
// their claims are allocated.
//
// Claims are got by name through the node's identity, which may get only
// the claims allocated on its node: one the server does not show it yet
// (a 403 or 404) is one to wait for.
func (a *Agent) readyClaims(ctx context.Context, pod *corev1.Pod) ([]*resourcev1.ResourceClaim, string) {
	var claims []*resourcev1.ResourceClaim
	for _, podClaim := range podclaims.ClaimsOf(pod) {
		name, mustCheckOwner, err := podclaims.ClaimName(pod, podClaim)
		if err != nil {
			return nil, err.Error()
		}
		if name == nil {
			continue
		}
		claim, err := a.claims.GetClaim(ctx, pod.Spec.NodeName, pod.Namespace, *name)
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
		if selector := claim.Status.Allocation.NodeSelector; selector != nil && !nodeaffinity.NodeSelectorMatches(selector, a.kubeletNode(pod.Spec.NodeName)) {
			// Its devices are attached elsewhere: no driver on this
			// node could prepare them, whoever reserved the claim.
			return nil, fmt.Sprintf("claim %s is allocated for other nodes than %s", *name, pod.Spec.NodeName)
		}
		claims = append(claims, claim)
	}
	return claims, ""
}

// kubeletNode is the node as its kubelet knows it: its name and labels.
func (a *Agent) kubeletNode(name string) *corev1.Node {
	nodeLabels := map[string]string{corev1.LabelHostname: name}
	if a.opts.NodeLabels != nil {
		nodeLabels = a.opts.NodeLabels(name)
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: nodeLabels}}
}

// driverClaims are the claims of a pod one driver is asked about.
type driverClaims struct {
	preparer driver.Preparer
	// toPrepare are the claims the driver prepares; held those it
	// unprepares later (skipNodeOperations may leave a claim out of
	// either).
	toPrepare []*resourcev1.ResourceClaim
	held      []heldClaim
}

// prepare asks each driver to prepare all of its claims of the pod in one
// call. A claim that fails keeps the pod from starting: the pod gets a
// Warning event naming the claim, the driver and its error, and is tried
// again with backoff. What succeeded is recorded (and unprepared when the
// pod goes, even if it never started). As a kubelet, it skips the calls
// that every device of a driver in a claim lists in skipNodeOperations.
func (a *Agent) prepare(ctx context.Context, key string, pod *corev1.Pod, claims []*resourcev1.ResourceClaim) error {
	if a.completed(key, pod) {
		// Prepared before a restart, not marked Running yet.
		return nil
	}
	uids := make([]types.UID, 0, len(claims))
	for _, claim := range claims {
		uids = append(uids, claim.UID)
	}
	defer a.claimLocks.lock(uids)()
	byDriver := map[string]*driverClaims{}
	var failed []driverError
	for _, claim := range claims {
		name := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}
		for _, driverName := range driversOf(claim) {
			preparer, ok := a.opts.Drivers.Preparer(driverName)
			if !ok {
				if !a.opts.OnlyKnownDrivers {
					failed = append(failed, driverError{driverName, &driver.ClaimError{Claim: name,
						Err: fmt.Errorf("driver %s is not registered on node %s", driverName, pod.Spec.NodeName)}})
				}
				continue
			}
			results := driver.AllocatedDevices(claim, driverName)
			if !features.Enabled(features.DRAOptionalNodeOperations) && slices.ContainsFunc(results, func(r resourcev1.DeviceRequestAllocationResult) bool { return len(r.SkipNodeOperations) > 0 }) {
				// A claim allocated while the gate was on: upstream's
				// kubelet refuses it rather than guess which calls to make.
				failed = append(failed, driverError{driverName, &driver.ClaimError{Claim: name,
					Err: errors.New("skipNodeOperations is set but the DRAOptionalNodeOperations feature gate is off")}})
				continue
			}
			dc := byDriver[driverName]
			if dc == nil {
				dc = &driverClaims{preparer: preparer}
				byDriver[driverName] = dc
			}
			if !skipsNodeOperation(results, resourcev1.SkipNodeOperationNodePrepareResources) {
				dc.toPrepare = append(dc.toPrepare, claim)
			}
			if !skipsNodeOperation(results, resourcev1.SkipNodeOperationNodeUnprepareResources) {
				dc.held = append(dc.held, heldClaim{Driver: driverName, Namespace: claim.Namespace, Name: claim.Name, UID: string(claim.UID)})
			}
		}
	}
	var held []heldClaim
	var shown []string
	if len(failed) == 0 {
		for _, driverName := range sortedKeys(byDriver) {
			dc := byDriver[driverName]
			// A claim that another pod of the node holds is prepared.
			call := slices.DeleteFunc(slices.Clone(dc.toPrepare), func(c *resourcev1.ResourceClaim) bool {
				return a.heldByOthers(key, pod.Spec.NodeName, heldClaim{Driver: driverName, UID: string(c.UID)})
			})
			results, claimErrs := driver.Prepare(ctx, dc.preparer, call)
			for _, f := range claimErrs {
				failed = append(failed, driverError{driverName, f})
			}
			for _, h := range dc.held {
				if _, ok := results[types.UID(h.UID)]; ok || !slices.ContainsFunc(call, func(c *resourcev1.ResourceClaim) bool { return string(c.UID) == h.UID }) {
					held = append(held, h)
				}
			}
			shown = append(shown, describePrepared(driverName, call, results)...)
		}
	}
	complete := len(failed) == 0
	// Recorded only where a driver holds something or was called: a pod
	// with no claim of a driver on this node has nothing to unprepare or
	// to keep from being prepared twice, and costs no checkpoint write.
	if len(held) > 0 || (complete && len(byDriver) > 0) {
		if err := a.record(key, preparedPod{UID: string(pod.UID), Node: pod.Spec.NodeName, Claims: held, Complete: complete}); err != nil {
			return err
		}
	}
	if !complete {
		errs := make([]error, 0, len(failed))
		for _, f := range failed {
			if a.recorder != nil {
				a.recorder.Eventf(pod, corev1.EventTypeWarning, ReasonFailedPrepare,
					"Failed to prepare claim %s with driver %s: %v", f.err.Claim.Name, f.driver, f.err.Err)
			}
			errs = append(errs, fmt.Errorf("driver %s: %w", f.driver, f.err))
		}
		return fmt.Errorf("prepare the claims of pod %s: %w", klog.KObj(pod), errors.Join(errs...))
	}
	if len(shown) > 0 && a.recorder != nil {
		a.recorder.Eventf(pod, corev1.EventTypeNormal, ReasonPrepared, "Prepared %s", strings.Join(shown, "; "))
	}
	klog.FromContext(ctx).V(2).Info("Prepared the claims of the pod", "pod", klog.KObj(pod), "drivers", len(byDriver), "held", len(held))
	return nil
}

// driverError is a claim that one driver failed to prepare.
type driverError struct {
	driver string
	err    *driver.ClaimError
}

// describePrepared says, per claim and device, which CDI devices a driver
// returned; nothing for drivers that return none (the fake driver).
func describePrepared(driverName string, claims []*resourcev1.ResourceClaim, results map[types.UID]driver.PrepareResult) []string {
	var out []string
	for _, claim := range claims {
		for _, device := range results[claim.UID].Devices {
			if len(device.CDIDeviceIDs) == 0 {
				continue
			}
			out = append(out, fmt.Sprintf("claim %s request %s: %s/%s/%s: CDI %s",
				claim.Name, device.Request, driverName, device.Pool, device.Device, strings.Join(device.CDIDeviceIDs, ",")))
		}
	}
	return out
}

// driversOf are the drivers of a claim's allocated devices, sorted.
func driversOf(claim *resourcev1.ResourceClaim) []string {
	var out []string
	for _, result := range claim.Status.Allocation.Devices.Results {
		if !slices.Contains(out, result.Driver) {
			out = append(out, result.Driver)
		}
	}
	slices.Sort(out)
	return out
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
func (a *Agent) unprepare(ctx context.Context, key string) error {
	a.mu.Lock()
	held, ok := a.prepared[key]
	a.mu.Unlock()
	if !ok {
		return nil
	}
	uids := make([]types.UID, 0, len(held.Claims))
	for _, c := range held.Claims {
		uids = append(uids, types.UID(c.UID))
	}
	defer a.claimLocks.lock(uids)()
	byDriver := map[string][]driver.NamespacedObject{}
	for _, c := range held.Claims {
		if a.heldByOthers(key, held.Node, c) {
			// Another pod of the node still uses it: released here,
			// unprepared by the last one.
			continue
		}
		byDriver[c.Driver] = append(byDriver[c.Driver], driver.NamespacedObject{
			NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, UID: types.UID(c.UID)})
	}
	var errs []error
	var left []heldClaim
	for _, driverName := range sortedKeys(byDriver) {
		claims := byDriver[driverName]
		preparer, ok := a.opts.Drivers.Preparer(driverName)
		if !ok {
			errs = append(errs, fmt.Errorf("driver %s is not registered: cannot unprepare %d claims", driverName, len(claims)))
			left = append(left, heldOf(held.Claims, driverName, func(heldClaim) bool { return true })...)
			continue
		}
		failed := driver.Unprepare(ctx, preparer, claims)
		for _, f := range failed {
			errs = append(errs, fmt.Errorf("driver %s: %w", driverName, f))
		}
		left = append(left, heldOf(held.Claims, driverName, func(c heldClaim) bool {
			return slices.ContainsFunc(failed, func(f *driver.ClaimError) bool { return f.Claim.Namespace == c.Namespace && f.Claim.Name == c.Name })
		})...)
	}
	if len(left) == 0 {
		if err := a.forget(key); err != nil {
			return err
		}
		klog.FromContext(ctx).V(2).Info("Unprepared the claims of the pod", "pod", key, "claims", len(held.Claims))
		return nil
	}
	held.Claims, held.Complete = left, false
	if err := a.record(key, held); err != nil {
		errs = append(errs, err)
	}
	return fmt.Errorf("unprepare the claims of pod %s: %w", key, errors.Join(errs...))
}

// heldOf are the held claims of one driver that keep holds for.
func heldOf(claims []heldClaim, driverName string, keep func(heldClaim) bool) []heldClaim {
	var out []heldClaim
	for _, c := range claims {
		if c.Driver == driverName && keep(c) {
			out = append(out, c)
		}
	}
	return out
}

// finishes: with a pod duration, the pod's containers exit then; a pod
// with restartPolicy Always would be restarted by its kubelet, so it runs on.
func (a *Agent) finishes(pod *corev1.Pod) bool {
	return a.opts.PodDuration > 0 && pod.Spec.RestartPolicy != corev1.RestartPolicyAlways && pod.Spec.RestartPolicy != ""
}

// writeStatus sends pod, a copy of the agent's, as its status. A status
// update keeps the stored managedFields whatever it carries, so the copy's
// are not sent.
func (a *Agent) writeStatus(ctx context.Context, pod *corev1.Pod) error {
	pod.ManagedFields = nil
	_, err := a.nodeClient(pod.Spec.NodeName).CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{FieldManager: a.opts.Name})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("update status of pod %s to %s: %w", klog.KObj(pod), pod.Status.Phase, err)
	}
	return nil
}

// nodeClient is the client of the node's identity.
func (a *Agent) nodeClient(nodeName string) kubernetes.Interface {
	if a.opts.NodeClient != nil {
		return a.opts.NodeClient(nodeName)
	}
	return a.kubeClient
}

func podDone(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// RunningStatus is what a kubelet reports once every container started.
func RunningStatus(pod *corev1.Pod, now time.Time) *corev1.Pod { return runningStatus(pod, now) }

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

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
