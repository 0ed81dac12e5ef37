package allocator

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/internal/features"
)

// results turns the picks of a successful search into AllocationResults.
// What they take from the claims, classes and ResourceSlices is copied
// (DeepCopyInto per device result and per config entry), so that callers
// are free to modify them; what is made here is not copied again. The
// AllocationResults of all claims are one allocation.
func (a *Allocator) results(s *search, node *corev1.Node) []*resourceapi.AllocationResult {
	out := make([]*resourceapi.AllocationResult, len(s.p.claims))
	owned := make([]resourceapi.AllocationResult, len(s.p.claims))
	for ci, claim := range s.p.claims {
		ar := &owned[ci]
		out[ci] = ar
		ar.Devices.Results = make([]resourceapi.DeviceRequestAllocationResult, s.claimPicks[ci])
		var picks []pick
		for _, p := range s.picks {
			if p.slot.claim != ci {
				continue
			}
			picks = append(picks, p)
			d := p.cand.d
			r := resourceapi.DeviceRequestAllocationResult{
				Request:                  p.slot.name,
				Driver:                   d.id.Driver,
				Pool:                     d.id.Pool,
				Device:                   d.id.Device,
				Tolerations:              p.slot.tolerations,
				BindingConditions:        d.api.BindingConditions,
				BindingFailureConditions: d.api.BindingFailureConditions,
			}
			if p.slot.admin {
				r.AdminAccess = new(true)
			}
			if features.Enabled(features.DRAOptionalNodeOperations) {
				// The node reads from the claim which calls its
				// driver may skip; the slice can change later.
				r.SkipNodeOperations = d.slice.Spec.SkipNodeOperations
			}
			if d.multi {
				id := a.newShareID()
				r.ShareID = &id
				if p.cand.consume != nil {
					r.ConsumedCapacity = make(map[resourceapi.QualifiedName]resource.Quantity, len(d.caps))
					for i, v := range p.cand.consume {
						r.ConsumedCapacity[d.caps[i].name] = *resource.NewMilliQuantity(v, d.caps[i].format)
					}
				}
			}
			r.DeepCopyInto(&ar.Devices.Results[len(picks)-1])
		}
		chosen := make([]*slot, len(claim.Spec.Devices.Requests))
		for gi, g := range s.p.groups {
			if g.claim == ci {
				chosen[g.request] = g.slots[s.chosen[gi]]
			}
		}
		if config := allocationConfig(claim, chosen); len(config) > 0 {
			ar.Devices.Config = make([]resourceapi.DeviceAllocationConfiguration, len(config))
			for i := range config {
				config[i].DeepCopyInto(&ar.Devices.Config[i])
			}
		}
		ar.NodeSelector = allocationNodeSelector(picks, node.Name)
	}
	return out
}

// onlyNode is a node selector of one node by name, made in one allocation.
type onlyNode struct {
	selector    corev1.NodeSelector
	term        [1]corev1.NodeSelectorTerm
	requirement [1]corev1.NodeSelectorRequirement
	name        [1]string
}

func newOnlyNode(nodeName string) *corev1.NodeSelector {
	o := &onlyNode{name: [1]string{nodeName}}
	o.requirement[0] = corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: o.name[:]}
	o.term[0].MatchFields = o.requirement[:]
	o.selector.NodeSelectorTerms = o.term[:]
	return &o.selector
}

// allocationConfig lists the configuration of the classes (each class once,
// naming every request that used it) followed by the claim's own, in the
// order they were written. A config that applies to every request names
// none, which means all.
func allocationConfig(claim *resourceapi.ResourceClaim, chosen []*slot) []resourceapi.DeviceAllocationConfiguration {
	var config []resourceapi.DeviceAllocationConfiguration
	classRange := make(map[string][2]int)
	reqs := claim.Spec.Devices.Requests
	for ri := range reqs {
		sl := chosen[ri]
		if sl == nil || sl.class == nil {
			continue
		}
		if r, ok := classRange[sl.class.Name]; ok {
			for i := r[0]; i < r[1]; i++ {
				config[i].Requests = append(config[i].Requests, sl.name)
			}
			continue
		}
		start := len(config)
		for _, c := range sl.class.Spec.Config {
			config = append(config, resourceapi.DeviceAllocationConfiguration{
				Source:              resourceapi.AllocationConfigSourceClass,
				Requests:            []string{sl.name},
				DeviceConfiguration: c.DeviceConfiguration,
			})
		}
		classRange[sl.class.Name] = [2]int{start, len(config)}
	}
	for _, c := range claim.Spec.Devices.Config {
		applies := len(c.Requests) == 0
		for ri := range reqs {
			if applies {
				break
			}
			sl := chosen[ri]
			applies = slices.Contains(c.Requests, reqs[ri].Name) || sl != nil && sl.sub >= 0 && slices.Contains(c.Requests, sl.name)
		}
		if applies {
			config = append(config, resourceapi.DeviceAllocationConfiguration{
				Source:              resourceapi.AllocationConfigSourceClaim,
				Requests:            c.Requests,
				DeviceConfiguration: c.DeviceConfiguration,
			})
		}
	}
	for i := range config {
		if config[i].Source == resourceapi.AllocationConfigSourceClass && len(config[i].Requests) == len(reqs) {
			config[i].Requests = nil
		}
	}
	return config
}

// allocationNodeSelector says where the allocated devices can be used: only
// on the chosen node if any device is local to it or binds to it, on the
// nodes selected by all device node selectors combined, or anywhere. It
// shares nothing with the devices' node selectors.
func allocationNodeSelector(picks []pick, nodeName string) *corev1.NodeSelector {
	term := corev1.NodeSelectorTerm{}
	for _, p := range picks {
		d := p.cand.d
		if d.nodeName != "" || deref(d.api.BindsToNode) {
			return newOnlyNode(nodeName)
		}
		if d.nodeSelector != nil && len(d.nodeSelector.NodeSelectorTerms) == 1 {
			t := d.nodeSelector.NodeSelectorTerms[0]
			term.MatchFields = addRequirements(term.MatchFields, t.MatchFields)
			term.MatchExpressions = addRequirements(term.MatchExpressions, t.MatchExpressions)
		} else if d.nodeSelector != nil && len(d.nodeSelector.NodeSelectorTerms) > 1 {
			// Terms are ORed; they can't be merged into one term, so pin
			// the allocation to the node that was checked.
			return newOnlyNode(nodeName)
		}
	}
	if len(term.MatchFields) == 0 && len(term.MatchExpressions) == 0 {
		return nil
	}
	// The requirements are the devices' own.
	return (&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term}}).DeepCopy()
}

func addRequirements(to, from []corev1.NodeSelectorRequirement) []corev1.NodeSelectorRequirement {
	for _, r := range from {
		dup := slices.ContainsFunc(to, func(e corev1.NodeSelectorRequirement) bool {
			if e.Key != r.Key || e.Operator != r.Operator || len(e.Values) != len(r.Values) {
				return false
			}
			a, b := slices.Clone(e.Values), slices.Clone(r.Values)
			slices.Sort(a)
			slices.Sort(b)
			return slices.Equal(a, b)
		})
		if !dup {
			to = append(to, r)
		}
	}
	return to
}
