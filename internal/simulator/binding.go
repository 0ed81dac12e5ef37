package simulator

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// Binding conditions: with Options.BindingCondition set, every simulated
// device lists it in bindingConditions (and BindingFailureCondition in
// bindingFailureConditions), so a pod that gets one is bound only once the
// driver says the device is ready. The simulator's driver says so
// BindingDelay after the allocation: it sets the condition True in the
// claim's status.devices, or, on the nodes of BindingFailureNodes, the
// failure condition, as a driver whose attach failed would.

// DefaultBindingFailureCondition is the failure condition of simulated
// devices when only the binding condition is named.
const DefaultBindingFailureCondition = "BindingFailed"

// bindingEnabled: the simulated devices have binding conditions.
func (s *Simulator) bindingEnabled() bool { return s.opts.BindingCondition != "" }

// withBindingConditions adds the binding conditions to a device.
func (s *Simulator) withBindingConditions(device *resourcev1.Device) {
	if !s.bindingEnabled() {
		return
	}
	device.BindingConditions = []string{s.opts.BindingCondition}
	device.BindingFailureConditions = []string{s.opts.BindingFailureCondition}
}

// enqueueBinding queues an allocated claim whose simulated devices still
// wait for the driver's word.
func (s *Simulator) enqueueBinding(obj any) {
	claim, ok := obj.(*resourcev1.ResourceClaim)
	if !ok || !s.bindingEnabled() || len(s.unreported(claim)) == 0 {
		return
	}
	key, err := cache.MetaNamespaceKeyFunc(claim)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	s.bindingQueue.Add(key)
}

// unreported are the results of the claim's allocation on simulated
// devices with binding conditions for which neither the condition nor the
// failure condition is reported yet.
func (s *Simulator) unreported(claim *resourcev1.ResourceClaim) []resourcev1.DeviceRequestAllocationResult {
	if claim.Status.Allocation == nil {
		return nil
	}
	var out []resourcev1.DeviceRequestAllocationResult
	for _, result := range claim.Status.Allocation.Devices.Results {
		if result.Driver != s.opts.Driver || !s.nodes[result.Pool] || len(result.BindingConditions) == 0 {
			continue
		}
		i := slices.IndexFunc(claim.Status.Devices, func(d resourcev1.AllocatedDeviceStatus) bool {
			return d.Driver == result.Driver && d.Pool == result.Pool && d.Device == result.Device
		})
		if i >= 0 && (apimeta.FindStatusCondition(claim.Status.Devices[i].Conditions, s.opts.BindingCondition) != nil ||
			apimeta.FindStatusCondition(claim.Status.Devices[i].Conditions, s.opts.BindingFailureCondition) != nil) {
			continue
		}
		out = append(out, result)
	}
	return out
}

// syncBinding reports the binding conditions of a claim's simulated
// devices once BindingDelay has passed since the allocation. It returns
// when to look at the claim again.
func (s *Simulator) syncBinding(ctx context.Context, key string) (time.Duration, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil
	}
	claim, err := s.claimLister.ResourceClaims(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(s.unreported(claim)) == 0 {
		return 0, nil
	}
	if at := claim.Status.Allocation.AllocationTimestamp; at != nil {
		if left := at.Add(s.opts.BindingDelay).Sub(s.clock.Now()); left > 0 {
			return left, nil
		}
	}
	claims := s.resourceClient.ResourceV1().ResourceClaims(namespace)
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		fresh, err := claims.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		results := s.unreported(fresh)
		if len(results) == 0 {
			return nil
		}
		fresh = fresh.DeepCopy()
		for _, result := range results {
			s.report(fresh, result)
		}
		_, err = claims.UpdateStatus(ctx, fresh, metav1.UpdateOptions{FieldManager: ControllerName})
		return err
	})
	if apierrors.IsNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("report the binding conditions of claim %s: %w", key, err)
	}
	klog.FromContext(ctx).V(2).Info("Reported binding conditions", "claim", klog.KRef(namespace, name))
	return 0, nil
}

// report sets the binding condition of one device True, or its failure
// condition on the nodes that fail.
func (s *Simulator) report(claim *resourcev1.ResourceClaim, result resourcev1.DeviceRequestAllocationResult) {
	condition := metav1.Condition{
		Type:               s.opts.BindingCondition,
		Status:             metav1.ConditionTrue,
		ObservedGeneration: claim.Generation,
		LastTransitionTime: metav1.NewTime(s.clock.Now()),
		Reason:             ReasonSimulated,
		Message:            fmt.Sprintf("simulated device %s on node %s is ready", result.Device, result.Pool),
	}
	if slices.Contains(s.opts.BindingFailureNodes, result.Pool) {
		condition.Type = s.opts.BindingFailureCondition
		condition.Message = fmt.Sprintf("simulated device %s on node %s failed to get ready (--simulate-binding-failure-nodes)", result.Device, result.Pool)
	}
	i := slices.IndexFunc(claim.Status.Devices, func(d resourcev1.AllocatedDeviceStatus) bool {
		return d.Driver == result.Driver && d.Pool == result.Pool && d.Device == result.Device
	})
	if i < 0 {
		status := resourcev1.AllocatedDeviceStatus{Driver: result.Driver, Pool: result.Pool, Device: result.Device}
		if result.ShareID != nil {
			status.ShareID = ptr.To(string(*result.ShareID))
		}
		claim.Status.Devices = append(claim.Status.Devices, status)
		i = len(claim.Status.Devices) - 1
	}
	apimeta.SetStatusCondition(&claim.Status.Devices[i].Conditions, condition)
}
