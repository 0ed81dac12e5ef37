package nodeaffinity

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeSelectorMatches(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a", "gpus": "4"}}}
	req := func(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	term := func(exprs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: exprs}
	}
	tests := []struct {
		name string
		sel  *corev1.NodeSelector
		want bool
	}{
		{"nil selects nothing", nil, false},
		{"empty term selects nothing", &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}, false},
		{"In", &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term(req("zone", corev1.NodeSelectorOpIn, "b", "a"))}}, true},
		{"In other value", &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term(req("zone", corev1.NodeSelectorOpIn, "b"))}}, false},
		{"NotIn", &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term(req("zone", corev1.NodeSelectorOpNotIn, "b"))}}, true},
		{"NotIn missing label", &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term(req("rack", corev1.NodeSelectorOpNotIn, "b"))}}, true},
		{"Exists", &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term(req("zone", corev1.NodeSelectorOpExists))}}, true},
		{"DoesNotExist", &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term(req("zone", corev1.NodeSelectorOpDoesNotExist))}}, false},
		{"Gt", &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term(req("gpus", corev1.NodeSelectorOpGt, "3"))}}, true},
		{"Lt", &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term(req("gpus", corev1.NodeSelectorOpLt, "3"))}}, false},
		{"Gt not a number", &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term(req("zone", corev1.NodeSelectorOpGt, "3"))}}, false},
		{"requirements are ANDed", &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term(req("zone", corev1.NodeSelectorOpIn, "a"), req("gpus", corev1.NodeSelectorOpLt, "3"))}}, false},
		{"terms are ORed", &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term(req("zone", corev1.NodeSelectorOpIn, "b")), term(req("zone", corev1.NodeSelectorOpIn, "a"))}}, true},
		{"matchFields name", &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{req("metadata.name", corev1.NodeSelectorOpIn, "n1")}}}}, true},
		{"matchFields other field", &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{req("metadata.uid", corev1.NodeSelectorOpIn, "n1")}}}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := NodeSelectorMatches(tc.sel, node); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
