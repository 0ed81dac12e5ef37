package e2e

import (
	"strings"
	"testing"
)

const gangGates = "--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true,DRAWorkloadResourceClaims=true"

// TestPodGroupAPI: scheduling.k8s.io/v1beta1 PodGroups are served by
// core-lite behind GenericWorkload, with upstream's defaults and
// validation, and kubectl get, describe, explain and server-side apply
// work with them; pods name their group in spec.schedulingGroup.
func TestPodGroupAPI(t *testing.T) {
	requireKubectl(t)
	s := startServer(t, t.TempDir(), "--controllers=false", gangGates)
	group := `apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata:
  name: train
spec:
  schedulingPolicy:
    gang:
      minCount: 4
  schedulingConstraints:
    topology:
    - key: topology.kubernetes.io/rack
`
	if out := s.MustKubectl(t, group, "apply", "--server-side", "-f", "-"); !strings.Contains(out, "podgroup.scheduling.k8s.io/train serverside-applied") {
		t.Errorf("apply: %s", out)
	}
	// The default disruption mode, as upstream's.
	if out := s.MustKubectl(t, "", "get", "podgroup", "train", "-o", "jsonpath={.spec.disruptionMode}"); out != `{"single":{}}` {
		t.Errorf("disruptionMode %s, want single", out)
	}
	out := s.MustKubectl(t, "", "get", "pg")
	for _, want := range []string{"NAME", "POLICY", "MIN-COUNT", "SCHEDULED", "train", "Gang", "4"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl get pg lacks %q:\n%s", want, out)
		}
	}
	// minCount may change; the policy may not.
	s.MustKubectl(t, strings.Replace(group, "minCount: 4", "minCount: 2", 1), "apply", "--server-side", "-f", "-")
	if out := s.MustKubectl(t, "", "get", "podgroup", "train", "-o", "jsonpath={.spec.schedulingPolicy.gang.minCount}"); out != "2" {
		t.Errorf("minCount after apply %s, want 2", out)
	}
	if out, err := s.Kubectl(t, strings.Replace(group, "topology.kubernetes.io/rack", "topology.kubernetes.io/zone", 1), "apply", "--server-side", "-f", "-"); err == nil || !strings.Contains(out, "spec.schedulingConstraints: Invalid value") || !strings.Contains(out, "field is immutable") {
		t.Errorf("changing the topology: %v\n%s", err, out)
	}
	if out, err := s.Kubectl(t, strings.Replace(group, "minCount: 4", "minCount: 0", 1), "create", "-f", "-"); err == nil || !strings.Contains(out, "spec.schedulingPolicy.gang.minCount: Required value") {
		t.Errorf("minCount 0: %v\n%s", err, out)
	}

	if out := s.MustKubectl(t, "", "explain", "podgroups.spec.schedulingPolicy.gang"); !strings.Contains(out, "minCount") || !strings.Contains(out, "scheduling.k8s.io") {
		t.Errorf("explain:\n%s", out)
	}
	if out := s.MustKubectl(t, "", "describe", "podgroup", "train"); !strings.Contains(out, "Min Count:  2") {
		t.Errorf("describe:\n%s", out)
	}

	pod := `apiVersion: v1
kind: Pod
metadata:
  name: worker-0
spec:
  schedulingGroup:
    podGroupName: train
  containers:
  - name: main
    image: busybox
`
	s.MustKubectl(t, pod, "apply", "--server-side", "-f", "-")
	if out := s.MustKubectl(t, "", "get", "pod", "worker-0", "-o", "jsonpath={.spec.schedulingGroup.podGroupName}"); out != "train" {
		t.Errorf("schedulingGroup %q, want train", out)
	}
	if out, err := s.Kubectl(t, strings.Replace(strings.Replace(pod, "worker-0", "worker-1", 1), "podGroupName: train", "podGroupName: Not_A_Name", 1), "create", "-f", "-"); err == nil || !strings.Contains(out, "spec.schedulingGroup.podGroupName: Invalid value") {
		t.Errorf("bad group name: %v\n%s", err, out)
	}
}

// TestPodGroupGateOff: without GenericWorkload PodGroups are not served and
// spec.schedulingGroup is dropped, as upstream.
func TestPodGroupGateOff(t *testing.T) {
	requireKubectl(t)
	s := sharedServer(t)
	if out, err := s.Kubectl(t, "", "get", "podgroups"); err == nil || !strings.Contains(out, "the server doesn't have a resource type") {
		t.Errorf("podgroups without the gate: %v\n%s", err, out)
	}
	s.MustKubectl(t, `apiVersion: v1
kind: Pod
metadata:
  name: gate-off-group
spec:
  schedulingGroup:
    podGroupName: train
  containers:
  - name: main
    image: busybox
`, "create", "-f", "-")
	if out := s.MustKubectl(t, "", "get", "pod", "gate-off-group", "-o", "jsonpath={.spec.schedulingGroup}"); out != "" {
		t.Errorf("schedulingGroup kept without the gate: %s", out)
	}
}
