package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcev1beta1 "github.com/draplane/draplane/apis/resource/v1beta1"
	"github.com/draplane/draplane/generated/clientset/versioned"
)

// The tests in this file drive the controllers the way a careless or a
// hostile user would, with the simulator standing in for kubelets.

const (
	// simClass selects the simulator's GPUs.
	simClass = "gpu.sim.draplane.dev"
	// adminLabel is the namespace label that allows admin access.
	adminLabel = "resource.kubernetes.io/admin-access"
	// conditionClaimsAllocated is the pod condition the allocation
	// controller sets on pods bound to a node by someone else.
	conditionClaimsAllocated = "ResourceClaimsAllocated"
)

// hostileServer starts a server with simulated nodes and returns it with
// its two clients; the simulator's device class exists.
func hostileServer(t *testing.T, args ...string) (*testServer, kubernetes.Interface, versioned.Interface) {
	t.Helper()
	s := startServer(t, t.TempDir(), args...)
	kube, err := kubernetes.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	client := s.Client(t)
	class := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: simClass},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + simClass + `"`},
		}}},
	}
	if _, err := client.ResourceV1().DeviceClasses().Create(context.Background(), class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return s, kube, client
}

// claimPod is a pod whose container uses pod claims: each entry maps the
// pod claim name to a claim name (claim=<name>) or a template name
// (template=<name>).
func claimPod(namespace, name, node string, claims ...string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "main", Image: "busybox"}},
		},
	}
	for i, ref := range claims {
		podClaim := corev1.PodResourceClaim{Name: fmt.Sprintf("c%d", i)}
		kind, target, _ := strings.Cut(ref, "=")
		if kind == "template" {
			podClaim.ResourceClaimTemplateName = ptr.To(target)
		} else {
			podClaim.ResourceClaimName = ptr.To(target)
		}
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, podClaim)
		pod.Spec.Containers[0].Resources.Claims = append(pod.Spec.Containers[0].Resources.Claims, corev1.ResourceClaim{Name: podClaim.Name})
	}
	return pod
}

// claimPodYAML is the manifest, for kubectl, of the pod name in namespace
// default whose container uses one pod claim, podClaim, made from ref:
// claim=<name> or template=<name> as for claimPod. specLines are added to
// the pod's spec as they are, one a line, indented under it.
func claimPodYAML(name, podClaim, ref string, specLines ...string) string {
	source := "resourceClaimName"
	kind, target, _ := strings.Cut(ref, "=")
	if kind == "template" {
		source = "resourceClaimTemplateName"
	}
	var spec strings.Builder
	for _, line := range specLines {
		spec.WriteString("  " + line + "\n")
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
  namespace: default
spec:
%[2]s  containers:
  - name: main
    image: busybox
    resources:
      claims:
      - name: %[3]s
  resourceClaims:
  - name: %[3]s
    %[4]s: %[5]s
`, name, spec.String(), podClaim, source, target)
}

func oneGPUClaim(namespace, name string) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{exactRequest("gpu", simClass)}}},
	}
}

func adminClaimSpec() resourcev1.ResourceClaimSpec {
	return resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
		Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: simClass, AdminAccess: ptr.To(true)},
	}}}}
}

func findPodCondition(pod *corev1.Pod, conditionType corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == conditionType {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// podEvents lists the events about a pod.
func podEvents(ctx context.Context, kube kubernetes.Interface, pod *corev1.Pod) ([]corev1.Event, error) {
	list, err := kube.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var events []corev1.Event
	for _, event := range list.Items {
		if event.InvolvedObject.Kind == "Pod" && event.InvolvedObject.Name == pod.Name && (event.InvolvedObject.UID == "" || event.InvolvedObject.UID == pod.UID) {
			events = append(events, event)
		}
	}
	return events, nil
}

// warningWith returns the first Warning event of the pod with the reason
// whose message contains every part.
func warningWith(events []corev1.Event, reason string, parts ...string) *corev1.Event {
	for i := range events {
		event := &events[i]
		if event.Type != corev1.EventTypeWarning || (reason != "" && event.Reason != reason) {
			continue
		}
		if containsAll(event.Message, parts...) {
			return event
		}
	}
	return nil
}

func containsAll(s string, parts ...string) bool {
	for _, part := range parts {
		if !strings.Contains(s, part) {
			return false
		}
	}
	return true
}

func dumpState(t *testing.T, s *testServer, namespace string) string {
	t.Helper()
	out, _ := s.Kubectl(t, "", "get", "pods,resourceclaims,events", "-n", namespace, "-o", "wide")
	return out
}

// TestHostileWrongNodePod: a claim is allocated on node M for a first pod;
// a second pod created with spec.nodeName N (N != M) names the same claim.
// The second pod must never be reserved nor started: it stays Pending with
// a condition and a Warning event that name the claim and node M, and the
// claim and its first consumer are left alone.
func TestHostileWrongNodePod(t *testing.T) {
	s, kube, client := hostileServer(t, "--simulate-nodes=2", "--simulate-devices-per-node=1")
	ctx := context.Background()
	claims := client.ResourceV1().ResourceClaims("default")
	pods := kube.CoreV1().Pods("default")

	if _, err := claims.Create(ctx, oneGPUClaim("default", "shared"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first, err := pods.Create(ctx, claimPod("default", "first", "", "claim=shared"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var allocated *resourcev1.ResourceClaim
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
		pod, err := pods.Get(ctx, "first", metav1.GetOptions{})
		if err != nil || pod.Status.Phase != corev1.PodRunning {
			return false, nil
		}
		first = pod
		allocated, err = claims.Get(ctx, "shared", metav1.GetOptions{})
		return err == nil && allocated.Status.Allocation != nil && len(allocated.Status.ReservedFor) == 1, nil
	})
	if err != nil {
		t.Fatalf("first pod not running with its claim: %v\n%s", err, dumpState(t, s, "default"))
	}
	nodeM := first.Spec.NodeName
	nodeN := "sim-node-0"
	if nodeM == nodeN {
		nodeN = "sim-node-1"
	}

	// Watch the claim and the second pod from now on: a reservation or a
	// start that is undone later is still wrong.
	claimWatch, err := claims.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=shared", ResourceVersion: allocated.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer claimWatch.Stop()
	podWatch, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=second"})
	if err != nil {
		t.Fatal(err)
	}
	defer podWatch.Stop()

	second, err := pods.Create(ctx, claimPod("default", "second", nodeN, "claim=shared"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var violations []string
	violate := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		violations = append(violations, fmt.Sprintf(format, args...))
	}
	watchDone := make(chan struct{})
	var watchers sync.WaitGroup
	watchers.Go(func() {
		for {
			select {
			case <-watchDone:
				return
			case event, ok := <-claimWatch.ResultChan():
				if !ok {
					return
				}
				claim, ok := event.Object.(*resourcev1.ResourceClaim)
				if !ok {
					continue
				}
				for _, consumer := range claim.Status.ReservedFor {
					if consumer.UID == second.UID {
						violate("claim reserved for the pod on the wrong node (resourceVersion %s): %+v", claim.ResourceVersion, claim.Status.ReservedFor)
					}
				}
				if claim.Status.Allocation == nil || len(claim.Status.ReservedFor) == 0 || claim.Status.ReservedFor[0].UID != first.UID {
					violate("claim's allocation or first consumer changed: %+v", claim.Status)
				}
			}
		}
	})
	watchers.Go(func() {
		for {
			select {
			case <-watchDone:
				return
			case event, ok := <-podWatch.ResultChan():
				if !ok {
					return
				}
				pod, ok := event.Object.(*corev1.Pod)
				if ok && pod.UID == second.UID && pod.Status.Phase != corev1.PodPending && pod.Status.Phase != "" {
					violate("pod on the wrong node is %s", pod.Status.Phase)
				}
			}
		}
	})
	failed := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), violations...)
	}

	// Wait for the explanation: a condition and an event that name the
	// claim and the node it is allocated for.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
		if len(failed()) > 0 {
			return false, fmt.Errorf("wrong behaviour seen")
		}
		pod, err := pods.Get(ctx, "second", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		condition := findPodCondition(pod, conditionClaimsAllocated)
		if condition == nil || condition.Status != corev1.ConditionFalse || !containsAll(condition.Message, "shared", nodeM) {
			return false, nil
		}
		events, err := podEvents(ctx, kube, pod)
		return err == nil && warningWith(events, "", "shared", nodeM) != nil, nil
	})
	if err != nil {
		close(watchDone)
		claimWatch.Stop()
		podWatch.Stop()
		watchers.Wait()
		t.Fatalf("pod on the wrong node: %v; violations: %q\n%s", err, failed(), dumpState(t, s, "default"))
	}
	// Give the controllers and the simulator time to do something wrong.
	time.Sleep(3 * time.Second)
	close(watchDone)
	claimWatch.Stop()
	podWatch.Stop()
	watchers.Wait()
	for _, v := range failed() {
		t.Error(v)
	}

	pod, err := pods.Get(ctx, "second", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Phase != corev1.PodPending {
		t.Errorf("pod on the wrong node is %s, want Pending", pod.Status.Phase)
	}
	claim, err := claims.Get(ctx, "shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(claim.Status.ReservedFor) != 1 || claim.Status.ReservedFor[0].UID != first.UID {
		t.Errorf("claim consumers changed: %+v", claim.Status.ReservedFor)
	}
	if fmt.Sprint(claim.Status.Allocation.Devices.Results) != fmt.Sprint(allocated.Status.Allocation.Devices.Results) {
		t.Errorf("claim allocation changed: %+v, was %+v", claim.Status.Allocation.Devices.Results, allocated.Status.Allocation.Devices.Results)
	}
	if first, err := pods.Get(ctx, "first", metav1.GetOptions{}); err != nil || first.Status.Phase != corev1.PodRunning {
		t.Errorf("first pod disturbed: %v %v", err, first.Status.Phase)
	}
}

// expectAdminRefused checks that err refuses admin access: 403 or 422,
// naming the adminAccess field.
func expectAdminRefused(t *testing.T, what string, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: admin access accepted in a namespace without the %s label", what, adminLabel)
	case !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err):
		t.Errorf("%s: got %v, want 403 or 422", what, err)
	case !strings.Contains(err.Error(), "adminAccess") || !strings.Contains(err.Error(), adminLabel):
		t.Errorf("%s: the refusal does not name the adminAccess field and the label: %v", what, err)
	}
}

// TestHostileAdminAccessWithoutNamespaceOptIn: admin access is only for
// namespaces labelled resource.kubernetes.io/admin-access=true, in both
// served versions, for claims, templates and claims generated from
// templates; the allocation controller does not grant it once the label
// is gone, and does once it is back.
func TestHostileAdminAccessWithoutNamespaceOptIn(t *testing.T) {
	s, kube, client := hostileServer(t, "--simulate-nodes=1", "--simulate-devices-per-node=2")
	ctx := context.Background()
	namespaces := kube.CoreV1().Namespaces()
	for name, labels := range map[string]map[string]string{
		"plain": nil,
		"admin": {adminLabel: "true"},
		"false": {adminLabel: "false"},
		"lost":  {adminLabel: "true"},
	} {
		if _, err := namespaces.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	betaSpec := resourcev1beta1.ResourceClaimSpec{Devices: resourcev1beta1.DeviceClaim{Requests: []resourcev1beta1.DeviceRequest{{
		Name: "gpu", DeviceClassName: simClass, AllocationMode: resourcev1beta1.DeviceAllocationModeExactCount, Count: 1, AdminAccess: ptr.To(true),
	}}}}

	// Create, in both versions, claims and templates.
	for _, ns := range []string{"plain", "false", "admin"} {
		allowed := ns == "admin"
		check := func(what string, err error) {
			t.Helper()
			if allowed {
				if err != nil {
					t.Errorf("%s in labelled namespace: %v", what, err)
				}
				return
			}
			expectAdminRefused(t, what+" in namespace "+ns, err)
		}
		_, err := client.ResourceV1().ResourceClaims(ns).Create(ctx, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "v1-admin"}, Spec: adminClaimSpec()}, metav1.CreateOptions{})
		check("v1 claim", err)
		_, err = client.ResourceV1beta1().ResourceClaims(ns).Create(ctx, &resourcev1beta1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "beta-admin"}, Spec: betaSpec}, metav1.CreateOptions{})
		check("v1beta1 claim", err)
		_, err = client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "v1-admin"},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: adminClaimSpec()}}, metav1.CreateOptions{})
		check("v1 template", err)
		_, err = client.ResourceV1beta1().ResourceClaimTemplates(ns).Create(ctx, &resourcev1beta1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "beta-admin"},
			Spec: resourcev1beta1.ResourceClaimTemplateSpec{Spec: betaSpec}}, metav1.CreateOptions{})
		check("v1beta1 template", err)
	}

	// kubectl, with admin access in a firstAvailable subrequest: the API
	// has no such field there, so it must not slip through.
	out, err := s.Kubectl(t, `apiVersion: resource.draplane.dev/v1
kind: ResourceClaim
metadata:
  name: sub-admin
  namespace: plain
spec:
  devices:
    requests:
    - name: gpu
      firstAvailable:
      - name: any
        deviceClassName: gpu.sim.draplane.dev
        adminAccess: true
`, "create", "-f", "-")
	if err == nil {
		t.Errorf("kubectl created a claim with adminAccess in a subrequest in an unlabelled namespace: %s", out)
	} else if !strings.Contains(out, "adminAccess") {
		t.Errorf("refusal of adminAccess in a subrequest does not name the field: %s", out)
	}

	// Update: a claim or template that newly asks for admin access is
	// refused (naming adminAccess, not only the immutable spec), in both
	// versions.
	plainClaim, err := client.ResourceV1().ResourceClaims("plain").Create(ctx, oneGPUClaim("plain", "plain-claim"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	update := plainClaim.DeepCopy()
	update.Spec = adminClaimSpec()
	_, err = client.ResourceV1().ResourceClaims("plain").Update(ctx, update, metav1.UpdateOptions{})
	expectAdminRefused(t, "v1 claim update", err)
	betaClaim, err := client.ResourceV1beta1().ResourceClaims("plain").Get(ctx, "plain-claim", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	betaClaim.Spec = betaSpec
	_, err = client.ResourceV1beta1().ResourceClaims("plain").Update(ctx, betaClaim, metav1.UpdateOptions{})
	expectAdminRefused(t, "v1beta1 claim update", err)
	plainTemplate, err := client.ResourceV1().ResourceClaimTemplates("plain").Create(ctx, &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "plain-template"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: oneGPUClaim("", "").Spec}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	templateUpdate := plainTemplate.DeepCopy()
	templateUpdate.Spec.Spec = adminClaimSpec()
	_, err = client.ResourceV1().ResourceClaimTemplates("plain").Update(ctx, templateUpdate, metav1.UpdateOptions{})
	expectAdminRefused(t, "v1 template update", err)

	// The namespace "lost" loses its label after a template and a claim
	// with admin access were created there.
	lostTemplate := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "admin-template"}, Spec: resourcev1.ResourceClaimTemplateSpec{Spec: adminClaimSpec()}}
	if _, err := client.ResourceV1().ResourceClaimTemplates("lost").Create(ctx, lostTemplate, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.ResourceV1().ResourceClaims("lost").Create(ctx, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "admin-claim"}, Spec: adminClaimSpec()}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.MustKubectl(t, "", "label", "namespace", "lost", adminLabel+"-")

	// An update that does not ask for admin access anew still works
	// (finalizers and labels must stay writable).
	lostClaim, err := client.ResourceV1().ResourceClaims("lost").Get(ctx, "admin-claim", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lostClaim.Labels = map[string]string{"touched": "yes"}
	if _, err := client.ResourceV1().ResourceClaims("lost").Update(ctx, lostClaim, metav1.UpdateOptions{}); err != nil {
		t.Errorf("metadata update of an existing admin claim refused: %v", err)
	}

	// A claim generated from the template is refused; the pod says why,
	// once, instead of the controller retrying in a loop.
	pods := kube.CoreV1().Pods("lost")
	generated, err := pods.Create(ctx, claimPod("lost", "from-template", "", "template=admin-template"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var refusal *corev1.Event
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
		events, err := podEvents(ctx, kube, generated)
		if err != nil {
			return false, nil
		}
		refusal = warningWith(events, "FailedResourceClaimCreation", "adminAccess", adminLabel)
		return refusal != nil, nil
	})
	if err != nil {
		t.Errorf("no event on the pod about the refused claim: %v\n%s", err, dumpState(t, s, "lost"))
	}

	// The pre-existing claim is not granted admin access either.
	claimPodObj, err := pods.Create(ctx, claimPod("lost", "uses-claim", "", "claim=admin-claim"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
		pod, err := pods.Get(ctx, claimPodObj.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		condition := findPodCondition(pod, corev1.PodScheduled)
		return condition != nil && condition.Status == corev1.ConditionFalse && containsAll(condition.Message, "admin-claim", adminLabel), nil
	})
	if err != nil {
		t.Errorf("pod using an admin claim in a namespace without the label is not reported unschedulable: %v\n%s", err, dumpState(t, s, "lost"))
	}

	// Watch long enough to see a retry loop, then check nothing changed.
	time.Sleep(5 * time.Second)
	list, err := client.ResourceV1().ResourceClaims("lost").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, claim := range list.Items {
		if claim.Name != "admin-claim" {
			t.Errorf("claim %s generated from an admin template in a namespace without the label", claim.Name)
		}
		if claim.Status.Allocation != nil {
			t.Errorf("claim %s allocated (admin access granted) in a namespace without the label: %+v", claim.Name, claim.Status.Allocation)
		}
	}
	if refusal != nil {
		events, err := podEvents(ctx, kube, generated)
		if err != nil {
			t.Fatal(err)
		}
		if again := warningWith(events, "FailedResourceClaimCreation", "adminAccess"); again != nil && again.Count > 3 {
			t.Errorf("claim creation retried %d times in a few seconds while nothing changed", again.Count)
		}
	}

	// The label comes back: the waiting pods get their claims.
	s.MustKubectl(t, "", "label", "namespace", "lost", adminLabel+"=true")
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
		for _, name := range []string{"from-template", "uses-claim"} {
			pod, err := pods.Get(ctx, name, metav1.GetOptions{})
			if err != nil || pod.Spec.NodeName == "" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("pods not placed once the namespace allows admin access again: %v\n%s", err, dumpState(t, s, "lost"))
	}
}

// TestHostileTemplateAfterPod: a pod names a template that does not exist
// yet. Once its claim controller has backed off for a while, the template
// is created: the pod's claim must follow at once, not when the backoff
// next fires.
func TestHostileTemplateAfterPod(t *testing.T) {
	s, kube, client := hostileServer(t, "--simulate-nodes=1", "--simulate-devices-per-node=1")
	ctx := context.Background()
	pods := kube.CoreV1().Pods("default")
	if _, err := pods.Create(ctx, claimPod("default", "early", "", "template=late"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Long enough that an exponential per-pod backoff is well past the
	// bound below.
	time.Sleep(25 * time.Second)
	if pod, err := pods.Get(ctx, "early", metav1.GetOptions{}); err != nil || len(pod.Status.ResourceClaimStatuses) != 0 {
		t.Fatalf("pod got a claim without its template: %v %+v", err, pod.Status.ResourceClaimStatuses)
	}

	template := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "late"}, Spec: resourcev1.ResourceClaimTemplateSpec{Spec: oneGPUClaim("", "").Spec}}
	if _, err := client.ResourceV1().ResourceClaimTemplates("default").Create(ctx, template, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A bound far from any backoff, generous for a slow machine.
	const bound = 5 * time.Second
	created := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, bound, true, func(ctx context.Context) (bool, error) {
		list, err := client.ResourceV1().ResourceClaims("default").List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 1, nil
	})
	if err != nil {
		t.Fatalf("no claim %v after the template was created: %v\n%s", bound, err, dumpState(t, s, "default"))
	}
	t.Logf("claim generated %v after the template was created", time.Since(created).Round(time.Millisecond))
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
		pod, err := pods.Get(ctx, "early", metav1.GetOptions{})
		return err == nil && pod.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		t.Errorf("pod not running with its late claim: %v\n%s", err, dumpState(t, s, "default"))
	}
}

// configs returns n opaque configurations.
func configs(n int) []resourcev1.DeviceConfiguration {
	out := make([]resourcev1.DeviceConfiguration, n)
	for i := range out {
		out[i] = resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{
			Driver: simClass, Parameters: runtime.RawExtension{Raw: []byte(fmt.Sprintf(`{"index":%d}`, i))},
		}}
	}
	return out
}

// TestHostileWriteHotLoop: a pod with two claims whose second claim's
// allocation cannot be stored (its two classes and the claim carry 96
// configs, an allocation holds at most 64). The pod is reported
// unschedulable with the validation error and a Warning event, and the
// first claim is written at most a few times while the cause stays.
func TestHostileWriteHotLoop(t *testing.T) {
	s, kube, client := hostileServer(t, "--simulate-nodes=1", "--simulate-devices-per-node=4")
	ctx := context.Background()
	for _, name := range []string{"config-a", "config-b"} {
		class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + simClass + `"`}}},
		}}
		for _, config := range configs(32) {
			class.Spec.Config = append(class.Spec.Config, resourcev1.DeviceClassConfiguration{DeviceConfiguration: config})
		}
		if _, err := client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	claims := client.ResourceV1().ResourceClaims("default")
	first, err := claims.Create(ctx, oneGPUClaim("default", "first"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	heavy := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "heavy"}, Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
		Requests: []resourcev1.DeviceRequest{exactRequest("a", "config-a"), exactRequest("b", "config-b")},
	}}}
	for _, config := range configs(32) {
		heavy.Spec.Devices.Config = append(heavy.Spec.Devices.Config, resourcev1.DeviceClaimConfiguration{DeviceConfiguration: config})
	}
	if _, err := claims.Create(ctx, heavy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := kube.CoreV1().Pods("default")
	pod, err := pods.Create(ctx, claimPod("default", "two-claims", "", "claim=first", "claim=heavy"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
		current, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		condition := findPodCondition(current, corev1.PodScheduled)
		if condition == nil || condition.Status != corev1.ConditionFalse || !containsAll(condition.Message, "heavy", "devices.config", "64") {
			return false, nil
		}
		events, err := podEvents(ctx, kube, current)
		return err == nil && warningWith(events, "", "heavy", "devices.config") != nil, nil
	})
	if err != nil {
		t.Errorf("pod not reported unschedulable with the validation error: %v\n%s", err, dumpState(t, s, "default"))
	}

	// Count the writes to the first claim, and all writes to etcd, over a
	// window while the cause stays.
	const window = 20 * time.Second
	current, err := claims.Get(ctx, "first", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	startList, err := claims.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := claims.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=first", ResourceVersion: current.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	writes := 0
	deadline := time.After(window)
collect:
	for {
		select {
		case event, ok := <-w.ResultChan():
			if !ok {
				break collect
			}
			if event.Type == watch.Modified || event.Type == watch.Deleted {
				writes++
			}
		case <-deadline:
			break collect
		}
	}
	endList, err := claims.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var startRV, endRV int64
	fmt.Sscan(startList.ResourceVersion, &startRV)
	fmt.Sscan(endList.ResourceVersion, &endRV)
	t.Logf("over %v: %d writes to claim %s, etcd revision +%d", window, writes, first.Name, endRV-startRV)
	// A handful a minute at most: with backoff capped at 30 s, a retry
	// writes the claim at most three times (finalizer, allocation,
	// rollback).
	if writes > 6 {
		t.Errorf("claim %s written %d times in %v while the cause stays, want at most 6", first.Name, writes, window)
	}
}
