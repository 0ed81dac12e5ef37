package podclaims

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcevalidation "github.com/draplane/draplane/apis/resource/validation"
)

// Extended resources backed by devices (KEP-5004): a container that asks
// for an extended resource which a DeviceClass names, in its
// spec.extendedResourceName or implicitly as DeviceClassResourcePrefix
// followed by the class name, gets devices of that class. All such
// requests of a pod go into one claim made for the pod, which
// pod.status.extendedResourceClaimStatus records with the mapping of
// container and resource to the claim's requests.
//
// The names are upstream's: they live in the pod's API (resource names of
// containers, an annotation on the claim), not in our API group, so a pod
// written for a cluster means the same thing here.
const (
	// DeviceClassResourcePrefix followed by a DeviceClass name is the
	// extended resource name every class has.
	DeviceClassResourcePrefix = "deviceclass.resource.kubernetes.io/"
	// ExtendedResourceClaimAnnotation is "true" on the claim made for a
	// pod's extended resources.
	ExtendedResourceClaimAnnotation = "resource.kubernetes.io/extended-resource-claim"
	// ExtendedResourcesPodClaim is the name under which ClaimsOf lists
	// that claim. It is not a valid pod claim name, so it cannot clash
	// with one of spec.resourceClaims.
	ExtendedResourcesPodClaim = "<extended-resources>"
	// ExtendedResourcesClaimSuffix names the claim:
	// "<pod>-extended-resources-<random>", as upstream.
	ExtendedResourcesClaimSuffix = "extended-resources"
)

// IsExtendedResourceCandidate tells whether a container resource name may
// stand for devices: an extended resource name (domain-prefixed, outside
// kubernetes.io) or a class's implicit name. Only a DeviceClass decides
// whether it does.
func IsExtendedResourceCandidate(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), DeviceClassResourcePrefix) || resourcevalidation.IsExtendedResourceName(name)
}

// ExtendedResourceCandidates lists, sorted and without duplicates, the
// candidate resource names that some container or init container of the
// pod requests a non-zero amount of.
func ExtendedResourceCandidates(pod *corev1.Pod) []corev1.ResourceName {
	var names []corev1.ResourceName
	add := func(containers []corev1.Container) {
		for i := range containers {
			for name, quantity := range containers[i].Resources.Requests {
				if !quantity.IsZero() && IsExtendedResourceCandidate(name) && !slices.Contains(names, name) {
					names = append(names, name)
				}
			}
		}
	}
	add(pod.Spec.InitContainers)
	add(pod.Spec.Containers)
	slices.Sort(names)
	return names
}

// ClassResolver maps extended resource names to DeviceClasses.
type ClassResolver struct {
	classes map[corev1.ResourceName]*resourcev1.DeviceClass
}

// NewClassResolver indexes the classes. Several classes may name the same
// extended resource (while moving from one class to another): the newest
// wins, the lower name between classes of the same age, as upstream. A
// class's implicit name is its own.
func NewClassResolver(classes []*resourcev1.DeviceClass) *ClassResolver {
	r := &ClassResolver{classes: make(map[corev1.ResourceName]*resourcev1.DeviceClass, 2*len(classes))}
	for _, class := range classes {
		r.classes[corev1.ResourceName(DeviceClassResourcePrefix+class.Name)] = class
	}
	for _, class := range classes {
		if class.Spec.ExtendedResourceName == nil {
			continue
		}
		name := corev1.ResourceName(*class.Spec.ExtendedResourceName)
		if other, ok := r.classes[name]; ok && !preferClass(class, other) {
			continue
		}
		r.classes[name] = class
	}
	return r
}

// preferClass: a is newer than b, or as old and of lower name.
func preferClass(a, b *resourcev1.DeviceClass) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	}
	return a.Name < b.Name
}

// Class returns the class behind an extended resource name, or nil.
func (r *ClassResolver) Class(name corev1.ResourceName) *resourcev1.DeviceClass {
	if r == nil {
		return nil
	}
	return r.classes[name]
}

// NeedsExtendedResourceClaim tells whether the pod asks for an extended
// resource that a class backs.
func NeedsExtendedResourceClaim(pod *corev1.Pod, r *ClassResolver) bool {
	for _, name := range ExtendedResourceCandidates(pod) {
		if r.Class(name) != nil {
			return true
		}
	}
	return false
}

// ExtendedResourceClaimName returns the claim recorded in the pod status
// for its extended resources, or "".
func ExtendedResourceClaimName(pod *corev1.Pod) string {
	if pod.Status.ExtendedResourceClaimStatus == nil {
		return ""
	}
	return pod.Status.ExtendedResourceClaimStatus.ResourceClaimName
}

// ExtendedResourcesFromDevices are the extended resources that the
// pod's recorded claim for extended resources covers: devices serve
// them, not a node's allocatable.
func ExtendedResourcesFromDevices(pod *corev1.Pod) sets.Set[corev1.ResourceName] {
	if pod.Status.ExtendedResourceClaimStatus == nil {
		return nil
	}
	names := sets.New[corev1.ResourceName]()
	for _, mapping := range pod.Status.ExtendedResourceClaimStatus.RequestMappings {
		names.Insert(corev1.ResourceName(mapping.ResourceName))
	}
	return names
}

// IsExtendedResourceClaim tells whether the claim was made for a pod's
// extended resources.
func IsExtendedResourceClaim(claim *resourcev1.ResourceClaim) bool {
	return claim.Annotations[ExtendedResourceClaimAnnotation] == "true"
}

// ExtendedResourceRequests computes the device requests of the pod's
// extended resource claim and which container resource each request
// serves, as upstream does:
//
//   - every regular container, and every init container that keeps
//     running (restartPolicy Always, a sidecar), gets a request of its
//     own per resource: "container-<i>-request-<j>", where i indexes
//     init containers followed by containers and j the container's
//     resource names in sorted order; they all run together, so they
//     add up;
//   - an init container that runs to completion first uses the devices
//     of the long-lived containers that come after it (they are not
//     running yet) and asks for the rest; only the largest of those
//     rests is requested, once, because such init containers run one
//     after the other. All of them map to that one request.
//
// Resources that no class backs are left out (a node would have to
// provide them otherwise). The requests are sorted by name.
func ExtendedResourceRequests(pod *corev1.Pod, r *ClassResolver) ([]resourcev1.DeviceRequest, []corev1.ContainerExtendedResourceRequest) {
	containers := slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers)
	var requests []resourcev1.DeviceRequest
	var mappings []corev1.ContainerExtendedResourceRequest
	for _, name := range ExtendedResourceCandidates(pod) {
		class := r.Class(name)
		if class == nil {
			continue
		}
		resourceRequests, resourceMappings := requestsForResource(containers, len(pod.Spec.InitContainers), name, class.Name)
		requests = append(requests, resourceRequests...)
		mappings = append(mappings, resourceMappings...)
	}
	slices.SortFunc(requests, func(a, b resourcev1.DeviceRequest) int { return strings.Compare(a.Name, b.Name) })
	return requests, mappings
}

// requestsForResource is ExtendedResourceRequests for one resource.
// containers are the init containers followed by the regular ones.
func requestsForResource(containers []corev1.Container, numInit int, name corev1.ResourceName, className string) ([]resourcev1.DeviceRequest, []corev1.ContainerExtendedResourceRequest) {
	// longLived[i] is the request of container i if it runs until the
	// pod ends and asks for the resource.
	longLived := make([]*resourcev1.DeviceRequest, len(containers))
	var longMappings, shortMappings []corev1.ContainerExtendedResourceRequest
	for i := range containers {
		if isShortLived(&containers[i], i < numInit) {
			continue
		}
		request, m := containerRequest(i, &containers[i], name, className, nil)
		longLived[i] = request
		longMappings = append(longMappings, m...)
	}
	var largest *resourcev1.DeviceRequest
	shortNames := map[string]bool{}
	for i := range containers {
		if !isShortLived(&containers[i], i < numInit) {
			continue
		}
		request, m := containerRequest(i, &containers[i], name, className, longLived[i:])
		if request != nil {
			shortNames[request.Name] = true
			if largest == nil || largest.Exactly.Count < request.Exactly.Count {
				largest = request
			}
		}
		shortMappings = append(shortMappings, m...)
	}
	var requests []resourcev1.DeviceRequest
	if largest != nil {
		requests = append(requests, *largest)
		for i := range shortMappings {
			if shortNames[shortMappings[i].RequestName] {
				shortMappings[i].RequestName = largest.Name
			}
		}
	}
	for _, request := range longLived {
		if request != nil {
			requests = append(requests, *request)
		}
	}
	return requests, append(longMappings, shortMappings...)
}

// isShortLived: an init container that is not a sidecar.
func isShortLived(container *corev1.Container, isInit bool) bool {
	return isInit && (container.RestartPolicy == nil || *container.RestartPolicy != corev1.ContainerRestartPolicyAlways)
}

// containerRequest returns what container i asks for of the resource:
// first the devices of reusable requests (nil entries are skipped), then
// a request of its own for the rest, if any is left.
func containerRequest(i int, container *corev1.Container, name corev1.ResourceName, className string, reusable []*resourcev1.DeviceRequest) (*resourcev1.DeviceRequest, []corev1.ContainerExtendedResourceRequest) {
	quantity, ok := container.Resources.Requests[name]
	if !ok {
		return nil, nil
	}
	want, ok := quantity.AsInt64()
	if !ok || want <= 0 {
		return nil, nil
	}
	var mappings []corev1.ContainerExtendedResourceRequest
	have := int64(0)
	for _, request := range reusable {
		if request == nil {
			continue
		}
		have += request.Exactly.Count
		mappings = append(mappings, corev1.ContainerExtendedResourceRequest{ContainerName: container.Name, ResourceName: string(name), RequestName: request.Name})
		if have >= want {
			return nil, mappings
		}
	}
	names := make([]string, 0, len(container.Resources.Requests))
	for resourceName := range container.Resources.Requests {
		names = append(names, string(resourceName))
	}
	slices.Sort(names)
	requestName := fmt.Sprintf("container-%d-request-%d", i, slices.Index(names, string(name)))
	request := &resourcev1.DeviceRequest{
		Name: requestName,
		Exactly: &resourcev1.ExactDeviceRequest{
			DeviceClassName: className,
			AllocationMode:  resourcev1.DeviceAllocationModeExactCount,
			Count:           want - have,
		},
	}
	return request, append(mappings, corev1.ContainerExtendedResourceRequest{ContainerName: container.Name, ResourceName: string(name), RequestName: requestName})
}
