// Command example-driver is a DRA driver for one node, written against the
// driver library in driver/: it publishes the node's devices as
// ResourceSlices, prepares the claims of the pods bound to its node before
// they run (logging what it prepares), and unprepares them when the pods
// are done. Standalone draplane has no kubelet, so for its node it also
// plays the kubelet's part with the library's node loop (driver/nodeagent):
// it registers the Node and keeps it Ready, removes the node's slices of
// its driver at start (so none of its orphans survive), marks a pod Running once every
// claim is prepared and keeps a checkpoint of what it prepared. A claim annotated
// example.draplane.dev/prepare-error fails to prepare with the
// annotation's value, which keeps its pod Pending with an event.
//
// It runs with the node's identity, which the server restricts to the
// node's objects and the driver's slices:
//
//	dra-apiserver client-kubeconfig --user draplane:node:node-1 --group draplane:nodes \
//	  --group draplane:driver:gpu.example.com -o node-1.kubeconfig
//	example-driver --kubeconfig=node-1.kubeconfig --node-name=node-1 --devices=4
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/driver"
	"github.com/draplane/draplane/driver/nodeagent"
	"github.com/draplane/draplane/generated/clientset/versioned"
)

// AnnotationPrepareError on a claim makes this driver fail to prepare it.
const AnnotationPrepareError = "example.draplane.dev/prepare-error"

func main() {
	klog.InitFlags(nil)
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the dra-apiserver with the node's identity (dra-apiserver client-kubeconfig --user draplane:node:<node> --group draplane:nodes --group draplane:driver:<driver>)")
	nodeName := flag.String("node-name", "", "the node this driver runs on; registered if it does not exist")
	driverName := flag.String("driver-name", "gpu.example.com", "the driver's name")
	devices := flag.Int("devices", 4, "how many GPUs the node has")
	checkpoint := flag.String("checkpoint", "", "file recording the prepared claims, so that a restarted driver unprepares the claims of pods deleted meanwhile and prepares nothing twice (default: draplane-example-driver-<node>.json in the temp dir)")
	flag.Parse()
	if *nodeName == "" || *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "--kubeconfig and --node-name are required")
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	logger := klog.Background().WithValues("driver", *driverName, "node", *nodeName)
	ctx = klog.NewContext(ctx, logger)
	if *checkpoint == "" {
		*checkpoint = filepath.Join(os.TempDir(), "draplane-example-driver-"+*nodeName+".json")
	}
	if err := run(ctx, *kubeconfig, *nodeName, *driverName, *devices, *checkpoint); err != nil && ctx.Err() == nil {
		logger.Error(err, "Driver failed")
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, nodeName, driverName string, devices int, checkpoint string) error {
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
	removed, err := driver.RemoveNodeSlices(ctx, resourceClient, nodeName)
	if err != nil {
		return err
	}
	node, err := nodeagent.RegisterNode(ctx, kubeClient, nodeName, "example-driver")
	if err != nil {
		return err
	}
	publisher, err := driver.NewPublisher(resourceClient, driver.Options{DriverName: driverName, NodeName: nodeName})
	if err != nil {
		return err
	}
	// Above the generation of the slices just removed: a consumer that
	// missed the deletes takes the new slices as newer.
	publisher.Update(driver.Pool{Name: nodeName, NodeName: nodeName, Devices: gpus(devices), Owner: driver.NodeOwner(node),
		MinGeneration: removed.MinGeneration(driverName, nodeName)})
	go publisher.Run(ctx)
	go func() {
		select {
		case <-publisher.Synced():
			logger.Info("Published the node's devices", "devices", devices)
		case <-ctx.Done():
		}
	}()

	// The pods bound to this node, and every claim (a pod's claims may
	// live in any namespace it runs in).
	factory := informers.NewSharedInformerFactoryWithOptions(kubeClient, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
	}))
	// Claims are got by name, as a kubelet does: a node's identity may
	// not list them.
	claims := nodeagent.ClaimsFromClient(func(string) versioned.Interface { return resourceClient })
	agent, err := nodeagent.New(logger, kubeClient, factory.Core().V1().Pods(), claims, nodeagent.Options{
		Name:       "example-driver",
		Nodes:      []string{nodeName},
		Drivers:    nodeagent.DriverMap{driverName: &preparer{driverName: driverName}},
		Checkpoint: checkpoint,
	})
	if err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	go nodeagent.KeepReady(ctx, kubeClient, nodeName, "example-driver", time.Minute)
	agent.Run(ctx, 2)
	return nil
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
