package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcev1beta1 "github.com/draplane/draplane/apis/resource/v1beta1"
)

func exactRequest(name, class string) resourcev1.DeviceRequest {
	return resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class}}
}

// TestClaimStatusIsOwnedByTheControlPlane: status is cleared on create,
// ignored on spec updates, and the spec is ignored on status updates and
// immutable otherwise.
func TestClaimStatusIsOwnedByTheControlPlane(t *testing.T) {
	s := sharedServer(t)
	claims := s.Client(t).ResourceV1().ResourceClaims("default")
	ctx := context.Background()
	allocation := &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
		Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-0"}},
	}}

	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "status-claim"},
		Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{exactRequest("gpu", "gpu.example.com")}}},
		Status:     resourcev1.ResourceClaimStatus{Allocation: allocation},
	}
	created, err := claims.Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = claims.Delete(ctx, claim.Name, metav1.DeleteOptions{}) })
	if created.Status.Allocation != nil {
		t.Errorf("create kept the status: %+v", created.Status)
	}

	// Status update: the allocation is written, a spec change is dropped.
	update := created.DeepCopy()
	update.Status.Allocation = allocation
	update.Spec.Devices.Requests[0].Exactly.DeviceClassName = "other.example.com"
	allocated, err := claims.UpdateStatus(ctx, update, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if allocated.Status.Allocation == nil {
		t.Error("status update lost the allocation")
	}
	if got := allocated.Spec.Devices.Requests[0].Exactly.DeviceClassName; got != "gpu.example.com" {
		t.Errorf("status update changed the spec: class %q", got)
	}

	// Main resource update: a status change is dropped.
	labelled := allocated.DeepCopy()
	labelled.Labels = map[string]string{"e2e": "yes"}
	labelled.Status.Allocation = nil
	afterLabel, err := claims.Update(ctx, labelled, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update labels: %v", err)
	}
	if afterLabel.Status.Allocation == nil {
		t.Error("an update of the main resource cleared the status")
	}

	// The spec is immutable.
	changed := afterLabel.DeepCopy()
	changed.Spec.Devices.Requests[0].Exactly.DeviceClassName = "other.example.com"
	_, err = claims.Update(ctx, changed, metav1.UpdateOptions{})
	expectInvalid(t, err, "spec")

	// kubectl shows the state.
	if out := s.MustKubectl(t, "", "get", "resourceclaim", "status-claim", "-n", "default"); !strings.Contains(out, "allocated") || !strings.Contains(out, "gpu.example.com") {
		t.Errorf("kubectl get does not show state and class:\n%s", out)
	}
}

// TestTemplateSpecIsImmutable: generated claims would silently disagree
// with a changed template.
func TestTemplateSpecIsImmutable(t *testing.T) {
	s := sharedServer(t)
	templates := s.Client(t).ResourceV1().ResourceClaimTemplates("default")
	ctx := context.Background()
	template := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "immutable-template"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{
			Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{exactRequest("gpu", "gpu.example.com")}},
		}},
	}
	created, err := templates.Create(ctx, template, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = templates.Delete(ctx, template.Name, metav1.DeleteOptions{}) })
	created.Spec.Spec.Devices.Requests[0].Name = "renamed"
	_, err = templates.Update(ctx, created, metav1.UpdateOptions{})
	expectInvalid(t, err, "spec")
}

// TestSliceGeneration: a spec change bumps metadata.generation, a label
// change does not.
func TestSliceGeneration(t *testing.T) {
	s := sharedServer(t)
	slices := s.Client(t).ResourceV1().ResourceSlices()
	ctx := context.Background()
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "generation-slice"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver: "gen.example.com", NodeName: ptr.To("gen-node"),
			Pool:    resourcev1.ResourcePool{Name: "gen-pool", Generation: 1, ResourceSliceCount: 1},
			Devices: []resourcev1.Device{{Name: "dev-0"}},
		},
	}
	created, err := slices.Create(ctx, slice, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = slices.Delete(ctx, slice.Name, metav1.DeleteOptions{}) })
	if created.Generation != 1 {
		t.Errorf("generation after create: %d, want 1", created.Generation)
	}
	created.Spec.Devices = append(created.Spec.Devices, resourcev1.Device{Name: "dev-1"})
	grown, err := slices.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if grown.Generation != 2 {
		t.Errorf("generation after spec change: %d, want 2", grown.Generation)
	}
	grown.Labels = map[string]string{"e2e": "yes"}
	labelled, err := slices.Update(ctx, grown, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if labelled.Generation != 2 {
		t.Errorf("generation after label change: %d, want 2", labelled.Generation)
	}
}

// TestDeviceTaintRule: timeAdded is stamped on create and re-stamped when
// the effect changes; the status is only written through /status.
func TestDeviceTaintRule(t *testing.T) {
	s := sharedServer(t)
	rules := s.Client(t).ResourceV1().DeviceTaintRules()
	ctx := context.Background()
	rule := &resourcev1.DeviceTaintRule{
		ObjectMeta: metav1.ObjectMeta{Name: "taint-rule"},
		Spec: resourcev1.DeviceTaintRuleSpec{
			DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To("taint.example.com")},
			Taint:          resourcev1.DeviceTaint{Key: "example.com/broken", Effect: resourcev1.DeviceTaintEffectNoSchedule},
		},
		Status: resourcev1.DeviceTaintRuleStatus{Conditions: []metav1.Condition{{
			Type: "EvictionInProgress", Status: metav1.ConditionTrue, Reason: "Forged", LastTransitionTime: metav1.Now(),
		}}},
	}
	created, err := rules.Create(ctx, rule, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rules.Delete(ctx, rule.Name, metav1.DeleteOptions{}) })
	if created.Spec.Taint.TimeAdded == nil {
		t.Error("timeAdded not stamped on create")
	}
	if len(created.Status.Conditions) != 0 {
		t.Errorf("create kept the status: %+v", created.Status)
	}
	if created.Generation != 1 {
		t.Errorf("generation after create: %d, want 1", created.Generation)
	}

	// An old time shows whether the server re-stamps.
	longAgo := metav1.NewTime(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	created.Spec.Taint.TimeAdded = &longAgo
	backdated, err := rules.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !backdated.Spec.Taint.TimeAdded.Equal(&longAgo) {
		t.Errorf("an explicit timeAdded was replaced: %v", backdated.Spec.Taint.TimeAdded)
	}
	backdated.Spec.Taint.Effect = resourcev1.DeviceTaintEffectNoExecute
	escalated, err := rules.Update(ctx, backdated, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if escalated.Spec.Taint.TimeAdded == nil || escalated.Spec.Taint.TimeAdded.Equal(&longAgo) {
		t.Errorf("timeAdded not re-stamped when the effect changed: %v", escalated.Spec.Taint.TimeAdded)
	}
	if escalated.Generation <= backdated.Generation {
		t.Errorf("generation not bumped by a spec change: %d -> %d", backdated.Generation, escalated.Generation)
	}

	status := escalated.DeepCopy()
	status.Status.Conditions = []metav1.Condition{{
		Type: "EvictionInProgress", Status: metav1.ConditionFalse, Reason: "Completed", Message: "0 pods evicted",
		LastTransitionTime: metav1.Now(), ObservedGeneration: escalated.Generation,
	}}
	status.Spec.Taint.Key = "example.com/changed-through-status"
	withStatus, err := rules.UpdateStatus(ctx, status, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if len(withStatus.Status.Conditions) != 1 {
		t.Errorf("status update lost the conditions: %+v", withStatus.Status)
	}
	if withStatus.Spec.Taint.Key != "example.com/broken" {
		t.Errorf("status update changed the spec: key %q", withStatus.Spec.Taint.Key)
	}
	if out := s.MustKubectl(t, "", "get", "devicetaintrule", "taint-rule"); !strings.Contains(out, "NoExecute") || !strings.Contains(out, "taint.example.com/*/*") {
		t.Errorf("kubectl get does not show effect and selector:\n%s", out)
	}
}

// TestInvalidObjectsAreRejected: 422 with the offending field named.
func TestInvalidObjectsAreRejected(t *testing.T) {
	s := sharedServer(t)
	client := s.Client(t).ResourceV1()
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		create func() error
		field  string
	}{
		{"class name", func() error {
			_, err := client.DeviceClasses().Create(ctx, &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "Not_A_Name"}}, metav1.CreateOptions{})
			return err
		}, "metadata.name"},
		{"slice without driver", func() error {
			_, err := client.ResourceSlices().Create(ctx, &resourcev1.ResourceSlice{
				ObjectMeta: metav1.ObjectMeta{Name: "no-driver"},
				Spec:       resourcev1.ResourceSliceSpec{NodeName: ptr.To("n"), Pool: resourcev1.ResourcePool{Name: "p", ResourceSliceCount: 1}},
			}, metav1.CreateOptions{})
			return err
		}, "spec.driver"},
		{"claim request without exactly or firstAvailable", func() error {
			_, err := client.ResourceClaims("default").Create(ctx, &resourcev1.ResourceClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "empty-request"},
				Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu"}}}},
			}, metav1.CreateOptions{})
			return err
		}, "spec.devices.requests[0]"},
		{"template request name", func() error {
			_, err := client.ResourceClaimTemplates("default").Create(ctx, &resourcev1.ResourceClaimTemplate{
				ObjectMeta: metav1.ObjectMeta{Name: "bad-request-name"},
				Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{
					Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{exactRequest("Not A Name", "gpu.example.com")}},
				}},
			}, metav1.CreateOptions{})
			return err
		}, "spec.spec.devices.requests[0].name"},
		{"taint effect", func() error {
			_, err := client.DeviceTaintRules().Create(ctx, &resourcev1.DeviceTaintRule{
				ObjectMeta: metav1.ObjectMeta{Name: "bad-effect"},
				Spec:       resourcev1.DeviceTaintRuleSpec{Taint: resourcev1.DeviceTaint{Key: "example.com/k", Effect: "Sometimes"}},
			}, metav1.CreateOptions{})
			return err
		}, "spec.taint.effect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectInvalid(t, tc.create(), tc.field)
		})
	}

	// kubectl shows the same to a user.
	out, err := s.Kubectl(t, `apiVersion: resource.draplane.dev/v1
kind: DeviceTaintRule
metadata:
  name: kubectl-bad-effect
spec:
  taint: {key: example.com/k, effect: Sometimes}
`, "create", "-f", "-")
	if err == nil || !strings.Contains(out, "is invalid") || !strings.Contains(out, "spec.taint.effect") {
		t.Errorf("kubectl create of an invalid rule: %v: %s", err, out)
	}
}

// expectInvalid checks for a 422 whose causes name a field starting with
// fieldPrefix.
func expectInvalid(t *testing.T, err error, fieldPrefix string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want 422 about %s, got success", fieldPrefix)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want 422 about %s, got %v", fieldPrefix, err)
	}
	status, ok := err.(apierrors.APIStatus)
	if !ok || status.Status().Details == nil {
		t.Fatalf("422 without details: %v", err)
	}
	var fields []string
	for _, cause := range status.Status().Details.Causes {
		if strings.HasPrefix(cause.Field, fieldPrefix) {
			return
		}
		fields = append(fields, cause.Field)
	}
	t.Errorf("422 names %v, want a field starting with %s: %v", fields, fieldPrefix, err)
}

// TestV1beta1 objects are stored once and read in either version.
func TestV1beta1(t *testing.T) {
	s := sharedServer(t)
	ctx := context.Background()
	s.MustKubectl(t, `apiVersion: resource.draplane.dev/v1beta1
kind: ResourceClaim
metadata:
  name: beta-claim
  namespace: default
spec:
  devices:
    requests:
    - name: gpu
      deviceClassName: gpu.example.com
      allocationMode: ExactCount
      count: 2
`, "create", "-f", "-")
	t.Cleanup(func() {
		_, _ = s.Kubectl(t, "", "delete", "resourceclaims.v1beta1.resource.draplane.dev", "beta-claim", "-n", "default")
	})

	client := s.Client(t)
	asV1, err := client.ResourceV1().ResourceClaims("default").Get(ctx, "beta-claim", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(asV1.Spec.Devices.Requests) != 1 || asV1.Spec.Devices.Requests[0].Exactly == nil ||
		asV1.Spec.Devices.Requests[0].Exactly.DeviceClassName != "gpu.example.com" || asV1.Spec.Devices.Requests[0].Exactly.Count != 2 {
		t.Errorf("v1beta1 claim read as v1: %+v", asV1.Spec.Devices.Requests)
	}

	// And the other way round, through the v1beta1 client.
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "v1-class"}}
	if _, err := client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.ResourceV1().DeviceClasses().Delete(ctx, class.Name, metav1.DeleteOptions{}) })
	asBeta, err := client.ResourceV1beta1().DeviceClasses().Get(ctx, "v1-class", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var _ runtime.Object = asBeta
	if asBeta.Name != "v1-class" {
		t.Errorf("v1 class read as v1beta1: %+v", asBeta)
	}
	betaClaim, err := client.ResourceV1beta1().ResourceClaims("default").Get(ctx, "beta-claim", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := resourcev1beta1.DeviceRequest{Name: "gpu", DeviceClassName: "gpu.example.com", AllocationMode: resourcev1beta1.DeviceAllocationModeExactCount, Count: 2}
	if got := betaClaim.Spec.Devices.Requests; len(got) != 1 || got[0].Name != want.Name || got[0].DeviceClassName != want.DeviceClassName || got[0].Count != want.Count {
		t.Errorf("v1beta1 round trip: got %+v, want %+v", got, want)
	}

	// DeviceTaintRule exists only in v1.
	if out, err := s.Kubectl(t, "", "get", "devicetaintrules.v1beta1.resource.draplane.dev"); err == nil {
		t.Errorf("v1beta1 serves devicetaintrules: %s", out)
	}
}
