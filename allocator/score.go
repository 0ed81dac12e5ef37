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
	// searched counts the nodes searched, for tests.
	searched int
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
	return a.selectNode(ctx, st, claims, nodes, false)
}

// ChooseNode chooses the node that SelectNode chooses, with the same
// score and allocations, but when one fits it does not explain the others:
// Rejected is then empty, and nodes that cannot fit or cannot beat the
// best node found so far are passed over without a search (see
// plan.bounds). When no node fits, it is SelectNode. Nodes sorted by name
// and filled in that order, as the allocation controller's are, are
// passed over the most.
func (a *Allocator) ChooseNode(ctx context.Context, st *State, claims []*resourceapi.ResourceClaim, nodes []*corev1.Node) (Selection, error) {
	sel, err := a.selectNode(ctx, st, claims, nodes, true)
	if err == nil && sel.Chosen == nil {
		return a.SelectNode(ctx, st, claims, nodes)
	}
	return sel, err
}

func (a *Allocator) selectNode(ctx context.Context, st *State, claims []*resourceapi.ResourceClaim, nodes []*corev1.Node, choose bool) (Selection, error) {
	var sel Selection
	if len(claims) > 64 {
		return sel, errTooManyClaims(len(claims))
	}
	s := newSearch(ctx, st, newPlan(st.inv, claims))
	var b bounds
	if choose {
		b = s.p.bounds()
	}
	var views *viewList
	if b.ok {
		views = st.inv.viewsOf(nodes)
	}
	best := -1
	for i, node := range nodes {
		var view *nodeView
		if views != nil {
			if s.passOver(b, views, i, best, sel.Score, a.policy) {
				continue
			}
			view = views.views[i]
		} else {
			view = st.inv.view(node)
		}
		sel.searched++
		ok, expl, err := s.onView(node, view)
		if err != nil {
			return Selection{}, err
		}
		if !ok {
			if choose {
				continue
			}
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

// bounds are what a plan takes of a node at least and at most, for
// ChooseNode to pass over nodes without searching them.
type bounds struct {
	// ok is set when the plan has no problems and only requests for a
	// number of devices without admin access: each of its picks then takes
	// a device that no allocation holds exclusively.
	ok bool
	// need is how many picks the plan makes at least (each request's
	// smallest alternative), most how many at most (its largest).
	need, most int
}

func (p *plan) bounds() bounds {
	if len(p.problems) > 0 {
		return bounds{}
	}
	b := bounds{ok: true}
	for _, g := range p.groups {
		least, most := -1, 0
		for _, sl := range g.slots {
			if sl.all || sl.admin {
				return bounds{}
			}
			if least < 0 || sl.count < least {
				least = sl.count
			}
			most = max(most, sl.count)
		}
		b.need += max(least, 0)
		b.most += most
	}
	return b
}

// passOver reports whether node i of the list can be left out without
// changing the choice: it cannot fit, or with the best score it could
// reach it would still not be chosen over the best node so far (index
// best, with bestScore).
//
// A pick never takes a device that an allocation holds exclusively, and
// two picks only share a device that allows multiple allocations; on a
// node without such devices the plan thus needs b.need free devices. The
// score counts the devices in use after the picks; they add at most
// b.most, and never go beyond all of the node's devices. With
// LeastAllocated the score is at least what is in use already.
func (s *search) passOver(b bounds, views *viewList, i, best int, bestScore float64, policy Policy) bool {
	total := int(views.total[i])
	if total == 0 {
		return false
	}
	var used, free int
	if local := views.local[i]; local >= 0 {
		used, free = int(s.st.nodeUsed[local]), total-int(s.st.nodeBusy[local])
	} else {
		for _, d := range views.views[i].devices {
			if !s.st.busy[d.index] {
				free++
			}
			if s.st.busy[d.index] || s.st.shared[d.index] {
				used++
			}
		}
	}
	if !views.multi[i] && free < b.need {
		return true
	}
	if best < 0 {
		return false
	}
	reach := float64(min(used+b.most, total)) / float64(total)
	if policy == LeastAllocated {
		reach = float64(used) / float64(total)
		if reach != bestScore {
			return reach > bestScore
		}
	} else if reach != bestScore {
		return reach < bestScore
	}
	// A tie goes to the name that sorts first.
	if views.sorted {
		return i > best
	}
	return views.nodes[i].Name > views.nodes[best].Name
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
