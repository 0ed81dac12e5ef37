package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	applyv1 "github.com/draplane/draplane/generated/applyconfiguration/resource/v1"
	"github.com/draplane/draplane/generated/clientset/versioned"
)

// TestAdversarialAPI uses every kind the way a careless user or an attacker
// would and checks the answer Kubernetes gives: a clear 4xx naming the
// field, nothing stored where a write is refused, nothing lost where one is
// accepted, and a healthy server after each case. One shared server, no
// controllers: the API alone must hold.
func TestAdversarialAPI(t *testing.T) {
	s := sharedServer(t)
	ctx := context.Background()
	admin, err := rest.HTTPClientFor(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	anonymous, err := s.AnonymousHTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	resource := s.Client(t).ResourceV1()
	claims := resource.ResourceClaims("default")
	const group = "/apis/resource.draplane.dev/v1"

	// newClaim creates a claim, allocated when allocated is set.
	newClaim := func(t *testing.T, name string, allocated bool) *resourcev1.ResourceClaim {
		t.Helper()
		claim, err := claims.Create(ctx, &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{exactRequest("gpu", "gpu.example.com")}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if allocated {
			claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
				Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: "gpu.example.com", Pool: "pool", Device: "dev-0"}},
			}}
			if claim, err = claims.UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return claim
	}
	consumer := func(i int) resourcev1.ResourceClaimConsumerReference {
		return resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: fmt.Sprintf("pod-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))}
	}
	// unchanged fails unless the claim still has resourceVersion rv.
	unchanged := func(t *testing.T, name, rv string) {
		t.Helper()
		got, err := claims.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.ResourceVersion != rv {
			t.Errorf("claim %s was written by a refused request: resourceVersion %s, was %s", name, got.ResourceVersion, rv)
		}
	}
	// refused checks a 4xx answer that names what it is about.
	refused := func(t *testing.T, code int, answer string, want []int, mention ...string) {
		t.Helper()
		ok := false
		for _, w := range want {
			ok = ok || code == w
		}
		if !ok {
			t.Errorf("status %d, want one of %v: %.1000s", code, want, answer)
		}
		for _, m := range mention {
			if !strings.Contains(answer, m) {
				t.Errorf("answer does not mention %q: %.1000s", m, answer)
			}
		}
	}

	cases := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"claim status written by a user who is not an admin", func(t *testing.T) {
			claim := newClaim(t, "adv-not-admin", true)
			driver := ownCACertClient(t, s, "some-driver", "drivers")
			code, answer := httpDo(t, s, driver, "PATCH", group+"/namespaces/default/resourceclaims/adv-not-admin/status", "application/merge-patch+json",
				`{"status":{"reservedFor":[{"resource":"pods","name":"mine","uid":"mine"}]}}`)
			refused(t, code, answer, []int{http.StatusForbidden}, "resourceclaims/status")
			unchanged(t, claim.Name, claim.ResourceVersion)
		}},
		{"two writers racing on reservedFor", func(t *testing.T) {
			claim := newClaim(t, "adv-race", true)
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					update := claim.DeepCopy()
					update.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{consumer(i)}
					_, errs[i] = claims.UpdateStatus(ctx, update, metav1.UpdateOptions{})
				}()
			}
			wg.Wait()
			winner := -1
			for i, err := range errs {
				switch {
				case err == nil:
					if winner >= 0 {
						t.Fatalf("both writers of resourceVersion %s succeeded", claim.ResourceVersion)
					}
					winner = i
				case !apierrors.IsConflict(err):
					t.Errorf("writer %d: want 409 Conflict, got %v", i, err)
				}
			}
			if winner < 0 {
				t.Fatalf("no writer succeeded: %v", errs)
			}
			got, err := claims.Get(ctx, claim.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Status.ReservedFor) != 1 || got.Status.ReservedFor[0] != consumer(winner) {
				t.Fatalf("reservedFor %+v, want only the winner %d", got.Status.ReservedFor, winner)
			}
			// The loser retries on the fresh object; both are kept.
			got.Status.ReservedFor = append(got.Status.ReservedFor, consumer(1-winner))
			if got, err = claims.UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil || len(got.Status.ReservedFor) != 2 {
				t.Errorf("retry of the loser: %v %+v", err, got.Status.ReservedFor)
			}
		}},
		{"reservedFor at its limit of 256", func(t *testing.T) {
			claim := newClaim(t, "adv-256", true)
			for i := range 256 {
				claim.Status.ReservedFor = append(claim.Status.ReservedFor, consumer(i))
			}
			claim, err := claims.UpdateStatus(ctx, claim, metav1.UpdateOptions{})
			if err != nil || len(claim.Status.ReservedFor) != 256 {
				t.Fatalf("256 consumers: %v", err)
			}
			code, answer := httpDo(t, s, admin, "PATCH", group+"/namespaces/default/resourceclaims/adv-256/status", "application/strategic-merge-patch+json",
				`{"status":{"reservedFor":[{"resource":"pods","name":"one-more","uid":"one-more"}]}}`)
			refused(t, code, answer, []int{http.StatusUnprocessableEntity}, "status.reservedFor", "256")
			unchanged(t, claim.Name, claim.ResourceVersion)
		}},
		{"a slice of 128 devices, and one of 129", func(t *testing.T) {
			slice := &resourcev1.ResourceSlice{
				ObjectMeta: metav1.ObjectMeta{Name: "adv-128"},
				Spec: resourcev1.ResourceSliceSpec{Driver: "adv.example.com", NodeName: new("adv-node"),
					Pool: resourcev1.ResourcePool{Name: "adv", Generation: 1, ResourceSliceCount: 1}},
			}
			for i := range 128 {
				slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("dev-%d", i)})
			}
			if created, err := resource.ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil || len(created.Spec.Devices) != 128 {
				t.Fatalf("128 devices: %v", err)
			}
			slice.Name = "adv-129"
			slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{Name: "dev-128"})
			_, err := resource.ResourceSlices().Create(ctx, slice, metav1.CreateOptions{})
			expectInvalid(t, err, "spec.devices")
			if _, err := resource.ResourceSlices().Get(ctx, "adv-129", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("refused slice stored: %v", err)
			}
		}},
		{"names at their length limits", func(t *testing.T) {
			long := strings.Repeat("n", 253)
			if _, err := resource.DeviceClasses().Create(ctx, &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: long}}, metav1.CreateOptions{}); err != nil {
				t.Errorf("class name of 253 characters: %v", err)
			}
			_, err := resource.DeviceClasses().Create(ctx, &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: long + "n"}}, metav1.CreateOptions{})
			expectInvalid(t, err, "metadata.name")
			if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("s", 63)}}, metav1.CreateOptions{}); err != nil {
				t.Errorf("namespace name of 63 characters: %v", err)
			}
			_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("s", 64)}}, metav1.CreateOptions{})
			expectInvalid(t, err, "metadata.name")
			_, err = claims.Create(ctx, &resourcev1.ResourceClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "adv-label", Labels: map[string]string{"a": strings.Repeat("v", 64)}},
				Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{exactRequest("gpu", "gpu.example.com")}}},
			}, metav1.CreateOptions{})
			expectInvalid(t, err, "metadata.labels")
			_, err = resource.ResourceSlices().Create(ctx, &resourcev1.ResourceSlice{
				ObjectMeta: metav1.ObjectMeta{Name: "adv-long-driver"},
				Spec: resourcev1.ResourceSliceSpec{Driver: strings.Repeat("d", 64) + ".example.com", NodeName: new("adv-node"),
					Pool: resourcev1.ResourcePool{Name: "p", Generation: 1, ResourceSliceCount: 1}},
			}, metav1.CreateOptions{})
			expectInvalid(t, err, "spec.driver")
		}},
		{"malformed resourceVersion on get, list and watch", func(t *testing.T) {
			for _, query := range []string{"resourceVersion=abc", "watch=1&resourceVersion=abc", "watch=1&resourceVersion=-5",
				"watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion=1.5"} {
				code, answer := httpDo(t, s, admin, "GET", group+"/namespaces/default/resourceclaims?"+query, "", "")
				refused(t, code, answer, []int{http.StatusBadRequest}, "resourceVersion")
			}
			newClaim(t, "adv-rv", false)
			code, answer := httpDo(t, s, admin, "GET", group+"/namespaces/default/resourceclaims/adv-rv?resourceVersion=abc", "", "")
			refused(t, code, answer, []int{http.StatusBadRequest}, "resourceVersion")
			code, answer = httpDo(t, s, admin, "GET", "/api/v1/pods?watch=1&resourceVersion=x", "", "")
			refused(t, code, answer, []int{http.StatusBadRequest}, "resourceVersion")
		}},
		{"a watch with a negative timeout", func(t *testing.T) {
			code, answer := httpDo(t, s, admin, "GET", group+"/namespaces/default/resourceclaims?watch=1&timeoutSeconds=-1", "", "")
			refused(t, code, answer, []int{http.StatusBadRequest}, "timeoutSeconds")
		}},
		{"clients that drop the connection mid-watch", func(t *testing.T) {
			// A claim to watch, so that every watch has something to send.
			newClaim(t, "adv-watched", false)
			for range 3 {
				var conns []*http.Response
				for range 20 {
					transport := admin.Transport
					req, _ := http.NewRequest("GET", s.URL+group+"/namespaces/default/resourceclaims?watch=1&timeoutSeconds=60", nil)
					resp, err := (&http.Client{Transport: transport}).Do(req)
					if err != nil {
						t.Fatal(err)
					}
					conns = append(conns, resp)
				}
				// Read a little of some, then hang up on all of them
				// (HTTP/2 stream resets).
				for i, resp := range conns {
					if i%2 == 0 {
						_, _ = bufio.NewReader(resp.Body).Peek(1)
					}
					resp.Body.Close()
				}
			}
			// And drop TCP connections of HTTP/1.1 watches, some before
			// the answer, some after its first bytes.
			tlsConfig, err := rest.TLSConfigFor(s.RESTConfig(t))
			if err != nil {
				t.Fatal(err)
			}
			tlsConfig.NextProtos = []string{"http/1.1"}
			host := strings.TrimPrefix(s.URL, "https://")
			for i := range 20 {
				conn, err := tls.Dial("tcp", host, tlsConfig)
				if err != nil {
					t.Fatal(err)
				}
				_ = conn.SetDeadline(time.Now().Add(pollTimeout))
				fmt.Fprintf(conn, "GET %s/namespaces/default/resourceclaims?watch=1&timeoutSeconds=60 HTTP/1.1\r\nHost: %s\r\nAccept: application/json\r\n\r\n", group, host)
				if i%2 == 0 {
					_, _ = bufio.NewReader(conn).ReadString('\n')
				}
				conn.Close()
			}
			healthy(t, s, anonymous)
			// A watch still sees new objects.
			watcher, err := claims.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=adv-after-drop"})
			if err != nil {
				t.Fatal(err)
			}
			defer watcher.Stop()
			newClaim(t, "adv-after-drop", false)
			select {
			case ev := <-watcher.ResultChan():
				if ev.Type != "ADDED" {
					t.Errorf("first event %s, want ADDED", ev.Type)
				}
			case <-time.After(pollTimeout):
				t.Error("no event after the dropped watches")
			}
		}},
		{"bogus field and label selectors", func(t *testing.T) {
			for _, path := range []string{
				group + "/resourceslices?fieldSelector=spec.devices%3Dx",
				group + "/resourceslices?watch=1&fieldSelector=spec.devices%3Dx",
				group + "/namespaces/default/resourceclaims?fieldSelector=status.allocation%3Dx",
				"/api/v1/pods?fieldSelector=spec.containers%3Dx",
			} {
				code, answer := httpDo(t, s, admin, "GET", path, "", "")
				field := path[strings.Index(path, "fieldSelector=")+len("fieldSelector="):]
				field = field[:strings.Index(field, "%")]
				refused(t, code, answer, []int{http.StatusBadRequest}, field)
			}
			code, answer := httpDo(t, s, admin, "GET", group+"/resourceslices?fieldSelector=spec.nodeName%3D%3D%3D", "", "")
			refused(t, code, answer, []int{http.StatusBadRequest})
			code, answer = httpDo(t, s, admin, "GET", group+"/resourceslices?labelSelector="+strings.Repeat("a", 64)+"%3Dx", "", "")
			refused(t, code, answer, []int{http.StatusBadRequest})
		}},
		{"unknown fields with strict validation on update, patch and apply", func(t *testing.T) {
			claim := newClaim(t, "adv-strict", false)
			path := group + "/namespaces/default/resourceclaims/adv-strict"
			body, _ := json.Marshal(claim)
			withUnknown := strings.Replace(string(body), `"spec":{`, `"spec":{"sneaky":1,`, 1)
			code, answer := httpDo(t, s, admin, "PUT", path+"?fieldValidation=Strict", "application/json", withUnknown)
			refused(t, code, answer, []int{http.StatusBadRequest}, "sneaky")
			// As in Kubernetes, a patch with an unknown field is invalid (422).
			code, answer = httpDo(t, s, admin, "PATCH", path+"?fieldValidation=Strict", "application/merge-patch+json", `{"metadata":{"labels":{"a":"b"}},"spec":{"sneaky":1}}`)
			refused(t, code, answer, []int{http.StatusBadRequest, http.StatusUnprocessableEntity}, "sneaky")
			code, answer = httpDo(t, s, admin, "PATCH", path+"?fieldValidation=Strict", "application/strategic-merge-patch+json", `{"metadata":{"labels":{"a":"b"}},"spec":{"sneaky":1}}`)
			refused(t, code, answer, []int{http.StatusBadRequest, http.StatusUnprocessableEntity}, "sneaky")
			code, answer = httpDo(t, s, admin, "PATCH", path+"?fieldValidation=Strict&fieldManager=adv", "application/apply-patch+yaml",
				"apiVersion: resource.draplane.dev/v1\nkind: ResourceClaim\nmetadata:\n  name: adv-strict\n  labels:\n    a: b\nspec:\n  sneaky: 1\n")
			refused(t, code, answer, []int{http.StatusBadRequest}, "sneaky")
			unchanged(t, claim.Name, claim.ResourceVersion)
		}},
		{"dry run stores nothing", func(t *testing.T) {
			dry := []string{metav1.DryRunAll}
			if _, err := claims.Create(ctx, &resourcev1.ResourceClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "adv-dry"},
				Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{exactRequest("gpu", "gpu.example.com")}}},
			}, metav1.CreateOptions{DryRun: dry}); err != nil {
				t.Fatal(err)
			}
			if _, err := claims.Get(ctx, "adv-dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("dry-run create stored the claim: %v", err)
			}
			claim := newClaim(t, "adv-dry-status", false)
			update := claim.DeepCopy()
			update.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
				Results: []resourcev1.DeviceRequestAllocationResult{{Request: "gpu", Driver: "gpu.example.com", Pool: "pool", Device: "dev-0"}}}}
			if answered, err := claims.UpdateStatus(ctx, update, metav1.UpdateOptions{DryRun: dry}); err != nil || answered.Status.Allocation == nil {
				t.Fatalf("dry-run status update: %v", err)
			}
			if err := claims.Delete(ctx, claim.Name, metav1.DeleteOptions{DryRun: dry}); err != nil {
				t.Fatal(err)
			}
			unchanged(t, claim.Name, claim.ResourceVersion)
		}},
		{"delete with wrong preconditions", func(t *testing.T) {
			claim := newClaim(t, "adv-precondition", false)
			wrongUID := types.UID("not-the-uid")
			err := claims.Delete(ctx, claim.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &wrongUID}})
			if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "UID") {
				t.Errorf("delete with the wrong UID: want 409 naming the UID, got %v", err)
			}
			staleRV := "1"
			err = claims.Delete(ctx, claim.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &staleRV}})
			if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "ResourceVersion") {
				t.Errorf("delete with a stale resourceVersion: want 409 naming it, got %v", err)
			}
			unchanged(t, claim.Name, claim.ResourceVersion)
		}},
		{"server-side apply conflicts between field managers", func(t *testing.T) {
			apply := func(manager, expression string, force bool) error {
				class := applyv1.DeviceClass("adv-ssa").WithSpec(applyv1.DeviceClassSpec().WithSelectors(
					applyv1.DeviceSelector().WithCEL(applyv1.CELDeviceSelector().WithExpression(expression))))
				_, err := resource.DeviceClasses().Apply(ctx, class, metav1.ApplyOptions{FieldManager: manager, Force: force})
				return err
			}
			if err := apply("team-a", `device.driver == "a.example.com"`, false); err != nil {
				t.Fatal(err)
			}
			err := apply("team-b", `device.driver == "b.example.com"`, false)
			if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "team-a") || !strings.Contains(err.Error(), "spec.selectors") {
				t.Errorf("second manager: want 409 naming team-a and spec.selectors, got %v", err)
			}
			class, err := resource.DeviceClasses().Get(ctx, "adv-ssa", metav1.GetOptions{})
			if err != nil || class.Spec.Selectors[0].CEL.Expression != `device.driver == "a.example.com"` {
				t.Fatalf("conflicting apply changed the class: %v %+v", err, class.Spec.Selectors)
			}
			if err := apply("team-b", `device.driver == "b.example.com"`, true); err != nil {
				t.Fatalf("forced apply: %v", err)
			}
		}},
		{"v1beta1 and v1 writes of the same claim lose nothing", func(t *testing.T) {
			rich := &resourcev1.ResourceClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "adv-versions"},
				Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
					Requests: []resourcev1.DeviceRequest{
						{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.example.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 2,
							Selectors:   []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.attributes["gpu.example.com"].model == "x"`}}},
							Tolerations: []resourcev1.DeviceToleration{{Key: "maintenance", Operator: resourcev1.DeviceTolerationOpExists, Effect: resourcev1.DeviceTaintEffectNoSchedule}}}},
						{Name: "nic", FirstAvailable: []resourcev1.DeviceSubRequest{
							{Name: "fast", DeviceClassName: "nic.example.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1},
							{Name: "slow", DeviceClassName: "nic.example.com", AllocationMode: resourcev1.DeviceAllocationModeAll}}},
					},
					Constraints: []resourcev1.DeviceConstraint{{Requests: []string{"gpu"}, MatchAttribute: new(resourcev1.FullyQualifiedName("gpu.example.com/numa"))}},
					Config: []resourcev1.DeviceClaimConfiguration{{Requests: []string{"gpu"}, DeviceConfiguration: resourcev1.DeviceConfiguration{
						Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: "gpu.example.com", Parameters: runtimeRaw(`{"mode":"fast"}`)}}}},
				}},
			}
			created, err := claims.Create(ctx, rich, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			beta := "/apis/resource.draplane.dev/v1beta1/namespaces/default/resourceclaims/adv-versions"
			code, answer := httpDo(t, s, admin, "GET", beta, "", "")
			if code != http.StatusOK {
				t.Fatalf("get in v1beta1: %d %s", code, answer)
			}
			// A v1beta1 client changes a label and writes back what it read.
			var object map[string]interface{}
			if err := json.Unmarshal([]byte(answer), &object); err != nil {
				t.Fatal(err)
			}
			object["metadata"].(map[string]interface{})["labels"] = map[string]interface{}{"written-by": "v1beta1"}
			body, _ := json.Marshal(object)
			if code, answer := httpDo(t, s, admin, "PUT", beta, "application/json", string(body)); code != http.StatusOK {
				t.Fatalf("put in v1beta1: %d %s", code, answer)
			}
			got, err := claims.Get(ctx, "adv-versions", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !equalJSON(t, got.Spec, created.Spec) {
				t.Errorf("a v1beta1 round trip changed the spec:\n%s\nwas\n%s", mustJSON(t, got.Spec), mustJSON(t, created.Spec))
			}
			// The v1beta1 object read before that write is stale now.
			if code, answer := httpDo(t, s, admin, "PUT", beta, "application/json", string(body)); code != http.StatusConflict {
				t.Errorf("stale v1beta1 write: status %d, want 409: %.500s", code, answer)
			}
		}},
		{"create in a namespace that does not exist", func(t *testing.T) {
			_, err := s.Client(t).ResourceV1().ResourceClaims("adv-no-such-namespace").Create(ctx, &resourcev1.ResourceClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "c"},
				Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{exactRequest("gpu", "gpu.example.com")}}},
			}, metav1.CreateOptions{})
			if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "adv-no-such-namespace") {
				t.Errorf("want 404 naming the namespace, got %v", err)
			}
		}},
		{"binding a pod twice, once to a node that does not exist", func(t *testing.T) {
			pod, err := kube.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "adv-bind"},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// As in Kubernetes, binding does not look the node up.
			bind := func(node string) error {
				return kube.CoreV1().Pods("default").Bind(ctx, &corev1.Binding{
					ObjectMeta: metav1.ObjectMeta{Name: pod.Name, UID: pod.UID},
					Target:     corev1.ObjectReference{Kind: "Node", Name: node},
				}, metav1.CreateOptions{})
			}
			if err := bind("adv-ghost-node"); err != nil {
				t.Fatalf("bind: %v", err)
			}
			if err := bind("adv-other-node"); !apierrors.IsConflict(err) {
				t.Errorf("second binding: want 409, got %v", err)
			}
			got, err := kube.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil || got.Spec.NodeName != "adv-ghost-node" {
				t.Errorf("pod node %q after a refused second binding: %v", got.Spec.NodeName, err)
			}
		}},
		{"evicting a pod twice", func(t *testing.T) {
			if _, err := kube.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "adv-evict"},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			evict := func() error {
				return kube.PolicyV1().Evictions("default").Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "adv-evict", Namespace: "default"}})
			}
			if err := evict(); err != nil {
				t.Fatalf("first eviction: %v", err)
			}
			if err := evict(); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("second eviction: want success (still terminating) or 404, got %v", err)
			}
			healthy(t, s, anonymous)
		}},
		{"a taint rule that selects every device needs confirmation", func(t *testing.T) {
			rule := &resourcev1.DeviceTaintRule{
				ObjectMeta: metav1.ObjectMeta{Name: "adv-everything"},
				Spec: resourcev1.DeviceTaintRuleSpec{DeviceSelector: &resourcev1.DeviceTaintSelector{},
					Taint: resourcev1.DeviceTaint{Key: "example.com/broken", Effect: resourcev1.DeviceTaintEffectNoExecute}},
			}
			_, err := resource.DeviceTaintRules().Create(ctx, rule, metav1.CreateOptions{})
			expectInvalid(t, err, "spec.deviceSelector")
			rule.Annotations = map[string]string{"resource.draplane.dev/confirm-select-all-devices": "true"}
			created, err := resource.DeviceTaintRules().Create(ctx, rule, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("confirmed rule: %v", err)
			}
			t.Cleanup(func() { _ = resource.DeviceTaintRules().Delete(ctx, rule.Name, metav1.DeleteOptions{}) })
			// Dropping the confirmation later is refused too.
			code, answer := httpDo(t, s, admin, "PATCH", group+"/devicetaintrules/adv-everything", "application/merge-patch+json",
				`{"metadata":{"annotations":null}}`)
			refused(t, code, answer, []int{http.StatusUnprocessableEntity}, "spec.deviceSelector")
			if got, err := resource.DeviceTaintRules().Get(ctx, rule.Name, metav1.GetOptions{}); err != nil || got.ResourceVersion != created.ResourceVersion {
				t.Errorf("refused patch changed the rule: %v", err)
			}
		}},
		{"a JSON patch of 10,001 operations", func(t *testing.T) {
			claim := newClaim(t, "adv-many-ops", false)
			ops := make([]string, 10001)
			for i := range ops {
				ops[i] = `{"op":"test","path":"/metadata/name","value":"adv-many-ops"}`
			}
			code, answer := httpDo(t, s, admin, "PATCH", group+"/namespaces/default/resourceclaims/adv-many-ops", "application/json-patch+json", "["+strings.Join(ops, ",")+"]")
			refused(t, code, answer, []int{http.StatusRequestEntityTooLarge}, "10000")
			unchanged(t, claim.Name, claim.ResourceVersion)
		}},
		{"a list with a forged continue token", func(t *testing.T) {
			code, answer := httpDo(t, s, admin, "GET", group+"/namespaces/default/resourceclaims?limit=1&continue=Zm9yZ2Vk", "", "")
			refused(t, code, answer, []int{http.StatusBadRequest, http.StatusGone}, "continue")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t)
			healthy(t, s, anonymous)
		})
	}
}

func runtimeRaw(s string) runtime.RawExtension { return runtime.RawExtension{Raw: []byte(s)} }

func mustJSON(t *testing.T, v interface{}) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func equalJSON(t *testing.T, a, b interface{}) bool {
	return mustJSON(t, a) == mustJSON(t, b)
}

// waitFor polls cond until it holds or pollTimeout passes.
func waitFor(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, pollTimeout, true, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// TestAdversarialControllers deletes and changes things while the
// controllers place pods: a claim that appears after its pod, a claim
// deleted while in use, a slice withdrawn and published again under an
// allocation, and a taint rule on every device. A device is never
// allocated twice, a pod never runs without its devices, and every pod
// that cannot be placed says why. One server for all of them.
func TestAdversarialControllers(t *testing.T) {
	s := startServer(t, t.TempDir())
	ctx := context.Background()
	kube, err := kubernetes.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	// Not throttled by the client: one case creates 65 claims.
	config := s.RESTConfig(t)
	config.QPS, config.Burst = 1000, 1000
	client, err := versioned.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	resource := client.ResourceV1()
	claims := resource.ResourceClaims("default")
	pods := kube.CoreV1().Pods("default")
	const node, driver = "adv-node", "adv.example.com"

	s.MustKubectl(t, "apiVersion: v1\nkind: Node\nmetadata:\n  name: "+node+"\n  labels:\n    kubernetes.io/hostname: "+node+"\n", "apply", "-f", "-")
	s.MustKubectl(t, "", "patch", "node", node, "--subresource=status", "--type=merge",
		"-p", `{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Test","message":"test node"}]}}`)
	if _, err := resource.DeviceClasses().Create(ctx, &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: driver},
		Spec:       resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + driver + `"`}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// One device only: whoever holds it, nobody else may.
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "adv-slice"},
		Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: new(node),
			Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}, Devices: []resourcev1.Device{{Name: "only"}}},
	}
	if _, err := resource.ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createClaim := func(t *testing.T, name string) {
		t.Helper()
		if _, err := claims.Create(ctx, &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{exactRequest("dev", driver)}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createPod := func(t *testing.T, name, claim string) {
		t.Helper()
		if _, err := pods.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{
				NodeSelector:   map[string]string{"kubernetes.io/hostname": node},
				Containers:     []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "dev"}}}}},
				ResourceClaims: []corev1.PodResourceClaim{{Name: "dev", ResourceClaimName: new(claim)}},
			},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// pending waits until the pod reports PodScheduled=False with a
	// message containing want; it must not be bound meanwhile.
	pending := func(t *testing.T, name, want string) {
		t.Helper()
		var last string
		waitFor(t, "pod "+name+" unschedulable because "+want, func(ctx context.Context) (bool, error) {
			pod, err := pods.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if pod.Spec.NodeName != "" {
				return false, fmt.Errorf("pod bound to %s", pod.Spec.NodeName)
			}
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					last = c.Message
					return strings.Contains(c.Message, want), nil
				}
			}
			return false, nil
		})
		t.Logf("%s: %s", name, last)
	}
	bound := func(t *testing.T, name string) {
		t.Helper()
		waitFor(t, "pod "+name+" bound", func(ctx context.Context) (bool, error) {
			pod, err := pods.Get(ctx, name, metav1.GetOptions{})
			return err == nil && pod.Spec.NodeName == node, err
		})
	}
	// holders lists the claims whose allocation holds the device.
	holders := func(t *testing.T) []string {
		t.Helper()
		list, err := claims.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range list.Items {
			if c.Status.Allocation != nil {
				names = append(names, c.Name)
			}
		}
		return names
	}
	deletePod := func(t *testing.T, name string) {
		t.Helper()
		if err := pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "pod "+name+" gone", func(ctx context.Context) (bool, error) {
			_, err := pods.Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	}

	t.Run("a claim that appears after its pod", func(t *testing.T) {
		createPod(t, "adv-first", "adv-first")
		pending(t, "adv-first", "ResourceClaim adv-first does not exist")
		createClaim(t, "adv-first")
		bound(t, "adv-first")
		if got := holders(t); len(got) != 1 || got[0] != "adv-first" {
			t.Fatalf("device held by %v", got)
		}
	})

	t.Run("a claim deleted while in use", func(t *testing.T) {
		if err := claims.Delete(ctx, "adv-first", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		claim, err := claims.Get(ctx, "adv-first", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("a claim in use vanished on delete: %v", err)
		}
		if claim.DeletionTimestamp == nil || claim.Status.Allocation == nil || len(claim.Status.ReservedFor) != 1 {
			t.Fatalf("claim in use after delete: deletionTimestamp %v, status %+v", claim.DeletionTimestamp, claim.Status)
		}
		// A newcomer may not join a claim that is being deleted.
		createPod(t, "adv-joiner", "adv-first")
		pending(t, "adv-joiner", "ResourceClaim adv-first is being deleted")
		deletePod(t, "adv-joiner")
	})

	t.Run("a slice withdrawn and published again under an allocation", func(t *testing.T) {
		if err := resource.ResourceSlices().Delete(ctx, slice.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		createClaim(t, "adv-second")
		createPod(t, "adv-second", "adv-second")
		pending(t, "adv-second", "usable devices")
		slice.ResourceVersion = ""
		if _, err := resource.ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The device is back, but still held by the first claim.
		pending(t, "adv-second", "already allocated")
		if got := holders(t); len(got) != 1 || got[0] != "adv-first" {
			t.Fatalf("device held by %v", got)
		}
		// Once the first pod is gone, its claim is released and deleted,
		// and the second pod gets the device.
		deletePod(t, "adv-first")
		waitFor(t, "claim adv-first deleted", func(ctx context.Context) (bool, error) {
			_, err := claims.Get(ctx, "adv-first", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		bound(t, "adv-second")
		if got := holders(t); len(got) != 1 || got[0] != "adv-second" {
			t.Fatalf("device held by %v", got)
		}
	})

	t.Run("a pod with more claims than one allocation takes", func(t *testing.T) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "adv-many-claims"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
		}
		for i := range 65 {
			name := fmt.Sprintf("adv-many-%d", i)
			createClaim(t, name)
			pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: fmt.Sprintf("c%d", i), ResourceClaimName: new(name)})
		}
		if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pending(t, pod.Name, "the pod needs 65 claims allocated, at most 64")
		deletePod(t, pod.Name)
	})

	t.Run("a pod and a pod claim with names at their limits", func(t *testing.T) {
		if _, err := resource.ResourceClaimTemplates("default").Create(ctx, &resourcev1.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "adv-template"},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
				Requests: []resourcev1.DeviceRequest{exactRequest("dev", "adv-no-such-class")}}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		podName, claimName := strings.Repeat("p", 253), strings.Repeat("c", 63)
		if _, err := pods.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: podName},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}},
				ResourceClaims: []corev1.PodResourceClaim{{Name: claimName, ResourceClaimTemplateName: new("adv-template")}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The generated claim gets a name that fits, recorded in the pod.
		var generated string
		waitFor(t, "claim generated for the pod", func(ctx context.Context) (bool, error) {
			pod, err := pods.Get(ctx, podName, metav1.GetOptions{})
			if err != nil || len(pod.Status.ResourceClaimStatuses) != 1 || pod.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
				return false, err
			}
			generated = *pod.Status.ResourceClaimStatuses[0].ResourceClaimName
			return true, nil
		})
		if _, err := claims.Get(ctx, generated, metav1.GetOptions{}); err != nil || len(generated) > 253 {
			t.Errorf("generated claim %q (%d characters): %v", generated, len(generated), err)
		}
		pending(t, podName, "adv-no-such-class")
		deletePod(t, podName)
	})

	t.Run("a generated claim deleted before it was allocated", func(t *testing.T) {
		// The claim is protected from its creation; kubectl delete of it
		// (waiting for it to go) must still finish, and the pod that
		// still waits gets a new one, which goes with the pod.
		if _, err := resource.ResourceClaimTemplates("default").Create(ctx, &resourcev1.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "adv-unallocated"},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
				Requests: []resourcev1.DeviceRequest{exactRequest("dev", "adv-no-such-class")}}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := pods.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "adv-unallocated"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}},
				ResourceClaims: []corev1.PodResourceClaim{{Name: "dev", ResourceClaimTemplateName: new("adv-unallocated")}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		generatedClaim := func(t *testing.T, not types.UID) *resourcev1.ResourceClaim {
			t.Helper()
			var found *resourcev1.ResourceClaim
			waitFor(t, "claim generated for pod adv-unallocated", func(ctx context.Context) (bool, error) {
				list, err := claims.List(ctx, metav1.ListOptions{})
				if err != nil {
					return false, err
				}
				for i := range list.Items {
					claim := &list.Items[i]
					owners := claim.OwnerReferences
					if len(owners) == 1 && owners[0].Name == "adv-unallocated" && claim.UID != not && claim.DeletionTimestamp == nil {
						found = claim
						return true, nil
					}
				}
				return false, nil
			})
			return found
		}
		first := generatedClaim(t, "")
		if !slices.Contains(first.Finalizers, resourceapi.Finalizer) || first.Status.Allocation != nil {
			t.Fatalf("claim %s: expected unallocated and protected, got allocated=%v finalizers=%v", first.Name, first.Status.Allocation != nil, first.Finalizers)
		}
		s.MustKubectl(t, "", "delete", "resourceclaims.resource.draplane.dev", first.Name, "-n", "default", "--wait=true", "--timeout=2m")
		if claim, err := claims.Get(ctx, first.Name, metav1.GetOptions{}); err == nil && claim.UID == first.UID {
			t.Fatalf("claim %s still there after kubectl delete: %+v", first.Name, claim.ObjectMeta)
		}
		second := generatedClaim(t, first.UID)
		deletePod(t, "adv-unallocated")
		waitFor(t, "claim "+second.Name+" deleted with its pod", func(ctx context.Context) (bool, error) {
			_, err := claims.Get(ctx, second.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	})

	t.Run("a taint rule on every device", func(t *testing.T) {
		rule, err := resource.DeviceTaintRules().Create(ctx, &resourcev1.DeviceTaintRule{
			ObjectMeta: metav1.ObjectMeta{Name: "adv-everything", Annotations: map[string]string{"resource.draplane.dev/confirm-select-all-devices": "true"}},
			Spec: resourcev1.DeviceTaintRuleSpec{DeviceSelector: &resourcev1.DeviceTaintSelector{},
				Taint: resourcev1.DeviceTaint{Key: "example.com/maintenance", Effect: resourcev1.DeviceTaintEffectNoSchedule}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// NoSchedule keeps the running pod; the device is free only after
		// it goes, and then the taint keeps a newcomer off it.
		deletePod(t, "adv-second")
		createClaim(t, "adv-third")
		createPod(t, "adv-third", "adv-third")
		pending(t, "adv-third", "example.com/maintenance")
		if err := resource.DeviceTaintRules().Delete(ctx, rule.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		bound(t, "adv-third")
		if got := holders(t); len(got) != 1 || got[0] != "adv-third" {
			t.Fatalf("device held by %v", got)
		}
	})

	t.Run("a class deleted and created again", func(t *testing.T) {
		deletePod(t, "adv-third")
		class, err := resource.DeviceClasses().Get(ctx, driver, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := resource.DeviceClasses().Delete(ctx, driver, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		createClaim(t, "adv-fourth")
		createPod(t, "adv-fourth", "adv-fourth")
		pending(t, "adv-fourth", `device class "`+driver+`" does not exist`)
		class.ResourceVersion = ""
		if _, err := resource.DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		bound(t, "adv-fourth")
		if got := holders(t); len(got) != 1 || got[0] != "adv-fourth" {
			t.Fatalf("device held by %v", got)
		}
	})
}
