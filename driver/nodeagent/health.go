package nodeagent

import (
	"context"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/klog/v2"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/podclaims"
)

// Device health (KEP-4680): a driver that reports the health of its
// devices has it shown in the status of each container that uses them,
// as a kubelet does: status.containerStatuses[].allocatedResourcesStatus,
// one entry per entry of the container's resources.claims, named as the
// API requires, "claim:<pod claim>" or "claim:<pod claim>/<request>" when
// the container names a request, listing each of its devices as
// "<driver>/<pool>/<device>" with its health. Pods are written only for
// devices whose health was reported.

// deviceID names a device.
type deviceID struct{ driver, pool, device string }

func (d deviceID) String() string { return d.driver + "/" + d.pool + "/" + d.device }

// deviceHealth is a device's last reported health.
type deviceHealth = corev1.ResourceHealthStatus

// DeviceHealth is one device's health as its driver reports it.
type DeviceHealth struct {
	Pool, Device string
	// Health is Healthy, Unhealthy or Unknown.
	Health corev1.ResourceHealthStatus
}

// SetDeviceHealth records the health a driver reports for its devices and
// looks at the Running pods of the agent's nodes again.
func (a *Agent) SetDeviceHealth(driverName string, devices []DeviceHealth) {
	changed := false
	a.mu.Lock()
	for _, d := range devices {
		id := deviceID{driverName, d.Pool, d.Device}
		if a.health[id] != d.Health {
			a.health[id] = d.Health
			changed = true
		}
	}
	a.mu.Unlock()
	if changed {
		a.Resync()
	}
}

// updateResourceHealth writes the health of a Running pod's devices when
// it differs from what the pod shows.
func (a *Agent) updateResourceHealth(ctx context.Context, pod *corev1.Pod) error {
	a.mu.Lock()
	reported := len(a.health) > 0
	a.mu.Unlock()
	if !reported {
		return nil
	}
	claims, waitingFor := a.readyClaims(ctx, pod)
	if waitingFor != "" {
		return nil
	}
	updated := pod.DeepCopy()
	if !a.setResourceHealth(updated, claims) || equality.Semantic.DeepEqual(updated.Status.ContainerStatuses, pod.Status.ContainerStatuses) {
		return nil
	}
	klog.FromContext(ctx).V(2).Info("Device health changed", "pod", klog.KObj(pod))
	return a.writeStatus(ctx, updated)
}

// setResourceHealth fills in allocatedResourcesStatus of the pod's
// container statuses from the reported health of its claims' devices. It
// reports whether any device of the pod has a reported health.
func (a *Agent) setResourceHealth(pod *corev1.Pod, claims []*resourcev1.ResourceClaim) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.health) == 0 {
		return false
	}
	byPodClaim := map[string]*resourcev1.ResourceClaim{}
	for _, podClaim := range podclaims.ClaimsOf(pod) {
		name, _, err := podclaims.ClaimName(pod, podClaim)
		if err != nil || name == nil {
			continue
		}
		for _, claim := range claims {
			if claim.Name == *name {
				byPodClaim[podClaim.Name] = claim
			}
		}
	}
	reported := false
	for i := range pod.Status.ContainerStatuses {
		status := &pod.Status.ContainerStatuses[i]
		container := containerOf(pod, status.Name)
		if container == nil {
			continue
		}
		var out []corev1.ResourceStatus
		for _, ref := range container.Resources.Claims {
			claim := byPodClaim[ref.Name]
			if claim == nil || claim.Status.Allocation == nil {
				continue
			}
			var resources []corev1.ResourceHealth
			for _, result := range claim.Status.Allocation.Devices.Results {
				request, _, _ := strings.Cut(result.Request, "/")
				if ref.Request != "" && request != ref.Request {
					continue
				}
				health, ok := a.health[deviceID{result.Driver, result.Pool, result.Device}]
				if !ok {
					continue
				}
				reported = true
				resources = append(resources, corev1.ResourceHealth{
					ResourceID: corev1.ResourceID(deviceID{result.Driver, result.Pool, result.Device}.String()), Health: health})
			}
			if len(resources) == 0 {
				continue
			}
			name := "claim:" + ref.Name
			if ref.Request != "" {
				name += "/" + ref.Request
			}
			out = append(out, corev1.ResourceStatus{Name: corev1.ResourceName(name), Resources: resources})
		}
		slices.SortFunc(out, func(x, y corev1.ResourceStatus) int { return strings.Compare(string(x.Name), string(y.Name)) })
		status.AllocatedResourcesStatus = out
	}
	return reported
}

func containerOf(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}
