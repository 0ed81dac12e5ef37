package allocation

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1beta1"
	"k8s.io/klog/v2"

	"github.com/draplane/draplane/allocator"
	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcelisters "github.com/draplane/draplane/generated/listers/resource/v1"
	"github.com/draplane/draplane/internal/features"
	"github.com/draplane/draplane/internal/podclaims"
)

// placementState is what placement decisions are made from and recorded
// in, apart from the controller that reads the informers and writes the
// API (as kube-scheduler keeps its cache and nominator apart from its
// scheduling cycle): the allocations in use, the nominations of
// preemptors, the device inventory and the node set. It makes no API
// calls, so that it can be tested without informers or clients.
//
// Its mutex is the critical section of the controller: a decision for
// one pod or gang runs under it, so that the next one sees what the
// previous one took. The operations the controller calls (decide,
// decideGang, observe, the writes' outcomes, nominate and
// dropNomination, restoreNomination) take it; the helpers they call
// under it say so, most by a name that ends in Locked.
type placementState struct {
	placementInputs

	mutex sync.Mutex
	// tracker holds the allocations in use, and the holds of nominations
	// in its accounting.
	tracker *allocationTracker
	// nominations are the preemptors waiting for their victims to go,
	// by pod UID (nominator.go).
	nominations map[types.UID]*nomination
	// noPreemption are the victim searches that found no victims, by
	// pod.
	noPreemption map[types.UID]noPreemption
	// inventory is rebuilt when snapshotGeneration moved on since
	// inventoryGeneration.
	inventory           *allocator.Inventory
	inventoryGeneration int64
	// slices caches converted slices by UID and resourceVersion.
	slices map[types.UID]convertedSlice
	// nodes is rebuilt when nodesGeneration moved on (nodeSetLocked).
	nodes *nodeSet

	// The counters are bumped by event handlers without the mutex.
	// preemptionInputs counts the changes a victim search depends on
	// (informer events, nominations made or dropped); snapshotGeneration
	// the changes of slices, classes and taint rules; nodesGeneration
	// the node events that can change which nodes are candidates.
	preemptionInputs   atomic.Int64
	snapshotGeneration atomic.Int64
	nodesGeneration    atomic.Int64
}

// placementInputs is what decisions read besides the state: the caches
// and the options. They are set before the first decision and not
// changed afterwards.
type placementInputs struct {
	allocator *allocator.Allocator

	podLister   corelisters.PodLister
	nodeLister  corelisters.NodeLister
	claimLister resourcelisters.ResourceClaimLister
	classLister resourcelisters.DeviceClassLister
	sliceLister resourcelisters.ResourceSliceLister
	// taintRuleLister is nil while the DRADeviceTaintRules gate is off.
	taintRuleLister resourcelisters.DeviceTaintRuleLister
	// namespaceLister is nil without Options.Namespaces.
	namespaceLister corelisters.NamespaceLister
	// podGroupLister is nil without Options.PodGroups.
	podGroupLister schedulinglisters.PodGroupLister

	gangBudget int
	gangGreedy bool
	// ownerTaintKey: see Options.OwnerTaintKey.
	ownerTaintKey string
	// nodeRequests is set with Options.FitNodeResources.
	nodeRequests *nodeRequests
	// waits are the devices a pod avoids after its binding conditions
	// failed (bindingconditions.go).
	waits *bindingWaits
	// bound are the pods the controller bound and the informer does not
	// show bound yet: a gang's later pods join the topology domain of
	// those.
	bound *boundPods
	// now stamps new allocations.
	now func() time.Time
}

func newPlacementState(inputs placementInputs) *placementState {
	s := &placementState{
		placementInputs: inputs,
		tracker:         newAllocationTracker(),
		nominations:     map[types.UID]*nomination{},
		noPreemption:    map[types.UID]noPreemption{},
		slices:          make(map[types.UID]convertedSlice),
	}
	// The inventory and the node set are built on first use.
	s.snapshotGeneration.Store(1)
	s.nodesGeneration.Store(1)
	return s
}

// observe records what the informer says about a claim; a nil allocation
// means the claim is not allocated (or deleted, with deleted set). It
// reports whether that freed devices.
func (s *placementState) observe(uid types.UID, resourceVersion string, allocation *resourceapi.AllocationResult, deleted bool) (freed bool) {
	s.mutex.Lock()
	defer s.mutex.Unlock()
	return s.tracker.observe(uid, resourceVersion, allocation, deleted)
}

// written: the allocation is stored with this resourceVersion.
func (s *placementState) written(uid types.UID, resourceVersion string) {
	s.mutex.Lock()
	defer s.mutex.Unlock()
	s.tracker.written(uid, resourceVersion)
}

// uncertain: the write may or may not have landed. The next informer
// event after baseVersion (the version the write was based on) tells.
func (s *placementState) uncertain(uid types.UID, baseVersion string) {
	s.mutex.Lock()
	defer s.mutex.Unlock()
	s.tracker.uncertain(uid, baseVersion)
}

// drop forgets a pending allocation: its write failed for sure, or the
// claim was deallocated again.
func (s *placementState) drop(uid types.UID) {
	s.mutex.Lock()
	defer s.mutex.Unlock()
	s.tracker.drop(uid)
}

// dropIfWriting forgets an allocation whose write was never attempted.
func (s *placementState) dropIfWriting(uid types.UID) {
	s.mutex.Lock()
	defer s.mutex.Unlock()
	s.tracker.dropIfWriting(uid)
}

// writtenFor reports whether the controller wrote an allocation of the
// claim together with a reservation for the consumer (a pod or a
// PodGroup), which the informer may not show yet.
func (s *placementState) writtenFor(uid, consumerUID types.UID) bool {
	s.mutex.Lock()
	defer s.mutex.Unlock()
	return s.tracker.writtenFor(uid, consumerUID)
}

// pendingCount is for tests and logs.
func (s *placementState) pendingCount() int {
	s.mutex.Lock()
	defer s.mutex.Unlock()
	return s.tracker.pendingCount()
}

// decide selects a node and allocates the claims that need it. It is
// the critical section: everything it takes is recorded as pending
// before the next pod is looked at. It makes no API calls.
func (s *placementState) decide(ctx context.Context, pod *corev1.Pod, claims []*resourcev1.ResourceClaim) (*decision, error) {
	logger := klog.FromContext(ctx)
	t := s.tracker
	s.mutex.Lock()
	defer s.mutex.Unlock()

	d := &decision{}
	restore := s.releaseNominationsLocked(pod)
	defer func() { restore(d.node == "") }()
	toAllocate, allocatedSelectors, err := s.podClaimsLocked(pod, claims, d)
	if err != nil {
		return nil, err
	}
	if reason := s.adminAccessRefused(toAllocate); reason != "" {
		return d.refuse(reason), nil
	}
	if reason := s.grantedAdminAccessRevoked(pod, d.claims); reason != "" {
		return d.refuse(reason), nil
	}

	nodes, filter, err := s.candidateNodes(logger, pod, allocatedSelectors)
	if err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		d.unschedulable = true
		if pod.Spec.NodeName != "" {
			d.summary = s.wrongNodeSummary(pod, d.claims)
		} else {
			d.summary = fmt.Sprintf("0/%d nodes are available: %s", filter.total(), filter)
		}
		d.details = d.summary
		return d, nil
	}
	if len(toAllocate) == 0 {
		// Everything is allocated: the first node (by name) that all
		// allocations allow.
		d.node = nodes[0].Name
		return d, nil
	}

	if len(toAllocate) > maxClaimsPerPod {
		return d.refuse(fmt.Sprintf("the pod needs %d claims allocated, at most %d can be allocated together", len(toAllocate), maxClaimsPerPod)), nil
	}
	inv, err := s.currentInventoryLocked(logger)
	if err != nil {
		return nil, err
	}
	selection, err := s.selectNode(ctx, pod, inv, toAllocate, nodes)
	if err != nil {
		return nil, fmt.Errorf("select node: %w", err)
	}
	if selection.Chosen == nil {
		d.unschedulable = true
		d.summary = selection.Summary()
		if filtered := filter.total() - len(nodes); filtered > 0 {
			d.summary += fmt.Sprintf(" (%d other nodes filtered: %s)", filtered, filter)
		}
		d.details = explainRequests(&selection)
		if pod.Spec.NodeName == "" {
			if err := s.considerPreemptionLocked(ctx, pod, toAllocate, nodes, inv, d); err != nil {
				return nil, err
			}
		}
		return d, nil
	}

	if reason := refusedAllocation(toAllocate, consumersToAllocate(d), selection.Chosen); reason != "" {
		return d.refuse(reason), nil
	}

	d.node = selection.Chosen.Node
	now := metav1.NewTime(s.now()).Rfc3339Copy()
	i := 0
	for _, pc := range d.claims {
		if pc.allocation != nil {
			continue
		}
		allocation := selection.Chosen.Allocations[i]
		i++
		allocation.AllocationTimestamp = &now
		pc.newAllocation = allocation
		t.addPendingLocked(pc.claim.UID, pod.UID, pc.consumer.UID, allocation)
	}
	logger.V(4).Info("Selected node", "node", d.node, "score", selection.Score, "newAllocations", i)
	return d, nil
}

// podClaimsLocked adds the pod's claims to d and returns those that still
// need an allocation (in internal form) and the node selectors of those
// already allocated. The state's mutex must be held.
func (s *placementState) podClaimsLocked(pod *corev1.Pod, claims []*resourcev1.ResourceClaim, d *decision) ([]*resourceapi.ResourceClaim, []*corev1.NodeSelector, error) {
	t := s.tracker
	var toAllocate []*resourceapi.ResourceClaim
	var allocatedSelectors []*corev1.NodeSelector
	for _, claim := range claims {
		if p, ok := t.pending[claim.UID]; ok && p.writing && p.podUID != pod.UID {
			// A shared claim that another worker is allocating right
			// now: reserving it before that write lands would fail.
			return nil, nil, fmt.Errorf("%w: claim %s is being allocated for another pod", errRetryLater, klog.KObj(claim))
		}
		pc := &podClaim{claim: claim, allocation: t.allocationLocked(claim.UID), consumer: s.consumerFor(pod, claim)}
		d.claims = append(d.claims, pc)
		if pc.allocation != nil {
			allocatedSelectors = append(allocatedSelectors, pc.allocation.NodeSelector)
			continue
		}
		internal := &resourceapi.ResourceClaim{}
		if err := resourcev1.Convert_v1_ResourceClaim_To_resource_ResourceClaim(claim, internal, nil); err != nil {
			return nil, nil, fmt.Errorf("convert claim %s: %w", klog.KObj(claim), err)
		}
		toAllocate = append(toAllocate, internal)
	}
	return toAllocate, allocatedSelectors, nil
}

// adminAccessRefused says why one of the claims may not be granted the
// admin access it asks for, or "".
func (s *placementState) adminAccessRefused(claims []*resourceapi.ResourceClaim) string {
	for _, claim := range claims {
		i := resourceapi.AdminAccessRequest(&claim.Spec)
		if i < 0 {
			continue
		}
		if denied := s.adminAccessDenied(claim.Namespace); denied != "" {
			return fmt.Sprintf("claim %s asks for admin access (spec.devices.requests[%d].exactly.adminAccess), %s", klog.KObj(claim), i, denied)
		}
	}
	return ""
}

// grantedAdminAccessRevoked says why an allocated claim that holds a
// device with admin access may not be reserved for the pod, or "": its
// namespace has lost the admin access label since the allocation. Pods
// the claim is reserved for already keep it; new ones do not get it.
func (s *placementState) grantedAdminAccessRevoked(pod *corev1.Pod, claims []*podClaim) string {
	for _, pc := range claims {
		if pc.allocation == nil || podclaims.IsReservedForPod(pod, pc.claim) {
			continue
		}
		for i, result := range pc.allocation.Devices.Results {
			if result.AdminAccess == nil || !*result.AdminAccess {
				continue
			}
			if denied := s.adminAccessDenied(pc.claim.Namespace); denied != "" {
				return fmt.Sprintf("claim %s was granted admin access (status.allocation.devices.results[%d].adminAccess) and is not reserved for new pods, %s", klog.KObj(pc.claim), i, denied)
			}
			break
		}
	}
	return ""
}

// adminAccessDenied says why claims in the namespace may not be granted
// admin access, or "" when they may.
func (s *placementState) adminAccessDenied(namespace string) string {
	if s.namespaceLister == nil {
		return fmt.Sprintf("but namespace %s cannot be checked for the label %s=true", namespace, resourceapi.AdminAccessNamespaceLabel)
	}
	ns, err := s.namespaceLister.Get(namespace)
	if err != nil {
		return fmt.Sprintf("but namespace %s cannot be checked for the label %s=true: %v", namespace, resourceapi.AdminAccessNamespaceLabel, err)
	}
	if ns.Labels[resourceapi.AdminAccessNamespaceLabel] != "true" {
		return fmt.Sprintf("but namespace %s lacks the label %s=true", namespace, resourceapi.AdminAccessNamespaceLabel)
	}
	return ""
}

// wrongNodeSummary explains why a pod bound to its node cannot use its
// allocated claims: each claim whose allocation is for other nodes,
// with the node it is allocated for.
func (s *placementState) wrongNodeSummary(pod *corev1.Pod, claims []*podClaim) string {
	node, err := s.nodeLister.Get(pod.Spec.NodeName)
	if err != nil {
		node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: pod.Spec.NodeName}}
	}
	var parts []string
	for _, pc := range claims {
		if pc.allocation == nil || matchesAllocations([]*corev1.NodeSelector{pc.allocation.NodeSelector}, node) {
			continue
		}
		parts = append(parts, fmt.Sprintf("claim %s is allocated for %s", klog.KObj(pc.claim), describeNodeSelector(pc.allocation.NodeSelector)))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("node %s does not match the node selectors of the pod's allocated claims", pod.Spec.NodeName)
	}
	return fmt.Sprintf("the pod is bound to node %s, but %s: their devices cannot be used there", pod.Spec.NodeName, strings.Join(parts, "; "))
}

// candidateNodes lists the nodes the pod may go to, sorted by name. A pod
// with spec.nodeName has exactly that node (which need not be known).
// Callers hold the state's mutex and must not modify the list.
func (s *placementState) candidateNodes(logger klog.Logger, pod *corev1.Pod, allocated []*corev1.NodeSelector) ([]*corev1.Node, nodeFilter, error) {
	var filter nodeFilter
	if pod.Spec.NodeName != "" {
		node, err := s.nodeLister.Get(pod.Spec.NodeName)
		if apierrors.IsNotFound(err) {
			node = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: pod.Spec.NodeName}}
		} else if err != nil {
			return nil, filter, fmt.Errorf("get node %s from cache: %w", pod.Spec.NodeName, err)
		}
		if !matchesAllocations(allocated, node) {
			filter.allocation++
			return nil, filter, nil
		}
		filter.candidates++
		return []*corev1.Node{node}, filter, nil
	}
	nodes, filter, err := s.candidatesLocked(logger, pod, allocated)
	if err != nil || s.nodeRequests == nil {
		return nodes, filter, err
	}
	return s.nodeRequests.filterByResources(pod, nodes, &filter), filter, nil
}

// currentInventoryLocked returns the prepared inventory, rebuilding it
// after slices, classes or taint rules changed. Callers hold the state's
// mutex.
func (s *placementState) currentInventoryLocked(logger klog.Logger) (*allocator.Inventory, error) {
	generation := s.snapshotGeneration.Load()
	if s.inventory != nil && s.inventoryGeneration == generation {
		return s.inventory, nil
	}
	start := time.Now()
	snapshot := allocator.Snapshot{
		WithoutBindingConditions: !features.Enabled(features.DRADeviceBindingConditions),
		WithoutDeviceTaints:      !features.Enabled(features.DRADeviceTaints),
		WholeUnitCapacitySteps:   !features.Enabled(features.DRAFractionalCapacityRange),
	}

	classes, err := s.classLister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list device classes from cache: %w", err)
	}
	snapshot.Classes = make(map[string]*resourceapi.DeviceClass, len(classes))
	for _, class := range classes {
		internal := &resourceapi.DeviceClass{}
		if err := resourcev1.Convert_v1_DeviceClass_To_resource_DeviceClass(class, internal, nil); err != nil {
			return nil, fmt.Errorf("convert device class %s: %w", class.Name, err)
		}
		snapshot.Classes[class.Name] = internal
	}

	resourceSlices, err := s.sliceLister.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list resource slices from cache: %w", err)
	}
	converted := make(map[types.UID]convertedSlice, len(resourceSlices))
	snapshot.Slices = make([]*resourceapi.ResourceSlice, 0, len(resourceSlices))
	for _, slice := range resourceSlices {
		cached, ok := s.slices[slice.UID]
		if !ok || cached.resourceVersion != slice.ResourceVersion {
			internal := &resourceapi.ResourceSlice{}
			if err := resourcev1.Convert_v1_ResourceSlice_To_resource_ResourceSlice(slice, internal, nil); err != nil {
				return nil, fmt.Errorf("convert resource slice %s: %w", slice.Name, err)
			}
			cached = convertedSlice{resourceVersion: slice.ResourceVersion, slice: internal}
		}
		converted[slice.UID] = cached
		snapshot.Slices = append(snapshot.Slices, cached.slice)
	}
	s.slices = converted

	if err := s.addTaintRules(&snapshot); err != nil {
		return nil, err
	}
	if s.ownerTaintKey != "" {
		ownDevices(&snapshot, s.ownerTaintKey)
	}

	s.inventory = s.allocator.Prepare(snapshot)
	s.inventoryGeneration = generation
	logger.V(4).Info("Prepared device inventory", "classes", len(snapshot.Classes), "slices", len(snapshot.Slices), "taintRules", len(snapshot.TaintRules), "duration", time.Since(start))
	return s.inventory, nil
}

// addTaintRules adds the DeviceTaintRules to the snapshot; none while
// their gate is off (the state then has no lister).
func (s *placementState) addTaintRules(snapshot *allocator.Snapshot) error {
	if s.taintRuleLister == nil {
		return nil
	}
	rules, err := s.taintRuleLister.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list device taint rules from cache: %w", err)
	}
	for _, rule := range rules {
		internal := &resourceapi.DeviceTaintRule{}
		if err := resourcev1.Convert_v1_DeviceTaintRule_To_resource_DeviceTaintRule(rule, internal, nil); err != nil {
			return fmt.Errorf("convert device taint rule %s: %w", rule.Name, err)
		}
		snapshot.TaintRules = append(snapshot.TaintRules, internal)
	}
	return nil
}

// decideGang runs the gang's placement in the critical section and
// records what it allocates as pending, as decide does for one pod.
func (s *placementState) decideGang(ctx context.Context, group *schedulingv1beta1.PodGroup, bound []*corev1.Pod, members []*gangMember, need int, placed bool) (allocator.GangResult, error) {
	logger := klog.FromContext(ctx)
	t := s.tracker
	s.mutex.Lock()
	defer s.mutex.Unlock()
	defer s.releaseGangNominationsLocked(members)()

	req := allocator.GangRequest{MinCount: need, Budget: s.gangBudget, Greedy: s.gangGreedy}
	domain, key := "", ""
	if constraints := group.Spec.SchedulingConstraints; constraints != nil && len(constraints.Topology) > 0 {
		key = constraints.Topology[0].Key
		if placed || len(bound) > 0 {
			// Later pods stay in the domain of those placed.
			domain = s.domainOf(bound, key)
		} else {
			req.TopologyKey = key
		}
	}
	for _, m := range members {
		toAllocate, allocatedSelectors, err := s.podClaimsLocked(m.pod, m.claims, m.d)
		if err != nil {
			return allocator.GangResult{}, err
		}
		if reason := s.adminAccessRefused(toAllocate); reason != "" {
			return allocator.GangResult{Reason: fmt.Sprintf("pod %s: %s", m.pod.Name, reason)}, nil
		}
		nodes, _, err := s.candidateNodes(logger, m.pod, allocatedSelectors)
		if err != nil {
			return allocator.GangResult{}, err
		}
		if domain != "" {
			nodes = slices.DeleteFunc(slices.Clone(nodes), func(n *corev1.Node) bool { return n.Labels[key] != domain })
		}
		m.toAllocate = toAllocate
		req.Members = append(req.Members, allocator.GangMember{Name: klog.KObj(m.pod).String(), Claims: toAllocate, Nodes: nodes})
	}
	inv, err := s.currentInventoryLocked(logger)
	if err != nil {
		return allocator.GangResult{}, err
	}
	start := time.Now()
	result, err := s.allocator.PlaceGang(ctx, t.stateLocked(inv), t.inUseLocked(), req)
	if err != nil {
		return allocator.GangResult{}, fmt.Errorf("place gang: %w", err)
	}
	logger.V(3).Info("Gang placement", "members", len(members), "need", need, "placed", len(result.Placements), "domain", result.Domain, "steps", result.Steps, "duration", time.Since(start))
	if result.Placements == nil {
		if err := s.considerGangPreemptionLocked(ctx, group, members, req, inv); err != nil {
			return allocator.GangResult{}, err
		}
		return result, nil
	}
	if s.nodeRequests != nil {
		// Each member was checked against its nodes alone.
		byNode := map[string][]*corev1.Pod{}
		for _, p := range result.Placements {
			byNode[p.Node] = append(byNode[p.Node], members[p.Member].pod)
		}
		if reason := s.nodeRequests.gangOverflow(byNode, s.nodeLister.Get); reason != "" {
			return allocator.GangResult{Reason: reason}, nil
		}
	}
	now := metav1.NewTime(s.now()).Rfc3339Copy()
	for _, p := range result.Placements {
		m := members[p.Member]
		m.d.node = p.Node
		for _, pc := range m.d.claims {
			if pc.allocation != nil {
				continue
			}
			i := slices.IndexFunc(m.toAllocate, func(claim *resourceapi.ResourceClaim) bool { return claim.UID == pc.claim.UID })
			if i < 0 || p.Allocations[i] == nil {
				// Allocated with another member's placement.
				continue
			}
			allocation := p.Allocations[i]
			allocation.AllocationTimestamp = &now
			pc.newAllocation = allocation
			t.addPendingLocked(pc.claim.UID, m.pod.UID, pc.consumer.UID, allocation)
		}
	}
	return result, nil
}

// domainOf is the value of the topology label on the nodes of the bound
// pods (the first one's).
func (s *placementState) domainOf(bound []*corev1.Pod, key string) string {
	for _, pod := range bound {
		name := pod.Spec.NodeName
		if name == "" {
			name, _ = s.bound.get(pod.UID)
		}
		if node, err := s.nodeLister.Get(name); err == nil {
			if value, ok := node.Labels[key]; ok {
				return value
			}
		}
	}
	return ""
}

// selectNode runs the allocator for the pod, first without the devices
// whose binding conditions failed or timed out for it, then, when
// nothing else fits, with them: the pod goes elsewhere if it can, and
// tries the same device again if it must. The rejected nodes are only
// explained when no node fits (ChooseNode). Callers hold the state's
// mutex.
func (s *placementState) selectNode(ctx context.Context, pod *corev1.Pod, inv *allocator.Inventory, claims []*resourceapi.ResourceClaim, nodes []*corev1.Node) (allocator.Selection, error) {
	state := s.tracker.stateLocked(inv)
	avoiding, ok := s.waits.addAvoided(pod.UID, s.tracker.inUseLocked())
	first := state
	if ok {
		first = inv.State(avoiding)
	}
	selection, err := s.allocator.ChooseNode(ctx, first, claims, nodes)
	if !ok || err != nil || selection.Chosen != nil {
		return selection, err
	}
	klog.FromContext(ctx).V(4).Info("Nothing fits without the devices whose binding conditions failed, trying them again")
	return s.allocator.ChooseNode(ctx, state, claims, nodes)
}

// convertedSlice is a slice in internal form, reused while its
// resourceVersion stays.
type convertedSlice struct {
	resourceVersion string
	slice           *resourceapi.ResourceSlice
}
