package allocator

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// Selection is the outcome of choosing a node for a pod's claims.
type Selection struct {
	// Chosen is the result for the chosen node; nil when no node fits.
	Chosen *Result
	// Score of the chosen node: the fraction of its devices that are
	// allocated once the claims are.
	Score float64
	// Rejected holds the nodes that don't fit, in the order given.
	Rejected []Result
}

// Summary says in one line which node was chosen or why none fits,
// grouping the nodes by reason.
func (s *Selection) Summary() string {
	if s.Chosen != nil {
		return fmt.Sprintf("allocated on node %s", s.Chosen.Node)
	}
	if len(s.Rejected) == 0 {
		return "no candidate nodes"
	}
	byReason := make(map[string]int)
	var order []string
	for _, r := range s.Rejected {
		reason := "unknown"
		if r.Explanation != nil && len(r.Explanation.Requests) > 0 {
			first := r.Explanation.Requests[0]
			reason = string(first.Reason)
			if first.Request != "" {
				reason = first.Request + ": " + reason
			}
		}
		if byReason[reason] == 0 {
			order = append(order, reason)
		}
		byReason[reason]++
	}
	parts := make([]string, 0, len(order))
	for _, reason := range order {
		parts = append(parts, fmt.Sprintf("%d %s", byReason[reason], reason))
	}
	return fmt.Sprintf("0/%d nodes fit: %s; first: %s", len(s.Rejected), strings.Join(parts, ", "), s.Rejected[0].Explanation.Summary())
}

// SelectNode allocates the claims on each node and picks the best one by
// the allocator's policy. Ties go to the node whose name sorts first, so
// the choice only depends on the input, not on its order.
func (a *Allocator) SelectNode(ctx context.Context, st *State, claims []*resourceapi.ResourceClaim, nodes []*corev1.Node) (Selection, error) {
	var sel Selection
	for _, node := range nodes {
		res, err := a.Allocate(ctx, st, claims, node)
		if err != nil {
			return Selection{}, err
		}
		if !res.Fits() {
			sel.Rejected = append(sel.Rejected, res)
			continue
		}
		score := a.score(st, node, res.Allocations)
		better := sel.Chosen == nil
		if !better {
			switch {
			case score == sel.Score:
				better = node.Name < sel.Chosen.Node
			case a.policy == LeastAllocated:
				better = score < sel.Score
			default:
				better = score > sel.Score
			}
		}
		if better {
			chosen := res
			sel.Chosen = &chosen
			sel.Score = score
		}
	}
	return sel, nil
}

// score is the fraction of the node's devices that are allocated after the
// new allocations. Devices shared by several allocations count as
// allocated once.
func (a *Allocator) score(st *State, node *corev1.Node, allocs []*resourceapi.AllocationResult) float64 {
	view := st.inv.view(node)
	if len(view.devices) == 0 {
		return 0
	}
	used := 0
	for _, d := range view.devices {
		if st.busy[d.index] || st.shared[d.index] {
			used++
		}
	}
	seen := make(map[DeviceID]bool)
	for _, ar := range allocs {
		for _, r := range ar.Devices.Results {
			id := DeviceID{r.Driver, r.Pool, r.Device}
			d := st.inv.byID[id]
			if d == nil || seen[id] || st.busy[d.index] || st.shared[d.index] || deref(r.AdminAccess) {
				continue
			}
			seen[id] = true
			used++
		}
	}
	return float64(used) / float64(len(view.devices))
}
