package validation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestValidateNodeSelector checks the one node selector validation against
// upstream's (k8s.io/kubernetes pkg/apis/core/validation
// ValidateNodeSelector). The rows marked "differed" are where the pod
// registry's former copy and this package's former copy disagreed, or
// both disagreed with upstream.
func TestValidateNodeSelector(t *testing.T) {
	const terms = "nodeSelector.nodeSelectorTerms[0]"
	req := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	exprs := func(reqs ...corev1.NodeSelectorRequirement) *corev1.NodeSelector {
		return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: reqs}}}
	}
	fields := func(reqs ...corev1.NodeSelectorRequirement) *corev1.NodeSelector {
		return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: reqs}}}
	}
	for name, tc := range map[string]struct {
		selector          *corev1.NodeSelector
		allowInvalidValue bool
		want              []string
	}{
		"no terms":   {selector: &corev1.NodeSelector{}, want: []string{required("nodeSelector.nodeSelectorTerms")}},
		"empty term": {selector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}},
		"valid":      {selector: exprs(req("zone", corev1.NodeSelectorOpIn, "a", "b"), req("gpu", corev1.NodeSelectorOpExists), req("gen", corev1.NodeSelectorOpGt, "3"))},
		"in without values": {
			selector: exprs(req("zone", corev1.NodeSelectorOpIn)),
			want:     []string{required(terms + ".matchExpressions[0].values")},
		},
		"exists with values": {
			selector: exprs(req("zone", corev1.NodeSelectorOpExists, "a")),
			want:     []string{forbidden(terms + ".matchExpressions[0].values")},
		},
		"gt with two values": {
			selector: exprs(req("gen", corev1.NodeSelectorOpGt, "1", "2")),
			want:     []string{required(terms + ".matchExpressions[0].values")},
		},
		"bad key": {
			selector: exprs(req("-zone", corev1.NodeSelectorOpExists)),
			want:     []string{invalid(terms + ".matchExpressions[0].key")},
		},
		"bad label value": {
			selector: exprs(req("zone", corev1.NodeSelectorOpIn, "not a label value")),
			want:     []string{invalid(terms + ".matchExpressions[0].values[0]")},
		},
		// differed: the pod copy rejected invalid label values in a
		// preferred term; upstream allows them there.
		"bad label value allowed": {
			selector:          exprs(req("zone", corev1.NodeSelectorOpIn, "not a label value")),
			allowInvalidValue: true,
		},
		// differed: both copies answered NotSupported; upstream Invalid.
		"unknown operator": {
			selector: exprs(req("zone", "Near", "a")),
			want:     []string{invalid(terms + ".matchExpressions[0].operator")},
		},
		"field by name": {selector: fields(req("metadata.name", corev1.NodeSelectorOpNotIn, "node-1"))},
		// differed: the pod copy also asked for exactly one value when
		// the operator was not In or NotIn; upstream asks only with those.
		"field with exists": {
			selector: fields(req("metadata.name", corev1.NodeSelectorOpExists)),
			want:     []string{invalid(terms + ".matchFields[0].operator")},
		},
		"field with two values": {
			selector: fields(req("metadata.name", corev1.NodeSelectorOpIn, "a", "b")),
			want:     []string{required(terms + ".matchFields[0].values")},
		},
		// differed: the resource copy accepted any value; upstream (and the
		// pod copy) require a node name.
		"field value not a node name": {
			selector: fields(req("metadata.name", corev1.NodeSelectorOpIn, "Node_1")),
			want:     []string{invalid(terms + ".matchFields[0].values[0]")},
		},
		// differed: the pod copy skipped an empty value; upstream rejects it.
		"field value empty": {
			selector: fields(req("metadata.name", corev1.NodeSelectorOpIn, "")),
			want:     []string{invalid(terms + ".matchFields[0].values[0]")},
		},
		// differed: both copies answered NotSupported; upstream Invalid.
		"field by label": {
			selector: fields(req("metadata.labels", corev1.NodeSelectorOpIn, "a")),
			want:     []string{invalid(terms + ".matchFields[0].key")},
		},
	} {
		t.Run(name, func(t *testing.T) {
			assertErrors(t, ValidateNodeSelector(tc.selector, tc.allowInvalidValue, field.NewPath("nodeSelector")), tc.want)
		})
	}
}
