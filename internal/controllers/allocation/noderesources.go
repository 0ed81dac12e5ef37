package allocation

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"

	resourcevalidation "github.com/draplane/draplane/apis/resource/validation"
	"github.com/draplane/draplane/internal/podclaims"
)

// Node resources: a scheduler beside others must not put a pod where the
// node's allocatable cpu, memory, ephemeral storage or pod count cannot
// hold it, counting every pod bound to the node, whoever bound it (as
// kube-scheduler's NodeResourcesFit). Standalone's simulated nodes carry
// no such accounting, so this is on only where Options.FitNodeResources
// asks for it (cluster mode).

// fittedResources are the resources checked against allocatable, beside
// the number of pods.
var fittedResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}

// insufficientNames are what a node may lack, in the order of
// nodeFilter.insufficient: fittedResources, then pods.
var insufficientNames = [...]string{"cpu", "memory", "ephemeral-storage", "pods"}

// demand is what one pod asks of a node.
type demand struct {
	// requests in the units of fittedResources: milli-cpu, bytes, bytes.
	requests [3]int64
	// scalar are the other resources a node's allocatable lists:
	// extended resources of device plugins, hugepages. Extended
	// resources that the pod's claim for extended resources covers come
	// from devices and are not counted here.
	scalar map[corev1.ResourceName]int64
}

func (d demand) equal(other demand) bool {
	return d.requests == other.requests && maps.Equal(d.scalar, other.scalar)
}

// podUsage is what one pod takes of its node.
type podUsage struct {
	node string
	// generation is the pod's metadata.generation the demand was read
	// at: requests come from the spec only, so a pod seen again at the
	// same generation on the same node needs no new sum.
	generation int64
	demand
}

// nodeUsage is the sum over the pods of one node.
type nodeUsage struct {
	requests [3]int64
	scalar   map[corev1.ResourceName]int64
	pods     int
}

// nodeRequests keeps, per node, what the pods bound to it request: from
// the pod informer, and for the pods this controller bound until the
// informer shows them bound (assume).
type nodeRequests struct {
	mutex sync.Mutex
	pods  map[types.UID]podUsage
	nodes map[string]*nodeUsage
	// freed, if set, is called (without the lock) when a pod counted on
	// a node no longer is: pods that did not fit may fit now, whoever
	// bound the pod that went, as kube-scheduler moves its unschedulable
	// pods when an assigned pod is deleted.
	freed func(node string)
}

func newNodeRequests() *nodeRequests {
	return &nodeRequests{pods: map[types.UID]podUsage{}, nodes: map[string]*nodeUsage{}}
}

// requestsOf sums a pod's requests as the scheduler does (init and
// sidecar containers, overhead, pod-level resources).
func requestsOf(pod *corev1.Pod) demand {
	list := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	var d demand
	for i, name := range fittedResources {
		quantity := list[name]
		if name == corev1.ResourceCPU {
			d.requests[i] = quantity.MilliValue()
		} else {
			d.requests[i] = quantity.Value()
		}
	}
	fromDevices := podclaims.ExtendedResourcesFromDevices(pod)
	for name, quantity := range list {
		if !isScalarResource(name) || quantity.IsZero() || fromDevices.Has(name) {
			continue
		}
		if d.scalar == nil {
			d.scalar = map[corev1.ResourceName]int64{}
		}
		d.scalar[name] = quantity.Value()
	}
	return d
}

// isScalarResource: a resource counted against allocatable beside cpu,
// memory and ephemeral storage, as kube-scheduler's ScalarResources.
func isScalarResource(name corev1.ResourceName) bool {
	return resourcevalidation.IsExtendedResourceName(name) || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) ||
		strings.HasPrefix(string(name), corev1.ResourceAttachableVolumesPrefix)
}

// handler keeps the accounting current from pod events.
func (n *nodeRequests) handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    n.observe,
		UpdateFunc: func(_, obj any) { n.observe(obj) },
		DeleteFunc: func(obj any) {
			if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tombstone.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				n.forget(pod.UID)
			}
		},
	}
}

// observe counts a pod bound to a node that is not done, and forgets one
// that is done. An unbound pod is left as it is: one this controller
// bound counts from its binding on.
func (n *nodeRequests) observe(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	switch {
	case podclaims.IsDone(pod):
		n.forget(pod.UID)
	case pod.Spec.NodeName != "":
		if n.known(pod) {
			return
		}
		n.set(pod.UID, podUsage{node: pod.Spec.NodeName, generation: pod.Generation, demand: requestsOf(pod)})
	}
}

// known: the pod is counted on its node at its generation already.
func (n *nodeRequests) known(pod *corev1.Pod) bool {
	n.mutex.Lock()
	defer n.mutex.Unlock()
	old, ok := n.pods[pod.UID]
	return ok && old.node == pod.Spec.NodeName && old.generation == pod.Generation && pod.Generation != 0
}

// assume counts a pod this controller just bound.
func (n *nodeRequests) assume(pod *corev1.Pod, node string) {
	n.set(pod.UID, podUsage{node: node, generation: pod.Generation, demand: requestsOf(pod)})
}

func (n *nodeRequests) set(uid types.UID, usage podUsage) {
	n.mutex.Lock()
	defer n.mutex.Unlock()
	if old, ok := n.pods[uid]; ok {
		if old.node == usage.node && old.equal(usage.demand) {
			n.pods[uid] = usage
			return
		}
		n.removeLocked(old)
	}
	n.pods[uid] = usage
	sum := n.nodes[usage.node]
	if sum == nil {
		sum = &nodeUsage{}
		n.nodes[usage.node] = sum
	}
	for i := range sum.requests {
		sum.requests[i] += usage.requests[i]
	}
	for name, value := range usage.scalar {
		if sum.scalar == nil {
			sum.scalar = map[corev1.ResourceName]int64{}
		}
		sum.scalar[name] += value
	}
	sum.pods++
}

func (n *nodeRequests) forget(uid types.UID) {
	n.mutex.Lock()
	old, ok := n.pods[uid]
	if ok {
		n.removeLocked(old)
		delete(n.pods, uid)
	}
	n.mutex.Unlock()
	if ok && n.freed != nil {
		n.freed(old.node)
	}
}

func (n *nodeRequests) removeLocked(usage podUsage) {
	sum := n.nodes[usage.node]
	if sum == nil {
		return
	}
	for i := range sum.requests {
		sum.requests[i] -= usage.requests[i]
	}
	for name, value := range usage.scalar {
		sum.scalar[name] -= value
		if sum.scalar[name] == 0 {
			delete(sum.scalar, name)
		}
	}
	sum.pods--
	if sum.pods <= 0 {
		delete(n.nodes, usage.node)
	}
}

// insufficient names what the node lacks for pods that ask demands each
// (one pod per entry), beside what is bound to it already: "cpu",
// "memory", "ephemeral-storage", "pods" or a scalar resource's name, as
// kube-scheduler's "Insufficient <resource>" and "Too many pods" name
// them.
func (n *nodeRequests) insufficient(node *corev1.Node, demands ...demand) []string {
	allocatable := node.Status.Allocatable
	n.mutex.Lock()
	var used nodeUsage
	if sum := n.nodes[node.Name]; sum != nil {
		used = *sum
	}
	// Read under the lock: the sums' scalar map is shared, not copied,
	// on this path that runs for every candidate node.
	scalarLacking := insufficientScalar(allocatable, used.scalar, demands)
	n.mutex.Unlock()
	var lacking []string
	if pods := allocatable[corev1.ResourcePods]; int64(used.pods+len(demands)) > pods.Value() {
		lacking = append(lacking, string(corev1.ResourcePods))
	}
	for i, name := range fittedResources {
		var want int64
		for _, d := range demands {
			want += d.requests[i]
		}
		if want == 0 {
			continue
		}
		quantity := allocatable[name]
		free := quantity.Value() - used.requests[i]
		if name == corev1.ResourceCPU {
			free = quantity.MilliValue() - used.requests[i]
		}
		if want > free {
			lacking = append(lacking, string(name))
		}
	}
	return append(lacking, scalarLacking...)
}

// insufficientScalar names, sorted, the scalar resources of which the
// node has less free than demands ask for together.
func insufficientScalar(allocatable corev1.ResourceList, used map[corev1.ResourceName]int64, demands []demand) []string {
	if !slices.ContainsFunc(demands, func(d demand) bool { return len(d.scalar) > 0 }) {
		return nil
	}
	want := map[corev1.ResourceName]int64{}
	for _, d := range demands {
		for name, value := range d.scalar {
			want[name] += value
		}
	}
	var lacking []string
	for name, value := range want {
		quantity := allocatable[name]
		if value > quantity.Value()-used[name] {
			lacking = append(lacking, string(name))
		}
	}
	sort.Strings(lacking)
	return lacking
}

// filterByResources drops the nodes that cannot hold the pod and counts
// them in filter, per missing resource.
func (n *nodeRequests) filterByResources(pod *corev1.Pod, nodes []*corev1.Node, filter *nodeFilter) []*corev1.Node {
	requests := requestsOf(pod)
	kept := make([]*corev1.Node, 0, len(nodes))
	for _, node := range nodes {
		lacking := n.insufficient(node, requests)
		if len(lacking) == 0 {
			kept = append(kept, node)
			continue
		}
		filter.candidates--
		filter.resources++
		for _, name := range lacking {
			filter.countInsufficient(name)
		}
	}
	return kept
}

// gangOverflow checks the nodes a gang's members were placed on: members
// on one node must fit there together. It returns why not, or "".
func (n *nodeRequests) gangOverflow(nodes map[string][]*corev1.Pod, nodeByName func(string) (*corev1.Node, error)) string {
	names := make([]string, 0, len(nodes))
	for name := range nodes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		pods := nodes[name]
		if len(pods) < 2 {
			continue
		}
		node, err := nodeByName(name)
		if err != nil {
			return fmt.Sprintf("node %s: %v", name, err)
		}
		requests := make([]demand, 0, len(pods))
		for _, pod := range pods {
			requests = append(requests, requestsOf(pod))
		}
		if lacking := n.insufficient(node, requests...); len(lacking) > 0 {
			return fmt.Sprintf("the %d members placed on node %s do not fit there together: insufficient %s", len(pods), name, strings.Join(lacking, ", "))
		}
	}
	return ""
}

// countInsufficient counts one node that lacks the resource.
func (f *nodeFilter) countInsufficient(name string) {
	if i := slices.Index(insufficientNames[:], name); i >= 0 {
		f.insufficient[i]++
		return
	}
	if f.insufficientScalar == nil {
		f.insufficientScalar = map[string]int{}
	}
	f.insufficientScalar[name]++
}

// describeInsufficient says, for messages, how many nodes lacked what:
// "2 Insufficient cpu, 1 Too many pods, 1 Insufficient example.com/gpu",
// as kube-scheduler words it.
func (f nodeFilter) describeInsufficient() string {
	var parts []string
	for i, name := range insufficientNames {
		switch {
		case f.insufficient[i] == 0:
		case name == string(corev1.ResourcePods):
			parts = append(parts, fmt.Sprintf("%d Too many pods", f.insufficient[i]))
		default:
			parts = append(parts, fmt.Sprintf("%d Insufficient %s", f.insufficient[i], name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(f.insufficientScalar)) {
		parts = append(parts, fmt.Sprintf("%d Insufficient %s", f.insufficientScalar[name], name))
	}
	return strings.Join(parts, ", ")
}
