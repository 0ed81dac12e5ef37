package preemption

import (
	"context"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/draplane/draplane/allocator"
	resourceapi "github.com/draplane/draplane/apis/resource"
)

// findForGang searches victim sets for the whole gang: a set fits when
// every member can be placed at once.
func (w *world) findForGang(ctx context.Context) (Decision, error) {
	var nodes []*corev1.Node
	seen := map[string]bool{}
	for i := range w.preemptor.Members {
		for _, node := range w.preemptor.Members[i].Nodes {
			if !seen[node.Name] {
				seen[node.Name] = true
				nodes = append(nodes, node)
			}
		}
	}
	fit := w.placeGang
	if w.preemptor.Place != nil {
		fit = w.place
	}
	d, err := w.search(ctx, w.candidates(nodes), fit, -1)
	if err == errBudget {
		return Decision{Reason: "out of attempts before finding victims for the group", Attempts: w.attempts}, nil
	}
	if err != nil {
		return Decision{}, err
	}
	if d.Possible {
		d.Freed, d.FreedBy = w.freedDevices(d.Victims)
	}
	d.Attempts = w.attempts
	return d, nil
}

// place asks Preemptor.Place.
func (w *world) place(ctx context.Context, victims []Pod) ([]allocator.Result, string, error) {
	w.setVictims(victims)
	if w.attempts >= w.budget {
		return nil, "", errBudget
	}
	w.attempts++
	return w.preemptor.Place(ctx, w.state, w.inUse)
}

// placeGang places the members one by one, each on the first of its nodes
// (by name) that leaves room for the following members, backtracking over
// the earlier members' nodes. It undoes what it placed before returning.
func (w *world) placeGang(ctx context.Context, victims []Pod) ([]allocator.Result, string, error) {
	w.setVictims(victims)
	members := w.preemptor.Members
	placement := make([]allocator.Result, len(members))
	deepest, reason := -1, ""
	var place func(m int) (bool, error)
	place = func(m int) (bool, error) {
		if m == len(members) {
			return true, nil
		}
		nodes := slices.Clone(members[m].Nodes)
		sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
		for _, node := range nodes {
			r, err := w.allocate(ctx, members[m].Claims, node)
			if err != nil {
				return false, err
			}
			if !r.Fits() {
				if m > deepest && r.Explanation != nil {
					deepest, reason = m, fmt.Sprintf("%s on %s", members[m].Key, r.Explanation.Summary())
				}
				continue
			}
			w.addMember(m, r.Allocations)
			ok, err := place(m + 1)
			w.removeMember(m, r.Allocations)
			if err != nil {
				return false, err
			}
			if ok {
				placement[m] = r
				return true, nil
			}
		}
		if m > deepest {
			deepest, reason = m, members[m].Key+" fits on none of its nodes"
		}
		return false, nil
	}
	ok, err := place(0)
	if err != nil || !ok {
		return nil, reason, err
	}
	return placement, "", nil
}

// memberClaimUID keys a member's allocation in the working accounting.
func memberClaimUID(member, claim int) types.UID {
	return types.UID(fmt.Sprintf("preemptor-member-%d-claim-%d", member, claim))
}

func (w *world) addMember(m int, allocations []*resourceapi.AllocationResult) {
	for j, alloc := range allocations {
		w.inUse.SetClaim(memberClaimUID(m, j), alloc)
		w.state.Refresh(w.inUse, alloc)
	}
}

func (w *world) removeMember(m int, allocations []*resourceapi.AllocationResult) {
	for j, alloc := range allocations {
		w.inUse.SetClaim(memberClaimUID(m, j), nil)
		w.state.Refresh(w.inUse, alloc)
	}
}

// GangPlace is a Preemptor.Place for a gang: alloc.PlaceGang with req,
// whose members are the preemptor's, so that victims are chosen for a
// placement that keeps the group's topology key and needs only its
// MinCount members. The members left out get an empty result.
func GangPlace(alloc *allocator.Allocator, req allocator.GangRequest) func(context.Context, *allocator.State, *allocator.InUse) ([]allocator.Result, string, error) {
	return func(ctx context.Context, st *allocator.State, u *allocator.InUse) ([]allocator.Result, string, error) {
		result, err := alloc.PlaceGang(ctx, st, u, req)
		if err != nil || result.Placements == nil {
			return nil, result.Reason, err
		}
		placement := make([]allocator.Result, len(req.Members))
		for _, p := range result.Placements {
			placement[p.Member] = allocator.Result{Node: p.Node, Allocations: p.Allocations}
		}
		return placement, "", nil
	}
}
