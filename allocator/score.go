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
// the choice only depends on the input, not on its order. Only the chosen
// node gets AllocationResults; the others are only scored.
func (a *Allocator) SelectNode(ctx context.Context, st *State, claims []*resourceapi.ResourceClaim, nodes []*corev1.Node) (Selection, error) {
	var sel Selection
	if len(claims) > 64 {
		return sel, fmt.Errorf("%d claims, at most 64 can be allocated together", len(claims))
	}
	s := newSearch(ctx, st, newPlan(st.inv, claims))
	best := -1
	for i, node := range nodes {
		ok, expl, err := s.onNode(node)
		if err != nil {
			return Selection{}, err
		}
		if !ok {
			if sel.Rejected == nil {
				sel.Rejected = make([]Result, 0, len(nodes)-i)
			}
			sel.Rejected = append(sel.Rejected, Result{Node: node.Name, Explanation: expl})
			continue
		}
		score := s.score()
		better := best < 0
		if !better {
			switch {
			case score == sel.Score:
				better = node.Name < nodes[best].Name
			case a.policy == LeastAllocated:
				better = score < sel.Score
			default:
				better = score > sel.Score
			}
		}
		if better {
			best, sel.Score = i, score
		}
	}
	if best >= 0 {
		// Search the chosen node again to build its results; the search is
		// deterministic, so it finds the same solution.
		ok, _, err := s.onNode(nodes[best])
		if err != nil {
			return Selection{}, err
		}
		if !ok {
			return Selection{}, fmt.Errorf("node %s no longer fits on the second search", nodes[best].Name)
		}
		sel.Chosen = &Result{Node: nodes[best].Name, Allocations: a.results(s, nodes[best])}
	}
	return sel, nil
}

// score is the fraction of the node's devices that are allocated once the
// current picks are. A device shared by several allocations counts once.
func (s *search) score() float64 {
	st := s.st
	if len(s.view.devices) == 0 {
		return 0
	}
	used := 0
	for _, d := range s.view.devices {
		if st.busy[d.index] || st.shared[d.index] {
			used++
		}
	}
	for i := range s.picks {
		p := &s.picks[i]
		d := p.cand.d
		if p.slot.admin || st.busy[d.index] || st.shared[d.index] {
			continue
		}
		dup := false
		for j := 0; j < i; j++ {
			if q := &s.picks[j]; q.cand.d == d && !q.slot.admin {
				dup = true
				break
			}
		}
		if !dup {
			used++
		}
	}
	return float64(used) / float64(len(s.view.devices))
}
