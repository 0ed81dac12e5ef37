// Package nodeaffinity says whether a node selector selects a node, with
// the semantics of required node affinity: where a claim's allocation may
// be used. It is a leaf of podclaims so that the allocator, which matches
// its devices' and allocations' node selectors, imports it without the
// rest of the pod and claim vocabulary and its informer indexes (as
// upstream keeps k8s.io/component-helpers/scheduling/corev1/nodeaffinity
// apart).
package nodeaffinity

import (
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// NodeSelectorMatches reports whether the node satisfies any term of the
// selector, with the semantics of required node affinity (an empty term
// matches nothing). A nil selector matches nothing: callers handle "all
// nodes" separately.
func NodeSelectorMatches(sel *corev1.NodeSelector, node *corev1.Node) bool {
	if sel == nil {
		return false
	}
	for _, term := range sel.NodeSelectorTerms {
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			// An empty term matches no objects.
			continue
		}
		if termMatches(term, node) {
			return true
		}
	}
	return false
}

func termMatches(term corev1.NodeSelectorTerm, node *corev1.Node) bool {
	for _, req := range term.MatchExpressions {
		value, present := node.Labels[req.Key]
		if !requirementMatches(req, value, present) {
			return false
		}
	}
	for _, req := range term.MatchFields {
		if req.Key != "metadata.name" {
			return false
		}
		if !requirementMatches(req, node.Name, true) {
			return false
		}
	}
	return true
}

func requirementMatches(req corev1.NodeSelectorRequirement, value string, present bool) bool {
	switch req.Operator {
	case corev1.NodeSelectorOpIn:
		return present && slices.Contains(req.Values, value)
	case corev1.NodeSelectorOpNotIn:
		return !present || !slices.Contains(req.Values, value)
	case corev1.NodeSelectorOpExists:
		return present
	case corev1.NodeSelectorOpDoesNotExist:
		return !present
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !present || len(req.Values) != 1 {
			return false
		}
		have, err1 := strconv.ParseInt(value, 10, 64)
		want, err2 := strconv.ParseInt(req.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if req.Operator == corev1.NodeSelectorOpGt {
			return have > want
		}
		return have < want
	}
	return false
}
