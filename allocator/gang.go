package allocator

import (
	"context"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/podclaims/nodeaffinity"
)

// DefaultGangBudget bounds the allocator searches of one gang placement:
// a group that cannot be placed within it is reported as not fitting.
const DefaultGangBudget = 20000

// GangMember is one pod of a gang.
type GangMember struct {
	// Name names the member in explanations ("namespace/pod").
	Name string
	// Claims are the member's claims that still need an allocation. A
	// claim named by several members is allocated once, with the first
	// of them; the others must then go where it is available.
	Claims []*resourceapi.ResourceClaim
	// Nodes are the nodes the member may go to, in the order of
	// preference (the allocation controller sorts them by name).
	Nodes []*corev1.Node
}

// GangRequest asks for MinCount of the Members to be placed at once, each
// on a node with all of its claims.
type GangRequest struct {
	Members []GangMember
	// MinCount members must be placed; more are placed when they fit
	// once MinCount are (without searching again for them).
	MinCount int
	// TopologyKey, when set, keeps every member on nodes that share one
	// value of this node label. Nodes without the label are not used.
	TopologyKey string
	// Budget bounds the allocator searches; DefaultGangBudget when not
	// positive.
	Budget int
	// Greedy places one member after the other on the node the
	// allocator's policy chooses for it, never revisiting an earlier
	// member's node or devices: how a scheduler that places pods one at a
	// time would do. For comparisons.
	Greedy bool
}

// GangPlacement is where one member goes.
type GangPlacement struct {
	// Member indexes GangRequest.Members.
	Member int
	Node   string
	// Allocations are aligned with the member's Claims; nil for a claim
	// that another member's placement allocates.
	Allocations []*resourceapi.AllocationResult
}

// GangResult is the outcome of PlaceGang.
type GangResult struct {
	// Placements are the placed members, by member index; nil when the
	// gang does not fit.
	Placements []GangPlacement
	// Domain is the value of the topology label that was chosen.
	Domain string
	// Steps counts the allocator searches.
	Steps int
	// BudgetExhausted: the search stopped at the budget, without a
	// placement.
	BudgetExhausted bool
	// When the gang does not fit: the member that could not be placed
	// on the deepest path the search took, and why not on each node
	// (Rejected as in Selection). Reason says it in one line.
	FailedMember string
	Rejected     []Result
	Reason       string
}

// PlaceGang places the members of a gang together: at least MinCount of
// them, each on a node with all its claims allocated, in one decision.
// Members are placed in order; when a member does not fit, the search
// goes back to the earlier members and tries their other nodes. Members
// that share a node are allocated together, so their device choices are
// searched jointly too (up to 64 claims per node). Identical members are
// placed on nodes in non-descending order, which loses no placement and
// keeps the search from trying every permutation of them. st is the
// state the gang is placed into; it is not changed. With a topology key,
// the label's domains are tried from the one with the fewest free devices
// that could hold the gang up, so the gang takes the tightest domain it
// fits in.
func (a *Allocator) PlaceGang(ctx context.Context, st *State, u *InUse, req GangRequest) (GangResult, error) {
	budget := req.Budget
	if budget <= 0 {
		budget = DefaultGangBudget
	}
	g := &gangSearch{a: a, ctx: ctx, req: req, budget: budget}
	g.prepare()
	if req.TopologyKey == "" {
		return g.run(st, u, nil)
	}
	domains := g.domains(st)
	if len(domains) == 0 {
		return GangResult{Reason: fmt.Sprintf("no candidate node has the topology label %s", req.TopologyKey)}, nil
	}
	var first GangResult
	for i, d := range domains {
		result, err := g.run(st, u, d.nodes)
		if err != nil {
			return GangResult{}, err
		}
		result.Domain = d.value
		if result.Placements != nil {
			result.Steps = g.steps
			return result, nil
		}
		if i == 0 {
			first = result
		}
		if g.steps >= g.budget {
			first.BudgetExhausted = true
			break
		}
	}
	first.Steps = g.steps
	first.Domain = ""
	if len(domains) > 1 {
		first.Reason = fmt.Sprintf("fits in none of %d domains of %s; in %s: %s", len(domains), req.TopologyKey, domains[0].value, first.Reason)
	} else {
		first.Reason = fmt.Sprintf("in domain %s=%s: %s", req.TopologyKey, domains[0].value, first.Reason)
	}
	return first, nil
}

type gangSearch struct {
	a      *Allocator
	ctx    context.Context
	req    GangRequest
	budget int
	steps  int

	// owner of each claim UID: the first member that names it.
	owner map[types.UID]int
	// own are, per member, the claims it allocates; follows the claims
	// another member allocates.
	own, follows [][]*resourceapi.ResourceClaim
	// sameAs is the previous member with identical claims and nodes,
	// or -1.
	sameAs []int
	// ownsShared: the member allocates a claim that others follow.
	ownsShared []bool

	// Per run:
	u     *InUse
	st    *State
	nodes [][]*corev1.Node
	// onNode are the members on each node, with their allocations.
	onNode map[string][]int
	alloc  [][]*resourceapi.AllocationResult
	undo   map[int]gangUndo
	where  []int // node index in nodes[m], or -1
	placed int
	// deepest failure.
	failDepth  int
	failMember int
	failRej    []Result
	exhausted  bool
}

func (g *gangSearch) prepare() {
	n := len(g.req.Members)
	g.owner = map[types.UID]int{}
	g.own = make([][]*resourceapi.ResourceClaim, n)
	g.follows = make([][]*resourceapi.ResourceClaim, n)
	g.sameAs = make([]int, n)
	g.ownsShared = make([]bool, n)
	for m, member := range g.req.Members {
		for _, claim := range member.Claims {
			if o, ok := g.owner[claim.UID]; ok {
				g.follows[m] = append(g.follows[m], claim)
				g.ownsShared[o] = true
				continue
			}
			g.owner[claim.UID] = m
			g.own[m] = append(g.own[m], claim)
		}
	}
	for m := range g.req.Members {
		g.sameAs[m] = -1
		if g.req.Greedy || m == 0 || len(g.follows[m]) > 0 || len(g.follows[m-1]) > 0 {
			continue
		}
		if sameClaims(g.own[m], g.own[m-1]) && sameNodes(g.req.Members[m].Nodes, g.req.Members[m-1].Nodes) {
			g.sameAs[m] = m - 1
		}
	}
}

func sameClaims(a, b []*resourceapi.ResourceClaim) bool {
	return slices.EqualFunc(a, b, func(x, y *resourceapi.ResourceClaim) bool {
		return apiequality.Semantic.DeepEqual(x.Spec, y.Spec)
	})
}

func sameNodes(a, b []*corev1.Node) bool {
	return slices.EqualFunc(a, b, func(x, y *corev1.Node) bool { return x.Name == y.Name })
}

type gangDomain struct {
	value string
	nodes map[string]bool
	free  int
}

// domains groups the members' nodes by the topology label; those that
// have fewer free devices than the gang asks for at least are left out,
// the others sorted by free devices, fewest first.
func (g *gangSearch) domains(st *State) []gangDomain {
	byValue := map[string]*gangDomain{}
	seen := map[string]bool{}
	for _, member := range g.req.Members {
		for _, node := range member.Nodes {
			if seen[node.Name] {
				continue
			}
			seen[node.Name] = true
			value, ok := node.Labels[g.req.TopologyKey]
			if !ok {
				continue
			}
			d := byValue[value]
			if d == nil {
				d = &gangDomain{value: value, nodes: map[string]bool{}}
				byValue[value] = d
			}
			d.nodes[node.Name] = true
			d.free += st.freeDevices(node)
		}
	}
	need := 0
	var counts []int
	for m := range g.req.Members {
		counts = append(counts, minDevices(g.own[m]))
	}
	sort.Ints(counts)
	for _, c := range counts[:min(g.req.MinCount, len(counts))] {
		need += c
	}
	var out []gangDomain
	for _, d := range byValue {
		if d.free >= need {
			out = append(out, *d)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].free != out[j].free {
			return out[i].free < out[j].free
		}
		return out[i].value < out[j].value
	})
	return out
}

// minDevices is how many devices the claims take at least: exact counts
// of their requests (first alternatives count their smallest).
func minDevices(claims []*resourceapi.ResourceClaim) int {
	n := 0
	for _, claim := range claims {
		for _, r := range claim.Spec.Devices.Requests {
			if r.Exactly != nil {
				if r.Exactly.AllocationMode == resourceapi.DeviceAllocationModeExactCount && r.Exactly.AdminAccess == nil {
					n += int(r.Exactly.Count)
				}
				continue
			}
			least := -1
			for _, sub := range r.FirstAvailable {
				c := 0
				if sub.AllocationMode == resourceapi.DeviceAllocationModeExactCount {
					c = int(sub.Count)
				}
				if least < 0 || c < least {
					least = c
				}
			}
			n += max(least, 0)
		}
	}
	return n
}

// freeDevices counts the devices reachable from the node that nobody
// holds exclusively.
func (s *State) freeDevices(node *corev1.Node) int {
	n := 0
	for _, d := range s.inv.view(node).devices {
		if !s.busy[d.index] {
			n++
		}
	}
	return n
}

// run searches one domain (all nodes when domain is nil).
func (g *gangSearch) run(base *State, baseUse *InUse, domain map[string]bool) (GangResult, error) {
	n := len(g.req.Members)
	g.u = baseUse.Clone()
	g.st = base.inv.State(g.u)
	g.nodes = make([][]*corev1.Node, n)
	for m, member := range g.req.Members {
		for _, node := range member.Nodes {
			if domain == nil || domain[node.Name] {
				g.nodes[m] = append(g.nodes[m], node)
			}
		}
	}
	g.onNode = map[string][]int{}
	g.undo = map[int]gangUndo{}
	g.alloc = make([][]*resourceapi.AllocationResult, n)
	g.where = make([]int, n)
	for m := range g.where {
		g.where[m] = -1
	}
	g.placed = 0
	g.failDepth, g.failMember, g.failRej = -1, -1, nil
	g.exhausted = false

	need := min(g.req.MinCount, n)
	var ok bool
	var err error
	if g.req.Greedy {
		ok, err = g.greedy(need)
	} else {
		ok, err = g.dfs(0, need)
	}
	if err != nil {
		return GangResult{}, err
	}
	if !ok {
		return g.failure(), nil
	}
	// Members beyond MinCount join where they fit now.
	for m := range g.req.Members {
		if g.where[m] >= 0 {
			continue
		}
		for i := range g.nodes[m] {
			if g.steps >= g.budget {
				break
			}
			placed, err := g.place(m, i)
			if err != nil {
				return GangResult{}, err
			}
			if placed {
				break
			}
		}
	}
	result := GangResult{Steps: g.steps}
	for m := range g.req.Members {
		if g.where[m] < 0 {
			continue
		}
		p := GangPlacement{Member: m, Node: g.nodes[m][g.where[m]].Name}
		for _, claim := range g.req.Members[m].Claims {
			var alloc *resourceapi.AllocationResult
			if g.owner[claim.UID] == m {
				alloc = g.alloc[m][slices.Index(g.own[m], claim)]
			}
			p.Allocations = append(p.Allocations, alloc)
		}
		result.Placements = append(result.Placements, p)
	}
	return result, nil
}

func (g *gangSearch) failure() GangResult {
	r := GangResult{Steps: g.steps, BudgetExhausted: g.exhausted, Rejected: g.failRej}
	if g.failMember >= 0 {
		r.FailedMember = g.req.Members[g.failMember].Name
	}
	switch {
	case g.exhausted:
		r.Reason = fmt.Sprintf("no placement found within the search budget of %d allocations", g.budget)
	case g.failMember < 0:
		r.Reason = fmt.Sprintf("fewer than %d members can be placed", g.req.MinCount)
	case len(g.failRej) == 0:
		r.Reason = fmt.Sprintf("pod %s: no candidate nodes", r.FailedMember)
	default:
		sel := Selection{Rejected: g.failRej}
		r.Reason = fmt.Sprintf("pod %s (with %d of %d pods placed): %s", r.FailedMember, g.failDepth, g.req.MinCount, sel.Summary())
	}
	return r
}

// dfs places member m and the ones after it until need are placed.
func (g *gangSearch) dfs(m, need int) (bool, error) {
	if g.placed >= need {
		return true, nil
	}
	if len(g.req.Members)-m < need-g.placed {
		return false, nil
	}
	start := 0
	if prev := g.sameAs[m]; prev >= 0 {
		if g.where[prev] < 0 {
			// The identical member before was skipped: skipping this
			// one instead is the same placement.
			start = len(g.nodes[m])
		} else {
			start = g.where[prev]
		}
	}
	var rejected []Result
	for i := start; i < len(g.nodes[m]); i++ {
		if g.steps >= g.budget {
			g.exhausted = true
			return false, nil
		}
		placed, expl, err := g.tryPlace(m, i)
		if err != nil {
			return false, err
		}
		if !placed {
			rejected = append(rejected, Result{Node: g.nodes[m][i].Name, Explanation: expl})
			continue
		}
		ok, err := g.dfs(m+1, need)
		if ok || err != nil {
			return ok, err
		}
		g.unplace(m)
		if g.exhausted {
			return false, nil
		}
	}
	if g.placed > g.failDepth && (len(rejected) > 0 || len(g.nodes[m]) == 0) {
		g.failDepth, g.failMember, g.failRej = g.placed, m, rejected
	}
	// Or leave this member out, if enough remain.
	if len(g.req.Members)-m-1 >= need-g.placed {
		return g.dfs(m+1, need)
	}
	return false, nil
}

// greedy places members one after the other where the allocator's policy
// puts each, never going back.
func (g *gangSearch) greedy(need int) (bool, error) {
	for m := range g.req.Members {
		if g.placed >= need {
			return true, nil
		}
		var nodes []*corev1.Node
		for _, node := range g.nodes[m] {
			if g.followsFit(m, node) {
				nodes = append(nodes, node)
			}
		}
		g.steps++
		sel, err := g.a.SelectNode(g.ctx, g.st, g.own[m], nodes)
		if err != nil {
			return false, err
		}
		if sel.Chosen == nil {
			if g.placed > g.failDepth {
				g.failDepth, g.failMember, g.failRej = g.placed, m, sel.Rejected
			}
			continue
		}
		i := slices.IndexFunc(g.nodes[m], func(n *corev1.Node) bool { return n.Name == sel.Chosen.Node })
		g.record(m, i, nil, sel.Chosen.Allocations)
	}
	return g.placed >= need, nil
}

// place puts member m on its i-th node if it fits, without explaining.
func (g *gangSearch) place(m, i int) (bool, error) {
	ok, _, err := g.tryPlace(m, i)
	return ok, err
}

// tryPlace puts member m on its i-th node, allocating its claims together
// with those of the members already there.
func (g *gangSearch) tryPlace(m, i int) (bool, *Explanation, error) {
	node := g.nodes[m][i]
	if !g.followsFit(m, node) {
		return false, &Explanation{Node: node.Name, Requests: []RequestExplanation{{Claim: g.follows[m][0].Namespace + "/" + g.follows[m][0].Name, Reason: ReasonNoDevices, Detail: "shared with an earlier pod of the group, whose placement puts it elsewhere"}}}, nil
	}
	if len(g.own[m]) == 0 {
		g.record(m, i, nil, nil)
		return true, nil, nil
	}
	others := g.onNode[node.Name]
	joint := len(others) > 0 && !g.req.Greedy
	claims := slices.Clone(g.own[m])
	if joint {
		total := len(claims)
		for _, o := range others {
			total += len(g.own[o])
			// A shared claim keeps its allocation: members placed on
			// other nodes follow where it is.
			joint = joint && !g.ownsShared[o]
		}
		joint = joint && total <= 64
	}
	if joint {
		// Release what the members there hold and search all of
		// them together.
		for _, o := range others {
			claims = append(claims, g.own[o]...)
			g.release(g.alloc[o])
		}
	}
	g.steps++
	result, err := g.a.Allocate(g.ctx, g.st, claims, node)
	if err != nil {
		return false, nil, err
	}
	if !result.Fits() {
		if joint {
			for _, o := range others {
				g.hold(g.alloc[o])
			}
		}
		return false, result.Explanation, nil
	}
	var previous [][]*resourceapi.AllocationResult
	if joint {
		k := len(g.own[m])
		for _, o := range others {
			previous = append(previous, g.alloc[o])
			g.alloc[o] = result.Allocations[k : k+len(g.own[o])]
			g.hold(g.alloc[o])
			k += len(g.own[o])
		}
	}
	g.record(m, i, previous, result.Allocations[:len(g.own[m])])
	return true, nil, nil
}

// undo is what unplace needs to restore a node.
type gangUndo struct {
	others   []int
	previous [][]*resourceapi.AllocationResult
}

func (g *gangSearch) record(m, i int, previous [][]*resourceapi.AllocationResult, allocs []*resourceapi.AllocationResult) {
	node := g.nodes[m][i].Name
	g.undo[m] = gangUndo{others: slices.Clone(g.onNode[node]), previous: previous}
	g.onNode[node] = append(g.onNode[node], m)
	g.alloc[m] = allocs
	g.hold(allocs)
	g.where[m] = i
	g.placed++
}

// unplace takes member m off its node and gives the members there the
// allocations they had before it came.
func (g *gangSearch) unplace(m int) {
	node := g.nodes[m][g.where[m]].Name
	g.release(g.alloc[m])
	g.alloc[m] = nil
	undo := g.undo[m]
	if undo.previous != nil {
		for k, o := range undo.others {
			g.release(g.alloc[o])
			g.alloc[o] = undo.previous[k]
			g.hold(g.alloc[o])
		}
	}
	g.onNode[node] = slices.DeleteFunc(g.onNode[node], func(o int) bool { return o == m })
	g.where[m] = -1
	g.placed--
}

func (g *gangSearch) hold(allocs []*resourceapi.AllocationResult) {
	for _, alloc := range allocs {
		g.u.AddAllocation(alloc)
		g.st.Refresh(g.u, alloc)
	}
}

func (g *gangSearch) release(allocs []*resourceapi.AllocationResult) {
	for _, alloc := range allocs {
		g.u.RemoveAllocation(alloc)
		g.st.Refresh(g.u, alloc)
	}
}

// followsFit: the claims member m shares with an earlier member are
// available on the node, where that member's allocation put them.
func (g *gangSearch) followsFit(m int, node *corev1.Node) bool {
	for _, claim := range g.follows[m] {
		o := g.owner[claim.UID]
		if g.where[o] < 0 {
			return false
		}
		// By UID: each member brings its own copy of the shared claim.
		alloc := g.alloc[o][slices.IndexFunc(g.own[o], func(own *resourceapi.ResourceClaim) bool { return own.UID == claim.UID })]
		if alloc != nil && alloc.NodeSelector != nil && !nodeaffinity.NodeSelectorMatches(alloc.NodeSelector, node) {
			return false
		}
	}
	return true
}
