// Package allocation runs the allocation controller, with the
// resource claim controller, against the real dra-apiserver (in-process,
// embedded etcd). The helpers here are shared by the integration tests
// and the benchmark in this directory.
package allocation

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/generated/clientset/versioned"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions"
	resourcelisters "github.com/draplane/draplane/generated/listers/resource/v1"
	"github.com/draplane/draplane/internal/controllers/allocation"
	"github.com/draplane/draplane/internal/controllers/resourceclaim"
	"github.com/draplane/draplane/internal/testing/testenv"
	"github.com/draplane/draplane/test/integration/framework"
)

const (
	// Driver publishes the devices of the tests.
	Driver = "gpu.example.com"
	// PollTimeout only keeps a broken controller from hanging the run;
	// nothing depends on how fast things happen.
	PollTimeout = 3 * time.Minute
)

// Env is one running server with both controllers attached.
type Env struct {
	Kube     kubernetes.Interface
	Resource versioned.Interface
	// Controller is the allocation controller under test.
	Controller *allocation.Controller

	// The controller's own caches: a case waits for them to show what it
	// created before it depends on the controller having seen it. An
	// acknowledged create reaches the informers a little later, in
	// kube-scheduler as here.
	nodes      corelisters.NodeLister
	slices     resourcelisters.ResourceSliceLister
	taintRules resourcelisters.DeviceTaintRuleLister
}

// StartServer runs dra-apiserver in this process without its own
// controllers: the caller starts them with StartControllers, so that a
// second set never races the one under test.
func StartServer(ctx context.Context, tb testing.TB, wg *sync.WaitGroup) *rest.Config {
	tb.Helper()
	return framework.StartServer(ctx, tb, wg, false)
}

// StartControllers runs the resource claim controller and the allocation
// controller as the server would, with workers each.
func StartControllers(ctx context.Context, tb testing.TB, wg *sync.WaitGroup, restConfig *rest.Config, workers int) *Env {
	tb.Helper()
	kube := kubernetes.NewForConfigOrDie(restConfig)
	resource := versioned.NewForConfigOrDie(restConfig)
	logger := klog.FromContext(ctx)

	kubeInformers := informers.NewSharedInformerFactory(kube, 0)
	resourceInformers := resourceinformers.NewSharedInformerFactory(resource, 0)
	claimController, err := resourceclaim.NewController(logger, kube, resource,
		kubeInformers.Core().V1().Pods(),
		resourceInformers.Resource().V1().ResourceClaims(),
		resourceInformers.Resource().V1().ResourceClaimTemplates())
	if err != nil {
		tb.Fatalf("resourceclaim.NewController: %v", err)
	}
	allocationController, err := allocation.NewController(logger, kube, resource,
		kubeInformers.Core().V1().Pods(),
		kubeInformers.Core().V1().Nodes(),
		resourceInformers.Resource().V1().ResourceClaims(),
		resourceInformers.Resource().V1().DeviceClasses(),
		resourceInformers.Resource().V1().ResourceSlices(),
		resourceInformers.Resource().V1().DeviceTaintRules(),
		allocation.Options{})
	if err != nil {
		tb.Fatalf("allocation.NewController: %v", err)
	}
	kubeInformers.Start(ctx.Done())
	resourceInformers.Start(ctx.Done())
	wg.Go(func() { claimController.Run(ctx, workers) })
	wg.Go(func() { allocationController.Run(ctx, workers) })
	wg.Go(func() {
		<-ctx.Done()
		kubeInformers.Shutdown()
		resourceInformers.Shutdown()
	})
	return &Env{Kube: kube, Resource: resource, Controller: allocationController,
		nodes:      kubeInformers.Core().V1().Nodes().Lister(),
		slices:     resourceInformers.Resource().V1().ResourceSlices().Lister(),
		taintRules: resourceInformers.Resource().V1().DeviceTaintRules().Lister(),
	}
}

// WaitNodeSeen waits until the controller's caches show the node ready
// and its slice (CreateNode's).
func (e *Env) WaitNodeSeen(ctx context.Context, tb testing.TB, name string) {
	tb.Helper()
	WaitFor(ctx, tb, "the controller's caches to show node "+name+" ready with its slice", func() (bool, error) {
		node, err := e.nodes.Get(name)
		if err != nil {
			return false, nil
		}
		if _, err := e.slices.Get(sliceName(name)); err != nil {
			return false, nil
		}
		for _, condition := range node.Status.Conditions {
			if condition.Type == corev1.NodeReady {
				return condition.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
}

// WaitTaintRuleSeen waits until the controller's caches show the rule.
func (e *Env) WaitTaintRuleSeen(ctx context.Context, tb testing.TB, name string) {
	tb.Helper()
	WaitFor(ctx, tb, "the controller's caches to show DeviceTaintRule "+name, func() (bool, error) {
		_, err := e.taintRules.Get(name)
		return err == nil, nil
	})
}

// CreateNamespace creates a namespace for one test.
func (e *Env) CreateNamespace(ctx context.Context, tb testing.TB, name string) {
	tb.Helper()
	if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		tb.Fatalf("create namespace %s: %v", name, err)
	}
}

// CreateNode creates a Ready node with the labels and publishes its
// devices in a pool named after it.
func (e *Env) CreateNode(ctx context.Context, tb testing.TB, name string, labels map[string]string, devices []resourcev1.Device) {
	tb.Helper()
	if err := e.AddNode(ctx, name, labels, devices); err != nil {
		tb.Fatal(err)
	}
}

// AddNode is CreateNode for use from several goroutines.
func (e *Env) AddNode(ctx context.Context, name string, labels map[string]string, devices []resourcev1.Device) error {
	node, err := e.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	node.Status.Conditions = []corev1.NodeCondition{{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}
	if _, err := e.Kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("report node %s ready: %w", name, err)
	}
	slice := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: sliceName(name)},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   Driver,
			Pool:     resourcev1.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1},
			NodeName: &name,
			Devices:  devices,
		},
	}
	if _, err := e.Resource.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create slice for node %s: %w", name, err)
	}
	return nil
}

// sliceName is the slice AddNode publishes for a node.
func sliceName(node string) string { return node + "-gpus" }

// GPUs returns n devices gpu-0... with the given string attributes.
func GPUs(n int, attributes map[string]string) []resourcev1.Device {
	devices := make([]resourcev1.Device, n)
	for i := range devices {
		devices[i].Name = fmt.Sprintf("gpu-%d", i)
		devices[i].Attributes = map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{}
		for key, value := range attributes {
			devices[i].Attributes[resourcev1.QualifiedName(key)] = resourcev1.DeviceAttribute{StringValue: &value}
		}
	}
	return devices
}

// CreateClass creates a device class that selects the driver's devices.
func (e *Env) CreateClass(ctx context.Context, tb testing.TB, name string) {
	tb.Helper()
	class := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + Driver + `"`},
		}}},
	}
	if _, err := e.Resource.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatalf("create device class %s: %v", name, err)
	}
}

// CreateTemplate creates a claim template with the spec.
func (e *Env) CreateTemplate(ctx context.Context, tb testing.TB, namespace, name string, spec resourcev1.ResourceClaimSpec) {
	tb.Helper()
	template := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       resourcev1.ResourceClaimTemplateSpec{Spec: spec},
	}
	if _, err := e.Resource.ResourceV1().ResourceClaimTemplates(namespace).Create(ctx, template, metav1.CreateOptions{}); err != nil {
		tb.Fatalf("create template %s: %v", name, err)
	}
}

// OneDevice asks for one device of the class.
func OneDevice(class string) resourcev1.ResourceClaimSpec {
	return resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
		Name:    "gpu",
		Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class},
	}}}}
}

// PodWithTemplate is a pod whose claim "gpu" comes from the template;
// nodeSelector keeps it on the nodes of its test.
func PodWithTemplate(namespace, name, template string, nodeSelector map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{
			NodeSelector:   nodeSelector,
			Containers:     []corev1.Container{{Name: "ctr", Image: "busybox"}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &template}},
		},
	}
}

// WaitFor polls the condition until it holds, for PollTimeout at most;
// NotFound counts as "not yet".
func WaitFor(ctx context.Context, tb testing.TB, what string, condition func() (bool, error)) {
	tb.Helper()
	testenv.WaitFor(ctx, tb, PollTimeout, what, condition)
}

// DeviceKey names an allocated device for the uniqueness check.
type DeviceKey struct{ Driver, Pool, Device string }

// DoubleAllocations lists devices that appear in more than one
// allocation, ignoring admin access and devices that allow multiple
// allocations (those results carry a share ID).
func DoubleAllocations(claims []resourcev1.ResourceClaim) []string {
	owners := map[DeviceKey]string{}
	var doubles []string
	for _, claim := range claims {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, result := range claim.Status.Allocation.Devices.Results {
			if (result.AdminAccess != nil && *result.AdminAccess) || result.ShareID != nil {
				continue
			}
			key := DeviceKey{result.Driver, result.Pool, result.Device}
			if owner, ok := owners[key]; ok {
				doubles = append(doubles, fmt.Sprintf("%s/%s/%s in %s and %s/%s", key.Driver, key.Pool, key.Device, owner, claim.Namespace, claim.Name))
				continue
			}
			owners[key] = claim.Namespace + "/" + claim.Name
		}
	}
	return doubles
}
