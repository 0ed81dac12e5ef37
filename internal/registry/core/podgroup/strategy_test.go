package podgroup

import (
	"context"
	"strings"
	"testing"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/registry/rest"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/utils/ptr"

	"github.com/draplane/draplane/internal/features"
	"github.com/draplane/draplane/internal/registry/core/internal/coretesting"
)

func gang(minCount int32) schedulingv1beta1.PodGroupSpec {
	return schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}}}
}

func TestValidate(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.GenericWorkload, true)
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRAWorkloadResourceClaims, true)
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.TopologyAwareWorkloadScheduling, true)
	for _, tc := range []struct {
		name    string
		spec    func(*schedulingv1beta1.PodGroupSpec)
		wantErr string
	}{
		{name: "gang"},
		{name: "basic", spec: func(s *schedulingv1beta1.PodGroupSpec) {
			s.SchedulingPolicy = schedulingv1beta1.PodGroupSchedulingPolicy{Basic: &schedulingv1beta1.BasicSchedulingPolicy{}}
		}},
		{name: "no policy", spec: func(s *schedulingv1beta1.PodGroupSpec) { s.SchedulingPolicy.Gang = nil }, wantErr: "spec.schedulingPolicy: Invalid value"},
		{name: "both policies", spec: func(s *schedulingv1beta1.PodGroupSpec) {
			s.SchedulingPolicy.Basic = &schedulingv1beta1.BasicSchedulingPolicy{}
		}, wantErr: "multiple fields are set"},
		{name: "minCount 0", spec: func(s *schedulingv1beta1.PodGroupSpec) { s.SchedulingPolicy.Gang.MinCount = 0 }, wantErr: "spec.schedulingPolicy.gang.minCount: Required value"},
		{name: "minCount negative", spec: func(s *schedulingv1beta1.PodGroupSpec) { s.SchedulingPolicy.Gang.MinCount = -1 }, wantErr: "spec.schedulingPolicy.gang.minCount: Invalid value"},
		{name: "topology", spec: func(s *schedulingv1beta1.PodGroupSpec) {
			s.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: "topology.kubernetes.io/rack"}}}
		}},
		{name: "two topologies", spec: func(s *schedulingv1beta1.PodGroupSpec) {
			s.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: "a"}, {Key: "b"}}}
		}, wantErr: "spec.schedulingConstraints.topology: Too many"},
		{name: "bad topology key", spec: func(s *schedulingv1beta1.PodGroupSpec) {
			s.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{Topology: []schedulingv1beta1.TopologyConstraint{{Key: "no spaces"}}}
		}, wantErr: "spec.schedulingConstraints.topology[0].key: Invalid value"},
		{name: "claims", spec: func(s *schedulingv1beta1.PodGroupSpec) {
			s.ResourceClaims = []schedulingv1beta1.PodGroupResourceClaim{{Name: "a", ResourceClaimName: ptr.To("c")}, {Name: "b", ResourceClaimTemplateName: ptr.To("t")}}
		}},
		{name: "claim names both", spec: func(s *schedulingv1beta1.PodGroupSpec) {
			s.ResourceClaims = []schedulingv1beta1.PodGroupResourceClaim{{Name: "a", ResourceClaimName: ptr.To("c"), ResourceClaimTemplateName: ptr.To("t")}}
		}, wantErr: "spec.resourceClaims[0]: Invalid value"},
		{name: "claim names none", spec: func(s *schedulingv1beta1.PodGroupSpec) {
			s.ResourceClaims = []schedulingv1beta1.PodGroupResourceClaim{{Name: "a"}}
		}, wantErr: "must specify one of"},
		{name: "duplicate claim", spec: func(s *schedulingv1beta1.PodGroupSpec) {
			s.ResourceClaims = []schedulingv1beta1.PodGroupResourceClaim{{Name: "a", ResourceClaimName: ptr.To("c")}, {Name: "a", ResourceClaimName: ptr.To("d")}}
		}, wantErr: "spec.resourceClaims[1].name: Duplicate value"},
		{name: "five claims", spec: func(s *schedulingv1beta1.PodGroupSpec) {
			for _, n := range []string{"a", "b", "c", "d", "e"} {
				s.ResourceClaims = append(s.ResourceClaims, schedulingv1beta1.PodGroupResourceClaim{Name: n, ResourceClaimName: ptr.To(n)})
			}
		}, wantErr: "spec.resourceClaims: Too many"},
		{name: "priority too high", spec: func(s *schedulingv1beta1.PodGroupSpec) { s.Priority = ptr.To[int32](highestUserDefinablePriority + 1) }, wantErr: "spec.priority: Invalid value"},
		{name: "preemption policy", spec: func(s *schedulingv1beta1.PodGroupSpec) {
			s.PreemptionPolicy = ptr.To(schedulingv1beta1.PreemptNever)
		}, wantErr: "spec.preemptionPolicy: Forbidden"},
		{name: "workload ref", spec: func(s *schedulingv1beta1.PodGroupSpec) {
			s.WorkloadRef = &schedulingv1beta1.WorkloadReference{WorkloadName: "w"}
		}, wantErr: "spec.workloadRef.templateName: Required value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: "ns"}, Spec: gang(2)}
			if tc.spec != nil {
				tc.spec(&group.Spec)
			}
			errs := Strategy.Validate(context.Background(), group)
			switch {
			case tc.wantErr == "" && len(errs) > 0:
				t.Errorf("unexpected errors: %v", errs)
			case tc.wantErr != "" && !strings.Contains(errs.ToAggregate().Error(), tc.wantErr):
				t.Errorf("errors %v, want one containing %q", errs, tc.wantErr)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	old := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "g", Namespace: "ns", ResourceVersion: "1"}, Spec: gang(2)}
	for _, tc := range []struct {
		name    string
		spec    func(*schedulingv1beta1.PodGroupSpec)
		wantErr string
	}{
		{name: "minCount", spec: func(s *schedulingv1beta1.PodGroupSpec) { s.SchedulingPolicy.Gang.MinCount = 4 }},
		{name: "to basic", spec: func(s *schedulingv1beta1.PodGroupSpec) {
			s.SchedulingPolicy = schedulingv1beta1.PodGroupSchedulingPolicy{Basic: &schedulingv1beta1.BasicSchedulingPolicy{}}
		}, wantErr: "spec.schedulingPolicy.gang: Forbidden"},
		{name: "priority", spec: func(s *schedulingv1beta1.PodGroupSpec) { s.Priority = ptr.To[int32](5) }, wantErr: "spec.priority: Invalid value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			group := old.DeepCopy()
			tc.spec(&group.Spec)
			errs := Strategy.ValidateUpdate(context.Background(), group, old)
			switch {
			case tc.wantErr == "" && len(errs) > 0:
				t.Errorf("unexpected errors: %v", errs)
			case tc.wantErr != "" && !strings.Contains(errs.ToAggregate().Error(), tc.wantErr):
				t.Errorf("errors %v, want one containing %q", errs, tc.wantErr)
			}
		})
	}
}

// Fields of gates that are off are dropped on create.
func TestDropDisabledFields(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.DRAWorkloadResourceClaims, false)
	group := &schedulingv1beta1.PodGroup{Spec: gang(1)}
	group.Spec.ResourceClaims = []schedulingv1beta1.PodGroupResourceClaim{{Name: "a", ResourceClaimName: ptr.To("c")}}
	group.Status.Conditions = []metav1.Condition{{Type: "X"}}
	Strategy.PrepareForCreate(context.Background(), group)
	if group.Spec.ResourceClaims != nil || group.Status.Conditions != nil {
		t.Errorf("resourceClaims %v, conditions %v: want both dropped", group.Spec.ResourceClaims, group.Status.Conditions)
	}
}

func TestStorage(t *testing.T) {
	storage, err := NewStorage(coretesting.NewRESTOptionsGetter(t))
	if err != nil {
		t.Fatal(err)
	}
	coretesting.Ready(t, storage.PodGroup.Store.Store)
	ctx := coretesting.Context(t, "default")
	obj, err := storage.PodGroup.Create(ctx, &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "default"}, Spec: gang(8)}, rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	table, err := storage.PodGroup.ConvertToTable(ctx, obj, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cells := table.Rows[0].Cells; cells[0] != "train" || cells[1] != "Gang" || cells[2] != "8" || cells[3] != "<unknown>" {
		t.Errorf("table row %v", cells)
	}
}
