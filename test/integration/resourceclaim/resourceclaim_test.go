// Package resourceclaim runs the resource claim controller against the
// real dra-apiserver (in-process, embedded etcd). The test starts the
// controller itself, with informers on a client of the running server, and
// plays the allocation controller's part by writing allocations directly.
package resourceclaim

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/generated/clientset/versioned"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions"
	"github.com/draplane/draplane/internal/controllers/resourceclaim"
	"github.com/draplane/draplane/internal/testing/testenv"
	"github.com/draplane/draplane/test/integration/framework"
)

const (
	namespace = "default"
	// pollTimeout only keeps a broken controller from hanging the run;
	// nothing depends on how fast things happen.
	pollTimeout = 2 * time.Minute
	// flakyPodPrefix: the first pod status write for pods with this name
	// prefix fails.
	flakyPodPrefix = "flaky-"
)

// env is one running server with the controller attached.
type env struct {
	kube     kubernetes.Interface
	resource versioned.Interface
	// statusFailures counts injected pod status write failures.
	statusFailures *atomic.Int32
}

func TestResourceClaimController(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})

	config := framework.StartServer(ctx, t, &wg, false)
	e := startController(ctx, t, &wg, config)

	t.Run("pod with two template claims", func(t *testing.T) { testTwoTemplateClaims(ctx, t, e) })
	t.Run("shared claim used by three pods", func(t *testing.T) { testSharedClaim(ctx, t, e) })
	t.Run("claim of deleted pod", func(t *testing.T) { testDeletedPod(ctx, t, e) })
	t.Run("generated claim deleted before allocation", func(t *testing.T) { testDeletedUnallocatedClaim(ctx, t, e) })
}

// startController runs the controller as the server would, except that
// the pod client fails the first status write of each flaky pod.
func startController(ctx context.Context, t *testing.T, wg *sync.WaitGroup, restConfig *rest.Config) *env {
	t.Helper()
	failures := &atomic.Int32{}
	controllerConfig := rest.CopyConfig(restConfig)
	controllerConfig.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &failFirstPodStatusWrite{next: rt, failed: map[string]bool{}, failures: failures}
	})
	kube := kubernetes.NewForConfigOrDie(controllerConfig)
	resource := versioned.NewForConfigOrDie(controllerConfig)

	kubeInformers := informers.NewSharedInformerFactory(kube, 0)
	resourceInformers := resourceinformers.NewSharedInformerFactory(resource, 0)
	c, err := resourceclaim.NewController(klog.FromContext(ctx), kube, resource,
		kubeInformers.Core().V1().Pods(),
		resourceInformers.Resource().V1().ResourceClaims(),
		resourceInformers.Resource().V1().ResourceClaimTemplates())
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	kubeInformers.Start(ctx.Done())
	resourceInformers.Start(ctx.Done())
	wg.Go(func() {
		c.Run(ctx, 2)
		kubeInformers.Shutdown()
		resourceInformers.Shutdown()
	})

	return &env{
		kube:           kubernetes.NewForConfigOrDie(restConfig),
		resource:       versioned.NewForConfigOrDie(restConfig),
		statusFailures: failures,
	}
}

// failFirstPodStatusWrite fails the first write (PUT or PATCH) of
// pods/<flaky-...>/status per pod, after the controller has created the
// pod's claims.
type failFirstPodStatusWrite struct {
	next     http.RoundTripper
	mutex    sync.Mutex
	failed   map[string]bool
	failures *atomic.Int32
}

var podStatusPath = regexp.MustCompile(`/api/v1/namespaces/[^/]+/pods/([^/]+)/status$`)

func (f *failFirstPodStatusWrite) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut || req.Method == http.MethodPatch {
		if match := podStatusPath.FindStringSubmatch(req.URL.Path); match != nil && strings.HasPrefix(match[1], flakyPodPrefix) {
			f.mutex.Lock()
			fail := !f.failed[match[1]]
			f.failed[match[1]] = true
			f.mutex.Unlock()
			if fail {
				f.failures.Add(1)
				return nil, errors.New("injected: connection reset before the pod status write")
			}
		}
	}
	return f.next.RoundTrip(req)
}

func testTwoTemplateClaims(ctx context.Context, t *testing.T, e *env) {
	createTemplate(ctx, t, e, "gpu-template")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: flakyPodPrefix + "trainer", Namespace: namespace},
		Spec: corev1.PodSpec{
			// Bound from the start: the controller reserves the claims
			// for it once they are allocated.
			NodeName:   "node-1",
			Containers: []corev1.Container{{Name: "ctr", Image: "busybox"}},
			ResourceClaims: []corev1.PodResourceClaim{
				{Name: "gpu", ResourceClaimTemplateName: ptr("gpu-template")},
				{Name: "nic", ResourceClaimTemplateName: ptr("gpu-template")},
			},
		},
	}
	pod, err := e.kube.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}

	// Both claims are generated and recorded, despite the failed first
	// status write.
	testenv.WaitFor(ctx, t, pollTimeout, "both claims in the pod status", func() (bool, error) {
		current, err := e.kube.CoreV1().Pods(namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = current
		return len(pod.Status.ResourceClaimStatuses) == 2, nil
	})
	if failures := e.statusFailures.Load(); failures != 1 {
		t.Errorf("expected one injected pod status failure, got %d", failures)
	}
	claims := claimsOwnedBy(ctx, t, e, pod)
	if len(claims) != 2 {
		t.Fatalf("expected exactly 2 claims owned by the pod (no duplicates after the failed status write), got %d: %v", len(claims), claimNames(claims))
	}
	for _, status := range pod.Status.ResourceClaimStatuses {
		if status.ResourceClaimName == nil {
			t.Fatalf("pod claim %s: no claim name in status", status.Name)
		}
		name := *status.ResourceClaimName
		if !regexp.MustCompile(`^` + pod.Name + `-` + status.Name + `-[a-z0-9]{5}$`).MatchString(name) {
			t.Errorf("pod claim %s: claim name %q is not <pod>-<claim>-xxxxx", status.Name, name)
		}
		claim, ok := claims[name]
		if !ok {
			t.Errorf("pod claim %s: claim %s in the status is not owned by the pod", status.Name, name)
			continue
		}
		if claim.Annotations[resourceapi.PodClaimNameAnnotation] != status.Name {
			t.Errorf("claim %s: annotation %s=%q, expected %q", name, resourceapi.PodClaimNameAnnotation, claim.Annotations[resourceapi.PodClaimNameAnnotation], status.Name)
		}
		if claim.Labels["app"] != "inference" || claim.Annotations["team"] != "ml" {
			t.Errorf("claim %s: labels %v and annotations %v not copied from the template", name, claim.Labels, claim.Annotations)
		}
	}

	// Playing the allocation controller: allocate both claims. The pod is
	// bound, so the resource claim controller reserves them for it.
	for name := range claims {
		allocate(ctx, t, e, name)
	}
	for name := range claims {
		testenv.WaitFor(ctx, t, pollTimeout, "claim "+name+" reserved for the pod", func() (bool, error) {
			claim, err := e.resource.ResourceV1().ResourceClaims(namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return reservedUIDs(claim).Has(pod.UID), nil
		})
	}

	// The pod finishes: each claim loses its reservation, is deallocated,
	// loses its finalizer and is deleted. A watch records each step.
	list, err := e.resource.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list claims: %v", err)
	}
	watcher, err := e.resource.ResourceV1().ResourceClaims(namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatalf("watch claims: %v", err)
	}
	defer watcher.Stop()
	setPhase(ctx, t, e, pod.Name, corev1.PodSucceeded)

	lastSeen := map[string]*resourcev1.ResourceClaim{}
	deleted := map[string]bool{}
	timeout := time.After(pollTimeout)
	for len(deleted) < len(claims) {
		select {
		case event, ok := <-watcher.ResultChan():
			if !ok {
				t.Fatal("claim watch ended early")
			}
			claim, ok := event.Object.(*resourcev1.ResourceClaim)
			if !ok {
				t.Fatalf("unexpected watch event %s: %T", event.Type, event.Object)
			}
			if _, ours := claims[claim.Name]; !ours {
				continue
			}
			if event.Type == watch.Deleted {
				deleted[claim.Name] = true
				continue
			}
			lastSeen[claim.Name] = claim
		case <-timeout:
			t.Fatalf("claims not deleted after the pod finished; deleted so far: %v", deleted)
		}
	}
	for name := range claims {
		claim := lastSeen[name]
		if claim == nil {
			t.Errorf("claim %s: deleted without being released first", name)
			continue
		}
		if len(claim.Status.ReservedFor) != 0 || claim.Status.Allocation != nil || slices.Contains(claim.Finalizers, resourceapi.Finalizer) {
			t.Errorf("claim %s: last state before deletion still reserved, allocated or protected: reservedFor=%v allocated=%v finalizers=%v",
				name, claim.Status.ReservedFor, claim.Status.Allocation != nil, claim.Finalizers)
		}
	}
}

func testSharedClaim(ctx context.Context, t *testing.T, e *env) {
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "shared-gpu", Namespace: namespace},
		Spec:       claimSpec(),
	}
	if _, err := e.resource.ResourceV1().ResourceClaims(namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create claim: %v", err)
	}
	allocate(ctx, t, e, claim.Name)

	// Three pods that are bound already: the controller reserves the
	// claim for each of them, concurrently with itself.
	var pods []*corev1.Pod
	for i := 1; i <= 3; i++ {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("worker-%d", i), Namespace: namespace},
			Spec: corev1.PodSpec{
				NodeName:       "node-1",
				Containers:     []corev1.Container{{Name: "ctr", Image: "busybox"}},
				ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr(claim.Name)}},
			},
		}
		pod, err := e.kube.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create pod: %v", err)
		}
		setPhase(ctx, t, e, pod.Name, corev1.PodRunning)
		pods = append(pods, pod)
	}
	testenv.WaitFor(ctx, t, pollTimeout, "claim reserved for all three pods", func() (bool, error) {
		current, err := e.resource.ResourceV1().ResourceClaims(namespace).Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return reservedUIDs(current).Equal(uidSet(pods[0].UID, pods[1].UID, pods[2].UID)), nil
	})

	// The second pod finishes: only it leaves reservedFor, the claim stays
	// allocated for the others.
	setPhase(ctx, t, e, pods[1].Name, corev1.PodSucceeded)
	testenv.WaitFor(ctx, t, pollTimeout, "finished pod removed from reservedFor", func() (bool, error) {
		current, err := e.resource.ResourceV1().ResourceClaims(namespace).Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return !reservedUIDs(current).Has(pods[1].UID), nil
	})
	current, err := e.resource.ResourceV1().ResourceClaims(namespace).Get(ctx, claim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get claim: %v", err)
	}
	if got, want := reservedUIDs(current), uidSet(pods[0].UID, pods[2].UID); !got.Equal(want) {
		t.Errorf("reservedFor: expected pods %v, got %v", want, got)
	}
	if current.Status.Allocation == nil || !slices.Contains(current.Finalizers, resourceapi.Finalizer) {
		t.Errorf("claim still in use must stay allocated and protected: allocated=%v finalizers=%v", current.Status.Allocation != nil, current.Finalizers)
	}

	// The others go too: the claim is released but not deleted, it was not
	// generated for a pod.
	setPhase(ctx, t, e, pods[0].Name, corev1.PodFailed)
	if err := e.kube.CoreV1().Pods(namespace).Delete(ctx, pods[2].Name, metav1.DeleteOptions{GracePeriodSeconds: ptr[int64](0)}); err != nil {
		t.Fatalf("delete pod: %v", err)
	}
	testenv.WaitFor(ctx, t, pollTimeout, "shared claim released", func() (bool, error) {
		current, err := e.resource.ResourceV1().ResourceClaims(namespace).Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(current.Status.ReservedFor) == 0 && current.Status.Allocation == nil && !slices.Contains(current.Finalizers, resourceapi.Finalizer), nil
	})
}

// testDeletedPod: the server runs no garbage collector, so the controller
// deletes the claim of a pod that is gone.
func testDeletedPod(ctx context.Context, t *testing.T, e *env) {
	pod := createTemplatePod(ctx, t, e, "short-lived")
	var claimName string
	testenv.WaitFor(ctx, t, pollTimeout, "claim in the pod status", func() (bool, error) {
		current, err := e.kube.CoreV1().Pods(namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil || len(current.Status.ResourceClaimStatuses) == 0 {
			return false, err
		}
		claimName = *current.Status.ResourceClaimStatuses[0].ResourceClaimName
		return true, nil
	})
	// Made to be allocated, the claim is protected from the start; the
	// deletion of a claim that never was allocated must still finish.
	claim, err := e.resource.ResourceV1().ResourceClaims(namespace).Get(ctx, claimName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get claim: %v", err)
	}
	if !slices.Contains(claim.Finalizers, resourceapi.Finalizer) || claim.Status.Allocation != nil {
		t.Fatalf("claim %s: expected unallocated with the delete protection, got allocated=%v finalizers=%v", claimName, claim.Status.Allocation != nil, claim.Finalizers)
	}
	if err := e.kube.CoreV1().Pods(namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod: %v", err)
	}
	testenv.WaitFor(ctx, t, pollTimeout, "claim "+claimName+" deleted", func() (bool, error) {
		_, err := e.resource.ResourceV1().ResourceClaims(namespace).Get(ctx, claimName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// testDeletedUnallocatedClaim: a user deletes the claim generated for a
// pod that waits for its allocation. The claim carries the delete
// protection from its creation; the controller lifts it, since nothing
// is allocated, the claim goes and the pod gets a new one.
func testDeletedUnallocatedClaim(ctx context.Context, t *testing.T, e *env) {
	pod := createTemplatePod(ctx, t, e, "waiting")
	var first *resourcev1.ResourceClaim
	testenv.WaitFor(ctx, t, pollTimeout, "claim generated", func() (bool, error) {
		for _, claim := range claimsOwnedBy(ctx, t, e, pod) {
			first = claim
		}
		return first != nil, nil
	})
	if !slices.Contains(first.Finalizers, resourceapi.Finalizer) {
		t.Fatalf("claim %s: generated without the delete protection: %v", first.Name, first.Finalizers)
	}
	if err := e.resource.ResourceV1().ResourceClaims(namespace).Delete(ctx, first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete claim: %v", err)
	}
	testenv.WaitFor(ctx, t, pollTimeout, "claim "+first.Name+" gone", func() (bool, error) {
		current, err := e.resource.ResourceV1().ResourceClaims(namespace).Get(ctx, first.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return true, nil
		case err != nil:
			return false, err
		default:
			return current.UID != first.UID, nil
		}
	})
	testenv.WaitFor(ctx, t, pollTimeout, "a new claim for the pod", func() (bool, error) {
		for _, claim := range claimsOwnedBy(ctx, t, e, pod) {
			if claim.UID != first.UID && claim.DeletionTimestamp == nil {
				return slices.Contains(claim.Finalizers, resourceapi.Finalizer), nil
			}
		}
		return false, nil
	})
}

// createTemplatePod creates the template <name>-template and a pod
// <name> with one claim "gpu" from it.
func createTemplatePod(ctx context.Context, t *testing.T, e *env, name string) *corev1.Pod {
	t.Helper()
	createTemplate(ctx, t, e, name+"-template")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{
			Containers:     []corev1.Container{{Name: "ctr", Image: "busybox"}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr(name + "-template")}},
		},
	}
	pod, err := e.kube.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}
	return pod
}

func claimSpec() resourcev1.ResourceClaimSpec {
	return resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
		Name:    "gpu",
		Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com"},
	}}}}
}

func createTemplate(ctx context.Context, t *testing.T, e *env, name string) {
	t.Helper()
	template := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: resourcev1.ResourceClaimTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{
				Labels:      map[string]string{"app": "inference"},
				Annotations: map[string]string{"team": "ml"},
			},
			Spec: claimSpec(),
		},
	}
	if _, err := e.resource.ResourceV1().ResourceClaimTemplates(namespace).Create(ctx, template, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create template: %v", err)
	}
}

// allocate does what the allocation controller does: protect the claim
// with the finalizer unless it is already (a claim made for a pod is
// protected from its creation), then write the allocation.
func allocate(ctx context.Context, t *testing.T, e *env, name string) {
	t.Helper()
	claims := e.resource.ResourceV1().ResourceClaims(namespace)
	claim, err := claims.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get claim %s: %v", name, err)
	}
	if !slices.Contains(claim.Finalizers, resourceapi.Finalizer) {
		claim.Finalizers = append(claim.Finalizers, resourceapi.Finalizer)
		claim, err = claims.Update(ctx, claim, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("add finalizer to claim %s: %v", name, err)
		}
	}
	now := metav1.Now()
	claim.Status.Allocation = &resourcev1.AllocationResult{
		Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: "gpu.example.com", Pool: "node-1", Device: "gpu-0",
		}}},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-1"}}},
		}}},
		AllocationTimestamp: &now,
	}
	if _, err := claims.UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("allocate claim %s: %v", name, err)
	}
}

// setPhase plays the node: it reports the pod's phase, retrying on
// conflicts with the controller's own status writes.
func setPhase(ctx context.Context, t *testing.T, e *env, name string, phase corev1.PodPhase) {
	t.Helper()
	testenv.WaitFor(ctx, t, pollTimeout, fmt.Sprintf("pod %s %s", name, phase), func() (bool, error) {
		pod, err := e.kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod.Status.Phase = phase
		_, err = e.kube.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}

func claimsOwnedBy(ctx context.Context, t *testing.T, e *env, pod *corev1.Pod) map[string]*resourcev1.ResourceClaim {
	t.Helper()
	list, err := e.resource.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list claims: %v", err)
	}
	owned := map[string]*resourcev1.ResourceClaim{}
	for i := range list.Items {
		claim := &list.Items[i]
		for _, owner := range claim.OwnerReferences {
			if owner.UID == pod.UID && owner.Kind == "Pod" && owner.APIVersion == "v1" && owner.Controller != nil && *owner.Controller {
				owned[claim.Name] = claim
			}
		}
	}
	return owned
}

func claimNames(claims map[string]*resourcev1.ResourceClaim) []string {
	var names []string
	for name := range claims {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

type uids map[types.UID]bool

func uidSet(list ...types.UID) uids {
	set := uids{}
	for _, uid := range list {
		set[uid] = true
	}
	return set
}

func (u uids) Has(uid types.UID) bool { return u[uid] }

func (u uids) Equal(other uids) bool {
	if len(u) != len(other) {
		return false
	}
	for uid := range u {
		if !other[uid] {
			return false
		}
	}
	return true
}

func reservedUIDs(claim *resourcev1.ResourceClaim) uids {
	set := uids{}
	for _, consumer := range claim.Status.ReservedFor {
		set[consumer.UID] = true
	}
	return set
}

func ptr[T any](v T) *T { return &v }
