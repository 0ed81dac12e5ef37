package e2e

import (
	"strings"
	"testing"
)

// TestPriorityClasses: the system classes exist from the start and cannot
// be deleted; a pod gets the priority and preemptionPolicy of its class, or
// of the global default class when it names none; only one class may be
// the global default; a pod naming no known class, or a priority its class
// does not give, is refused as upstream refuses it.
func TestPriorityClasses(t *testing.T) {
	s := sharedServer(t)
	out := s.MustKubectl(t, "", "get", "priorityclasses")
	for _, want := range []string{"system-cluster-critical   2000000000", "system-node-critical      2000001000", "PREEMPTIONPOLICY"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get priorityclasses lacks %q:\n%s", want, out)
		}
	}
	if out, err := s.Kubectl(t, "", "delete", "pc", "system-node-critical"); err == nil || !strings.Contains(out, "this is a system priority class and cannot be deleted") {
		t.Errorf("deleting a system class: %v: %s", err, out)
	}
	if out := s.MustKubectl(t, "", "explain", "priorityclass.preemptionPolicy"); !strings.Contains(out, "PreemptLowerPriority") {
		t.Errorf("kubectl explain:\n%s", out)
	}

	s.MustKubectl(t, `apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: e2e-batch
value: 100
globalDefault: true
description: the default of the e2e test
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: e2e-inference
value: 10000
preemptionPolicy: Never
`, "apply", "-f", "-")
	t.Cleanup(func() { _, _ = s.Kubectl(t, "", "delete", "pc", "e2e-batch", "e2e-inference") })

	if out, err := s.Kubectl(t, `apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: e2e-second-default
value: 5
globalDefault: true
`, "create", "-f", "-"); err == nil || !strings.Contains(out, "PriorityClass e2e-batch is already marked as default. Only one default can exist") {
		t.Errorf("a second default: %v: %s", err, out)
	}
	if out, err := s.Kubectl(t, "", "patch", "pc", "e2e-inference", "--type=merge", "-p", `{"value": 1}`); err == nil || !strings.Contains(out, "may not be changed in an update") {
		t.Errorf("changing a value: %v: %s", err, out)
	}
	if out, err := s.Kubectl(t, `apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata:
  name: e2e-too-high
value: 1000000001
`, "create", "-f", "-"); err == nil || !strings.Contains(out, "maximum allowed value of a user defined priority is 1000000000") {
		t.Errorf("a value above the user range: %v: %s", err, out)
	}

	pod := func(name, extra string) string {
		return `apiVersion: v1
kind: Pod
metadata:
  name: ` + name + `
  namespace: default
spec:` + extra + `
  containers:
  - name: main
    image: registry.k8s.io/pause:3.10
`
	}
	s.MustKubectl(t, pod("e2e-default-priority", ""), "create", "-f", "-")
	s.MustKubectl(t, pod("e2e-inference", "\n  priorityClassName: e2e-inference"), "create", "-f", "-")
	t.Cleanup(func() {
		_, _ = s.Kubectl(t, "", "delete", "pod", "-n", "default", "e2e-default-priority", "e2e-inference", "--grace-period=0", "--force")
	})
	for name, want := range map[string]string{
		"e2e-default-priority": "e2e-batch/100/PreemptLowerPriority",
		"e2e-inference":        "e2e-inference/10000/Never",
	} {
		if got := s.MustKubectl(t, "", "get", "pod", "-n", "default", name, "-o", "jsonpath={.spec.priorityClassName}/{.spec.priority}/{.spec.preemptionPolicy}"); got != want {
			t.Errorf("pod %s: %s, want %s", name, got, want)
		}
	}
	// An update that leaves the priority out keeps it.
	s.MustKubectl(t, pod("e2e-inference", "\n  priorityClassName: e2e-inference"), "replace", "-f", "-")
	if got := s.MustKubectl(t, "", "get", "pod", "-n", "default", "e2e-inference", "-o", "jsonpath={.spec.priority}"); got != "10000" {
		t.Errorf("priority after replace: %s", got)
	}

	for _, tc := range []struct{ name, extra, want string }{
		{"e2e-unknown-class", "\n  priorityClassName: gold", `pods "e2e-unknown-class" is forbidden: no PriorityClass with name gold was found`},
		{"e2e-own-priority", "\n  priorityClassName: e2e-inference\n  priority: 7", "the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 10000 from the given PriorityClass name"},
		{"e2e-own-policy", "\n  priorityClassName: e2e-inference\n  preemptionPolicy: PreemptLowerPriority", "the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec"},
	} {
		if out, err := s.Kubectl(t, pod(tc.name, tc.extra), "create", "-f", "-"); err == nil || !strings.Contains(out, tc.want) || !strings.Contains(out, "Forbidden") {
			t.Errorf("pod %s: %v: %s", tc.name, err, out)
		}
	}
}
