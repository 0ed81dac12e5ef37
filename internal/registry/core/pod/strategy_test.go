package pod

import (
	"context"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/draplane/draplane/internal/registry/core/internal/corescheme"
)

// errorFields returns the set of fields named by errs.
func errorFields(errs field.ErrorList) sets.Set[string] {
	fields := sets.New[string]()
	for _, err := range errs {
		fields.Insert(err.Field)
	}
	return fields
}

func TestValidatePod(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*corev1.Pod)
		want   []string
	}{
		{name: "valid"},
		{name: "bad name", mutate: func(p *corev1.Pod) { p.Name = "Not_Valid" }, want: []string{"metadata.name"}},
		{name: "no containers", mutate: func(p *corev1.Pod) { p.Spec.Containers = nil }, want: []string{"spec.containers"}},
		{name: "container without name and image", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Name, p.Spec.Containers[0].Image = "", "" },
			want: []string{"spec.containers[0].name", "spec.containers[0].image"}},
		{name: "container name not a DNS label", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Name = "a.b" }, want: []string{"spec.containers[0].name"}},
		{name: "duplicate container across init and regular", mutate: func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "ctr", Image: "x", ImagePullPolicy: corev1.PullAlways, TerminationMessagePolicy: corev1.TerminationMessageReadFile}}
		}, want: []string{"spec.containers[0].name"}},
		{name: "bad restart policy", mutate: func(p *corev1.Pod) { p.Spec.RestartPolicy = "Sometimes" }, want: []string{"spec.restartPolicy"}},
		{name: "bad port", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 70000, Protocol: corev1.ProtocolTCP}}
		}, want: []string{"spec.containers[0].ports[0].containerPort"}},
		{name: "request above limit", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
			}
		}, want: []string{"spec.containers[0].resources.requests[cpu]"}},
		{name: "extended resources backed by devices", mutate: func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "x", ImagePullPolicy: corev1.PullAlways, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				Resources: extendedResources("deviceclass.resource.kubernetes.io/gpu.example.com", "1", "")}}
			p.Spec.Containers[0].Resources = extendedResources("example.com/gpu", "2", "2")
		}},
		{name: "extended resource request without limit", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = extendedResources("example.com/gpu", "2", "")
		}, want: []string{"spec.containers[0].resources.limits[example.com/gpu]"}},
		{name: "extended resource request below limit", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = extendedResources("example.com/gpu", "1", "2")
		}, want: []string{"spec.containers[0].resources.requests[example.com/gpu]"}},
		{name: "fractional devices", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = extendedResources("example.com/gpu", "500m", "500m")
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "x", ImagePullPolicy: corev1.PullAlways, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				Resources: extendedResources("deviceclass.resource.kubernetes.io/gpu", "1.5", "")}}
		}, want: []string{"spec.containers[0].resources.requests[example.com/gpu]", "spec.containers[0].resources.limits[example.com/gpu]",
			"spec.initContainers[0].resources.requests[deviceclass.resource.kubernetes.io/gpu]"}},
		{name: "bad resource names", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{
				"gpu":                      resource.MustParse("1"),
				"requests.example.com/gpu": resource.MustParse("1"),
				"example.com/a b":          resource.MustParse("1"),
			}}
		}, want: []string{"spec.containers[0].resources.requests[gpu]", "spec.containers[0].resources.requests[requests.example.com/gpu]",
			"spec.containers[0].resources.requests[example.com/a b]",
			// Names that are not Kubernetes' own are not overcommitable.
			"spec.containers[0].resources.limits[requests.example.com/gpu]", "spec.containers[0].resources.limits[example.com/a b]"}},
		{name: "mount of unknown volume", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
		}, want: []string{"spec.containers[0].volumeMounts[0].name"}},
		{name: "resource claims", mutate: func(p *corev1.Pod) {
			p.Spec.ResourceClaims = []corev1.PodResourceClaim{
				{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu-template")},
				{Name: "both", ResourceClaimName: ptr.To("a"), ResourceClaimTemplateName: ptr.To("b")},
				{Name: "gpu", ResourceClaimName: ptr.To("c")},
			}
			p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}, {Name: "missing"}}
		}, want: []string{"spec.resourceClaims[1]", "spec.resourceClaims[2].name", "spec.containers[0].resources.claims[1].name"}},
		{name: "toleration with value and Exists", mutate: func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Value: "v"}}
		}, want: []string{"spec.tolerations[0].value"}},
		{name: "tolerationSeconds without NoExecute", mutate: func(p *corev1.Pod) {
			p.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule, TolerationSeconds: ptr.To[int64](5)}}
		}, want: []string{"spec.tolerations[0].effect"}},
		{name: "nodeName with scheduling gates", mutate: func(p *corev1.Pod) {
			p.Spec.NodeName = "node-a"
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/gate"}}
		}, want: []string{"spec.nodeName"}},
		{name: "node affinity pinning a node", mutate: func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-a"}}}}},
			}}}
		}},
		{name: "bad node affinity", mutate: func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn}},
					MatchFields:      []corev1.NodeSelectorRequirement{{Key: "metadata.labels", Operator: corev1.NodeSelectorOpExists}},
				}},
			}}}
		}, want: []string{
			"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values",
			"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0].key",
			"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0].operator",
			// No values error: as upstream, a field requirement's one value
			// is asked for only with In and NotIn.
		}},
		{name: "preferred node affinity with a value no label has", mutate: func(p *corev1.Pod) {
			// As upstream: a preference can only fail to match.
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
				Weight:     1,
				Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"not a label value"}}}},
			}}}}
		}},
		{name: "node affinity pinning a node name that is not one", mutate: func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{""}}}}},
			}}}
		}, want: []string{"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0].values[0]"}},
		{name: "two volume sources", mutate: func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}, HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		}, want: []string{"spec.volumes[0]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := newPod("pod")
			if tc.mutate != nil {
				tc.mutate(pod)
			}
			got := errorFields(Strategy.Validate(context.Background(), pod))
			if want := sets.New(tc.want...); !got.Equal(want) {
				t.Errorf("error fields %v, want %v", sets.List(got), sets.List(want))
			}
		})
	}
}

func TestValidatePodUpdate(t *testing.T) {
	prioritized := func(p *corev1.Pod) {
		p.Spec.Priority, p.Spec.PreemptionPolicy = ptr.To[int32](100), ptr.To(corev1.PreemptNever)
	}
	gated := func(p *corev1.Pod) {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/a"}, {Name: "example.com/b"}}
	}
	for _, tc := range []struct {
		name      string
		oldMutate func(*corev1.Pod)
		mutate    func(*corev1.Pod)
		want      []string
	}{
		{name: "no change"},
		{name: "image", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "other:2" }},
		{name: "add toleration", mutate: func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists})
		}},
		{name: "remove toleration",
			oldMutate: func(p *corev1.Pod) {
				p.Spec.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}
			},
			mutate: func(p *corev1.Pod) { p.Spec.Tolerations = nil },
			want:   []string{"spec.tolerations"}},
		{name: "remove scheduling gate", oldMutate: gated, mutate: func(p *corev1.Pod) { p.Spec.SchedulingGates = p.Spec.SchedulingGates[1:] }},
		{name: "add scheduling gate", mutate: func(p *corev1.Pod) {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/new"}}
		}, want: []string{"spec.schedulingGates[0]"}},
		{name: "node selector while gated", oldMutate: gated, mutate: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"a": "b"} }},
		{name: "node selector when not gated", mutate: func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"a": "b"} }, want: []string{"spec"}},
		{name: "shorter deadline", oldMutate: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](60) },
			mutate: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](30) }},
		{name: "longer deadline", oldMutate: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](60) },
			mutate: func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](90) }, want: []string{"spec.activeDeadlineSeconds"}},
		{name: "nodeName", mutate: func(p *corev1.Pod) { p.Spec.NodeName = "node-a" }, want: []string{"spec.nodeName"}},
		{name: "restart policy", mutate: func(p *corev1.Pod) { p.Spec.RestartPolicy = corev1.RestartPolicyNever }, want: []string{"spec"}},
		// The Priority admission set them at create; an update that leaves
		// them out keeps them, one that changes them is refused.
		{name: "priority left out", oldMutate: prioritized, mutate: func(p *corev1.Pod) { p.Spec.Priority, p.Spec.PreemptionPolicy = nil, nil }},
		{name: "priority changed", oldMutate: prioritized, mutate: func(p *corev1.Pod) { p.Spec.Priority = ptr.To[int32](1) }, want: []string{"spec"}},
		{name: "add container", mutate: func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, p.Spec.Containers[0])
			p.Spec.Containers[1].Name = "second"
		}, want: []string{"spec"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oldPod := newPod("pod")
			oldPod.ResourceVersion = "1"
			if tc.oldMutate != nil {
				tc.oldMutate(oldPod)
			}
			pod := oldPod.DeepCopy()
			if tc.mutate != nil {
				tc.mutate(pod)
			}
			Strategy.PrepareForUpdate(context.Background(), pod, oldPod)
			got := errorFields(Strategy.ValidateUpdate(context.Background(), pod, oldPod))
			if want := sets.New(tc.want...); !got.Equal(want) {
				t.Errorf("error fields %v, want %v", sets.List(got), sets.List(want))
			}
		})
	}
}

func TestValidatePodStatusUpdate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		oldPhase corev1.PodPhase
		status   corev1.PodStatus
		// claims are the container's resources.claims.
		claims []corev1.ResourceClaim
		want   []string
	}{
		{name: "running", oldPhase: corev1.PodPending, status: corev1.PodStatus{Phase: corev1.PodRunning}},
		{name: "unknown phase", oldPhase: corev1.PodPending, status: corev1.PodStatus{Phase: "Sleeping"}, want: []string{"status.phase"}},
		{name: "leave terminal phase", oldPhase: corev1.PodSucceeded, status: corev1.PodStatus{Phase: corev1.PodRunning}, want: []string{"status.phase"}},
		{name: "bad condition", oldPhase: corev1.PodPending, status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: "", Status: "Maybe"}}},
			want: []string{"status.conditions[0].type", "status.conditions[0].status"}},
		{name: "extended resource claim", oldPhase: corev1.PodPending, status: corev1.PodStatus{Phase: corev1.PodPending,
			ExtendedResourceClaimStatus: &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "pod-extended-resources-x7k2p",
				RequestMappings: []corev1.ContainerExtendedResourceRequest{{ContainerName: "ctr", ResourceName: "example.com/gpu", RequestName: "container-0-request-0"}}}}},
		{name: "bad extended resource claim", oldPhase: corev1.PodPending, status: corev1.PodStatus{Phase: corev1.PodPending,
			ExtendedResourceClaimStatus: &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "Not_Valid",
				RequestMappings: []corev1.ContainerExtendedResourceRequest{
					{ContainerName: "nope", ResourceName: "example.com/gpu", RequestName: "r"},
					{ContainerName: "ctr", ResourceName: "example.com/fpga", RequestName: "Not_A_Label"},
					{ContainerName: "ctr", ResourceName: "example.com/gpu", RequestName: "r"},
					{ContainerName: "ctr", ResourceName: "example.com/gpu", RequestName: "r"},
				}}},
			want: []string{"status.extendedResourceClaimStatus.resourceClaimName", "status.extendedResourceClaimStatus.requestMappings[0].containerName",
				"status.extendedResourceClaimStatus.requestMappings[1].resourceName", "status.extendedResourceClaimStatus.requestMappings[1].requestName",
				"status.extendedResourceClaimStatus.requestMappings[3]"}},
		{name: "extended resource claim without mappings", oldPhase: corev1.PodPending, status: corev1.PodStatus{Phase: corev1.PodPending,
			ExtendedResourceClaimStatus: &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "c"}},
			want: []string{"status.extendedResourceClaimStatus.requestMappings"}},
		{name: "device health named after the container's claims", oldPhase: corev1.PodPending,
			claims: []corev1.ResourceClaim{{Name: "gpu"}, {Name: "nic", Request: "fast"}},
			status: allocatedResourcesStatus("claim:gpu", "claim:nic/fast", "example.com/gpu")},
		{name: "device health named after the claim object, or a request the container does not name", oldPhase: corev1.PodPending,
			claims: []corev1.ResourceClaim{{Name: "gpu"}, {Name: "nic", Request: "fast"}},
			status: allocatedResourcesStatus("claim:pod-gpu-x7k2p/gpu", "claim:gpu/req", "claim:nic", "claim:nic/slow", "example.com/fpga"),
			want: []string{"status.containerStatuses[0].allocatedResourcesStatus[0].name", "status.containerStatuses[0].allocatedResourcesStatus[1].name",
				"status.containerStatuses[0].allocatedResourcesStatus[2].name", "status.containerStatuses[0].allocatedResourcesStatus[3].name",
				"status.containerStatuses[0].allocatedResourcesStatus[4].name"}},
		{name: "device health of the extended resource claim", oldPhase: corev1.PodPending,
			status: func() corev1.PodStatus {
				status := allocatedResourcesStatus("claim:pod-extended-resources-x7k2p/container-0-request-0")
				status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "pod-extended-resources-x7k2p",
					RequestMappings: []corev1.ContainerExtendedResourceRequest{{ContainerName: "ctr", ResourceName: "example.com/gpu", RequestName: "container-0-request-0"}}}
				return status
			}()},
		{name: "claim status for unknown claim", oldPhase: corev1.PodPending, status: corev1.PodStatus{Phase: corev1.PodPending,
			ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "nope", ResourceClaimName: ptr.To("x")}}},
			want: []string{"status.resourceClaimStatuses[0].name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oldPod := newPod("pod")
			oldPod.ResourceVersion = "1"
			oldPod.Status.Phase = tc.oldPhase
			oldPod.Spec.Containers[0].Resources = extendedResources("example.com/gpu", "1", "1")
			oldPod.Spec.Containers[0].Resources.Claims = tc.claims
			pod := oldPod.DeepCopy()
			pod.Status = tc.status
			pod.Spec.NodeName = "sneaky"
			StatusStrategy.PrepareForUpdate(context.Background(), pod, oldPod)
			if pod.Spec.NodeName != "" {
				t.Errorf("status update changed spec.nodeName to %q", pod.Spec.NodeName)
			}
			got := errorFields(StatusStrategy.ValidateUpdate(context.Background(), pod, oldPod))
			if want := sets.New(tc.want...); !got.Equal(want) {
				t.Errorf("error fields %v, want %v", sets.List(got), sets.List(want))
			}
		})
	}
}

// allocatedResourcesStatus is a pending pod's status whose container
// ctr reports one healthy resource under each name.
func allocatedResourcesStatus(names ...corev1.ResourceName) corev1.PodStatus {
	status := corev1.ContainerStatus{Name: "ctr"}
	for _, name := range names {
		status.AllocatedResourcesStatus = append(status.AllocatedResourcesStatus, corev1.ResourceStatus{Name: name,
			Resources: []corev1.ResourceHealth{{ResourceID: "example.com/node-a/dev-0", Health: corev1.ResourceHealthStatusHealthy}}})
	}
	return corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{status}}
}

// TestStatusKeepsExtendedResourceClaim: a status write that leaves the
// record of the extended resource claim out does not remove it.
func TestStatusKeepsExtendedResourceClaim(t *testing.T) {
	oldPod := newPod("pod")
	oldPod.ResourceVersion = "1"
	recorded := &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "pod-extended-resources-x7k2p",
		RequestMappings: []corev1.ContainerExtendedResourceRequest{{ContainerName: "ctr", ResourceName: "example.com/gpu", RequestName: "container-0-request-0"}}}
	oldPod.Status.ExtendedResourceClaimStatus = recorded
	pod := oldPod.DeepCopy()
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning}
	StatusStrategy.PrepareForUpdate(context.Background(), pod, oldPod)
	if pod.Status.ExtendedResourceClaimStatus == nil || pod.Status.ExtendedResourceClaimStatus.ResourceClaimName != recorded.ResourceClaimName {
		t.Errorf("extendedResourceClaimStatus after an update without it: %+v, want %+v", pod.Status.ExtendedResourceClaimStatus, recorded)
	}
}

func extendedResources(name, request, limit string) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceName(name): resource.MustParse(request)}}
	if limit != "" {
		r.Limits = corev1.ResourceList{corev1.ResourceName(name): resource.MustParse(limit)}
	}
	return r
}

func TestCheckGracefulDelete(t *testing.T) {
	for _, tc := range []struct {
		name    string
		node    string
		phase   corev1.PodPhase
		options *metav1.DeleteOptions
		want    int64
	}{
		{name: "unbound pod is deleted at once", phase: corev1.PodPending, options: &metav1.DeleteOptions{}, want: 0},
		{name: "unbound pod ignores a requested grace period", phase: corev1.PodPending, options: metav1.NewDeleteOptions(10), want: 0},
		{name: "bound pod gets its termination grace period", node: "n", phase: corev1.PodRunning, options: &metav1.DeleteOptions{}, want: 30},
		{name: "bound pod with requested grace period", node: "n", phase: corev1.PodRunning, options: metav1.NewDeleteOptions(5), want: 5},
		{name: "negative grace period becomes 1", node: "n", phase: corev1.PodRunning, options: metav1.NewDeleteOptions(-3), want: 1},
		{name: "finished pod is deleted at once", node: "n", phase: corev1.PodSucceeded, options: &metav1.DeleteOptions{}, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := newPod("pod")
			pod.Spec.NodeName = tc.node
			pod.Status.Phase = tc.phase
			if !Strategy.CheckGracefulDelete(context.Background(), pod, tc.options) {
				t.Fatal("CheckGracefulDelete returned false")
			}
			if got := ptr.Deref(tc.options.GracePeriodSeconds, -100); got != tc.want {
				t.Errorf("grace period %d, want %d", got, tc.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Containers: []corev1.Container{
			{Name: "latest", Image: "app:latest", Ports: []corev1.ContainerPort{{ContainerPort: 80}}},
			{Name: "untagged", Image: "registry:5000/app"},
			{Name: "tagged", Image: "registry:5000/app:1.2"},
			{Name: "digest", Image: "app@sha256:0123", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}},
		},
		Volumes: []corev1.Volume{{Name: "scratch"}},
	}}
	corescheme.SetDefaultsPod(pod)
	spec := pod.Spec
	if spec.SchedulerName != "default-scheduler" || spec.RestartPolicy != corev1.RestartPolicyAlways || spec.DNSPolicy != corev1.DNSClusterFirst ||
		ptr.Deref(spec.TerminationGracePeriodSeconds, 0) != 30 || spec.SecurityContext == nil || !ptr.Deref(spec.EnableServiceLinks, false) ||
		spec.Priority != nil || spec.PreemptionPolicy != nil {
		t.Errorf("pod spec defaults missing: %+v", spec)
	}
	wantPull := []corev1.PullPolicy{corev1.PullAlways, corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullIfNotPresent}
	for i, c := range spec.Containers {
		if c.ImagePullPolicy != wantPull[i] {
			t.Errorf("container %s: imagePullPolicy %s, want %s", c.Name, c.ImagePullPolicy, wantPull[i])
		}
		if c.TerminationMessagePath != "/dev/termination-log" || c.TerminationMessagePolicy != corev1.TerminationMessageReadFile {
			t.Errorf("container %s: termination message defaults missing", c.Name)
		}
	}
	if spec.Containers[0].Ports[0].Protocol != corev1.ProtocolTCP {
		t.Errorf("port protocol not defaulted")
	}
	if got := spec.Containers[3].Resources.Requests[corev1.ResourceCPU]; got.String() != "1" {
		t.Errorf("cpu request %s, want 1 (from the limit)", got.String())
	}
	if spec.Volumes[0].EmptyDir == nil {
		t.Errorf("volume without source did not become emptyDir")
	}
	if errs := ValidatePod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: spec}); len(errs) > 0 {
		t.Errorf("defaulted pod is invalid: %v", errs)
	}
}

func TestQOSClass(t *testing.T) {
	cpu := func(request, limit string) corev1.Container {
		c := corev1.Container{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}}
		if request != "" {
			c.Resources.Requests[corev1.ResourceCPU] = resource.MustParse(request)
		}
		if limit != "" {
			c.Resources.Limits[corev1.ResourceCPU] = resource.MustParse(limit)
		}
		return c
	}
	guaranteed := cpu("1", "1")
	guaranteed.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("1Gi")
	guaranteed.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1Gi")
	for _, tc := range []struct {
		name       string
		containers []corev1.Container
		want       corev1.PodQOSClass
	}{
		{name: "nothing set", containers: []corev1.Container{{}}, want: corev1.PodQOSBestEffort},
		{name: "request only", containers: []corev1.Container{cpu("1", "")}, want: corev1.PodQOSBurstable},
		{name: "cpu limits only", containers: []corev1.Container{cpu("1", "1")}, want: corev1.PodQOSBurstable},
		{name: "cpu and memory limits equal requests", containers: []corev1.Container{guaranteed}, want: corev1.PodQOSGuaranteed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := qosClass(&corev1.PodSpec{Containers: tc.containers}); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestPodTable(t *testing.T) {
	running := newPod("running")
	running.Spec.NodeName = "node-a"
	running.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
		{Name: "ctr", Ready: true, RestartCount: 2, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
	}}
	crashing := newPod("crashing")
	crashing.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
		{Name: "ctr", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}},
	}}
	gated := newPod("gated", func(p *corev1.Pod) { p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/g"}} })
	gated.Status.Phase = corev1.PodPending
	terminating := newPod("terminating")
	terminating.Status.Phase = corev1.PodRunning
	terminating.DeletionTimestamp = &metav1.Time{}

	list := &corev1.PodList{Items: []corev1.Pod{*running, *crashing, *gated, *terminating}}
	table, err := tableConvertor.ConvertToTable(context.Background(), list, nil)
	if err != nil {
		t.Fatal(err)
	}
	var headers []string
	for _, column := range table.ColumnDefinitions {
		if column.Priority == 0 {
			headers = append(headers, column.Name)
		}
	}
	if want := []string{"Name", "Ready", "Status", "Restarts", "Age", "Node"}; !equalStrings(headers, want) {
		t.Errorf("columns %v, want %v", headers, want)
	}
	want := [][]interface{}{
		{"running", "1/1", "Running", "2", "node-a"},
		{"crashing", "0/1", "CrashLoopBackOff", "0", "<none>"},
		{"gated", "0/1", "SchedulingGated", "0", "<none>"},
		{"terminating", "0/1", "Terminating", "0", "<none>"},
	}
	for i, row := range table.Rows {
		got := []interface{}{row.Cells[0], row.Cells[1], row.Cells[2], row.Cells[3], row.Cells[5]}
		for j := range got {
			if got[j] != want[i][j] {
				t.Errorf("row %d: got %v, want %v", i, got, want[i])
				break
			}
		}
	}
}

// The store may run CheckGracefulDelete on a stale copy of a pod (say, from
// before it was bound) and then on the current one with the same, already
// changed options: the second call must still see what the request asked.
func TestCheckGracefulDeleteRetriedWithCurrentPod(t *testing.T) {
	for _, tc := range []struct {
		name    string
		options *metav1.DeleteOptions
		want    int64
	}{
		{name: "no grace period requested", options: &metav1.DeleteOptions{}, want: 30},
		{name: "grace period requested", options: metav1.NewDeleteOptions(7), want: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := withRequestedGracePeriod(context.Background(), tc.options)
			stale := newPod("pod")
			current := stale.DeepCopy()
			current.Spec.NodeName = "node-a"
			Strategy.CheckGracefulDelete(ctx, stale, tc.options)
			if got := ptr.Deref(tc.options.GracePeriodSeconds, -1); got != 0 {
				t.Fatalf("stale unbound pod: grace period %d, want 0", got)
			}
			Strategy.CheckGracefulDelete(ctx, current, tc.options)
			if got := ptr.Deref(tc.options.GracePeriodSeconds, -1); got != tc.want {
				t.Errorf("current bound pod: grace period %d, want %d", got, tc.want)
			}
		})
	}
}

// TestSelectableFields: leaving empty fields out of the set changes no
// selector's answer. Every selectable field is tried with = and != against
// its value, against empty and against another value, on a pending pod
// (most fields empty) and a running one (none), and the answers are those
// of the set with every field in it, as upstream builds it.
func TestSelectableFields(t *testing.T) {
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways}}
	running := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"},
		Spec: corev1.PodSpec{NodeName: "node-1", RestartPolicy: corev1.RestartPolicyNever, SchedulerName: "default-scheduler",
			ServiceAccountName: "default", HostNetwork: true},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}}, PodIP: "10.0.0.9", NominatedNodeName: "node-2"},
	}
	full := func(pod *corev1.Pod) fields.Set {
		podIP := pod.Status.PodIP
		if len(pod.Status.PodIPs) > 0 {
			podIP = pod.Status.PodIPs[0].IP
		}
		return fields.Set{
			"metadata.name": pod.Name, "metadata.namespace": pod.Namespace,
			"spec.nodeName": pod.Spec.NodeName, "spec.restartPolicy": string(pod.Spec.RestartPolicy),
			"spec.schedulerName": pod.Spec.SchedulerName, "spec.serviceAccountName": pod.Spec.ServiceAccountName,
			"spec.hostNetwork": strconv.FormatBool(pod.Spec.HostNetwork), "status.phase": string(pod.Status.Phase),
			"status.podIP": podIP, "status.nominatedNodeName": pod.Status.NominatedNodeName,
		}
	}
	for name, pod := range map[string]*corev1.Pod{"pending": pending, "running": running} {
		t.Run(name, func(t *testing.T) {
			want, got := full(pod), ToSelectableFields(pod)
			if name == "pending" && len(got) > 8 {
				t.Errorf("%d fields kept for a pending pod, want the empty ones left out: %v", len(got), got)
			}
			for field, value := range want {
				for _, v := range []string{value, "", "other"} {
					for _, op := range []string{"=", "!="} {
						selector, err := fields.ParseSelector(field + op + v)
						if err != nil {
							t.Fatal(err)
						}
						if selector.Matches(got) != selector.Matches(want) {
							t.Errorf("%s: %v on the kept fields, %v on all", selector, selector.Matches(got), selector.Matches(want))
						}
					}
				}
			}
			for field, value := range got {
				if want[field] != value {
					t.Errorf("field %s = %q, want %q", field, value, want[field])
				}
			}
		})
	}
}
