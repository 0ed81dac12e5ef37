// Command example-driver is a DRA driver for one node, written against the
// driver library in driver/: it publishes the node's devices as
// ResourceSlices, prepares the claims of the pods bound to its node before
// they run (logging what it prepares), and unprepares them when the pods
// are done. Standalone draplane has no kubelet, so for its node it also
// plays the kubelet's part: it registers the Node, removes the node's
// slices at start (so no driver's orphans survive), and marks a pod
// Running once every claim is prepared. A claim annotated
// example.draplane.dev/prepare-error fails to prepare with the
// annotation's value, which keeps its pod Pending with an event.
//
//	example-driver --kubeconfig=.draplane/admin.kubeconfig --node-name=node-1 --devices=4
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/driver"
	"github.com/draplane/draplane/generated/clientset/versioned"
)

// AnnotationPrepareError on a claim makes this driver fail to prepare it.
const AnnotationPrepareError = "example.draplane.dev/prepare-error"

func main() {
	klog.InitFlags(nil)
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the dra-apiserver (for example .draplane/admin.kubeconfig after make run)")
	nodeName := flag.String("node-name", "", "the node this driver runs on; registered if it does not exist")
	driverName := flag.String("driver-name", "gpu.example.com", "the driver's name")
	devices := flag.Int("devices", 4, "how many GPUs the node has")
	flag.Parse()
	if *nodeName == "" || *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "--kubeconfig and --node-name are required")
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	logger := klog.Background().WithValues("driver", *driverName, "node", *nodeName)
	ctx = klog.NewContext(ctx, logger)
	if err := run(ctx, *kubeconfig, *nodeName, *driverName, *devices); err != nil && ctx.Err() == nil {
		logger.Error(err, "Driver failed")
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, nodeName, driverName string, devices int) error {
	logger := klog.FromContext(ctx)
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	kubeClient, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	resourceClient, err := versioned.NewForConfig(config)
	if err != nil {
		return err
	}

	// The node agent's clean start: every slice of the node goes, then
	// the drivers publish again.
	if _, err := driver.RemoveNodeSlices(ctx, resourceClient, nodeName); err != nil {
		return err
	}
	node, err := registerNode(ctx, kubeClient, nodeName)
	if err != nil {
		return err
	}
	publisher, err := driver.NewPublisher(resourceClient, driver.Options{DriverName: driverName, NodeName: nodeName})
	if err != nil {
		return err
	}
	publisher.Update(driver.Pool{Name: nodeName, NodeName: nodeName, Devices: gpus(devices), Owner: driver.NodeOwner(node)})
	go publisher.Run(ctx)
	go func() {
		select {
		case <-publisher.Synced():
			logger.Info("Published the node's devices", "devices", devices)
		case <-ctx.Done():
		}
	}()

	a := &agent{
		nodeName:       nodeName,
		driverName:     driverName,
		kubeClient:     kubeClient,
		resourceClient: resourceClient,
		preparer:       &preparer{driverName: driverName},
		prepared:       map[string][]driver.NamespacedObject{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "example-driver"}),
	}
	return a.run(ctx)
}

// registerNode returns the node, creating it Ready when it does not exist.
func registerNode(ctx context.Context, client kubernetes.Interface, name string) (*corev1.Node, error) {
	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return node, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	node, err = client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("register node %s: %w", name, err)
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "DriverRegistered",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	return client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
}

// gpus are the node's devices.
func gpus(n int) []resourcev1.Device {
	out := make([]resourcev1.Device, n)
	for i := range out {
		out[i] = resourcev1.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"model": {StringValue: ptr.To("EXAMPLE-GPU")},
				"index": {IntValue: ptr.To(int64(i))},
			},
		}
	}
	return out
}

// preparer is the driver's side: it has nothing to set up, so it logs
// what it would hand the container and answers per claim.
type preparer struct {
	driverName string
}

func (p *preparer) PrepareResourceClaims(ctx context.Context, claims []*resourcev1.ResourceClaim) (map[types.UID]driver.PrepareResult, error) {
	logger := klog.FromContext(ctx)
	results := map[types.UID]driver.PrepareResult{}
	for _, claim := range claims {
		if msg, ok := claim.Annotations[AnnotationPrepareError]; ok {
			results[claim.UID] = driver.PrepareResult{Err: errors.New(msg)}
			continue
		}
		var prepared []driver.PreparedDevice
		var names []string
		for _, r := range driver.AllocatedDevices(claim, p.driverName) {
			prepared = append(prepared, driver.PreparedDevice{Request: r.Request, Pool: r.Pool, Device: r.Device,
				CDIDeviceIDs: []string{p.driverName + "/gpu=" + r.Device}})
			names = append(names, r.Device)
		}
		logger.Info("Prepared claim", "claim", klog.KObj(claim), "devices", strings.Join(names, ","))
		results[claim.UID] = driver.PrepareResult{Devices: prepared}
	}
	return results, nil
}

func (p *preparer) UnprepareResourceClaims(ctx context.Context, claims []driver.NamespacedObject) (map[types.UID]error, error) {
	results := map[types.UID]error{}
	for _, claim := range claims {
		klog.FromContext(ctx).Info("Unprepared claim", "claim", claim.NamespacedName.String())
		results[claim.UID] = nil
	}
	return results, nil
}

// run plays the kubelet for the pods on the node until ctx ends: one
// worker, so a pod's prepare and unprepare never overlap.
func (a *agent) run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(a.kubeClient, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", a.nodeName).String()
	}))
	pods := factory.Core().V1().Pods()
	a.podLister = pods.Lister()
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			a.queue.Add(key)
		}
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue,
	}); err != nil {
		return err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: a.kubeClient.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	a.recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: a.driverName, Host: a.nodeName})
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), pods.Informer().HasSynced) {
		return ctx.Err()
	}
	// Claims change without the pod changing: look at pending pods again
	// now and then.
	go func() {
		ticker := time.NewTicker(2 * time.Second)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				a.queue.ShutDown()
				return
			case <-ticker.C:
				for _, key := range pods.Informer().GetStore().ListKeys() {
					a.queue.Add(key)
				}
			}
		}
	}()
	logger := klog.FromContext(ctx)
	logger.Info("Driver running")
	for {
		key, shutdown := a.queue.Get()
		if shutdown {
			return nil
		}
		if err := a.sync(ctx, key); err != nil {
			utilruntime.HandleErrorWithContext(ctx, err, "Pod not ready yet", "pod", key)
			a.queue.AddRateLimited(key)
		} else {
			a.queue.Forget(key)
		}
		a.queue.Done(key)
	}
}
