// Command upstreamdriver is a DRA driver built on upstream's library only,
// k8s.io/dynamic-resource-allocation/kubeletplugin used as a real driver
// uses it: kubeletplugin.Start serves the kubelet's registration and DRA
// gRPC APIs, Helper.PublishResources writes its ResourceSlices (one pool
// of --devices devices on its node). It is a separate module that never
// imports draplane: it proves that a node agent built on
// driver/grpcplugin runs unmodified upstream drivers (test/e2e).
//
// Every NodePrepareResources and NodeUnprepareResources call prints one
// line to stdout, "PREPARE claims=<ns>/<name>,..." or
// "UNPREPARE claims=...", so that a test can count calls. A claim prepares
// to CDI IDs "<driver>/gpu=<device>", one per allocated device; a claim
// annotated "upstream.example.com/prepare-error: <message>" fails with
// that message (the other claims of the call succeed). With --cdi-dir a
// prepared claim gets a CDI spec file there, "<driver>-<claim UID>.json",
// describing its devices (written to a temporary file and renamed), and
// an unprepare removes it; a claim with no file is unprepared all the
// same. The file is written before the PREPARE line is printed and
// removed before the UNPREPARE line. Device health
// (kubeletplugin's WatchHealthStatus) reports every device Healthy, and
// the one named by --unhealthy-device Unhealthy, resent every 10 seconds.
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

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
)

// PrepareErrorAnnotation on a claim makes its prepare fail with the value.
const PrepareErrorAnnotation = "upstream.example.com/prepare-error"

func main() {
	var (
		nodeName        = flag.String("node-name", "", "the node the driver runs on (required; the Node object must exist)")
		driverName      = flag.String("driver-name", "upstream.example.com", "the DRA driver name")
		deviceCount     = flag.Int("devices", 4, "how many devices to publish (gpu-0, gpu-1, ...)")
		kubeconfig      = flag.String("kubeconfig", "", "kubeconfig of the API server (empty: in-cluster)")
		registrarDir    = flag.String("registrar-dir", kubeletplugin.KubeletRegistryDir, "the kubelet's plugin registration directory")
		pluginDir       = flag.String("plugin-dir", "", "the plugin's data directory, where dra.sock goes (default /var/lib/kubelet/plugins/<driver name>)")
		unhealthyDevice = flag.String("unhealthy-device", "", "report this device Unhealthy (the others Healthy)")
		cdiDir          = flag.String("cdi-dir", "", "write a CDI spec file per prepared claim here, removed on unprepare (empty: none)")
	)
	klog.InitFlags(nil)
	flag.Parse()
	if *nodeName == "" {
		fmt.Fprintln(os.Stderr, "--node-name is required")
		os.Exit(2)
	}
	if *pluginDir == "" {
		*pluginDir = kubeletplugin.KubeletPluginsDir + "/" + *driverName
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancelCause(ctx)
	logger := klog.Background()
	ctx = klog.NewContext(ctx, logger)
	if err := run(ctx, cancel, *nodeName, *driverName, *deviceCount, *kubeconfig, *registrarDir, *pluginDir, *unhealthyDevice, *cdiDir); err != nil {
		logger.Error(err, "upstreamdriver failed")
		os.Exit(1)
	}
}

func run(ctx context.Context, cancel context.CancelCauseFunc, nodeName, driverName string, deviceCount int, kubeconfig, registrarDir, pluginDir, unhealthyDevice, cdiDir string) error {
	logger := klog.FromContext(ctx)
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	for _, dir := range []string{registrarDir, pluginDir, cdiDir} {
		if dir == "" {
			continue
		}
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return err
		}
	}
	d := &driver{name: driverName, node: nodeName, cancel: cancel, unhealthy: unhealthyDevice, cdi: cdiSpecs{dir: cdiDir, driver: driverName}}
	for i := range deviceCount {
		d.devices = append(d.devices, fmt.Sprintf("gpu-%d", i))
	}
	helper, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.KubeClient(kube),
		kubeletplugin.NodeName(nodeName),
		kubeletplugin.DriverName(driverName),
		kubeletplugin.RegistrarDirectoryPath(registrarDir),
		kubeletplugin.PluginDataDirectoryPath(pluginDir),
	)
	if err != nil {
		return fmt.Errorf("start the kubelet plugin: %w", err)
	}
	defer helper.Stop()

	var devices []resourceapi.Device
	for i, name := range d.devices {
		devices = append(devices, resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"index": {IntValue: ptr(int64(i))},
		}})
	}
	if err := helper.PublishResources(ctx, resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		nodeName: {Slices: []resourceslice.Slice{{Devices: devices}}},
	}}); err != nil {
		return fmt.Errorf("publish resources: %w", err)
	}
	logger.Info("Started", "driverName", driverName, "nodeName", nodeName, "devices", len(devices), "registrarDir", registrarDir, "pluginDir", pluginDir, "cdiDir", cdiDir)
	<-ctx.Done()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

type driver struct {
	name, node string
	devices    []string
	unhealthy  string
	cdi        cdiSpecs
	cancel     context.CancelCauseFunc
}

var _ kubeletplugin.DRAPlugin = &driver{}

func claimNames(names []string) string { return strings.Join(names, ",") }

func (d *driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	var names []string
	result := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		names = append(names, claim.Namespace+"/"+claim.Name)
		if msg, ok := claim.Annotations[PrepareErrorAnnotation]; ok {
			result[claim.UID] = kubeletplugin.PrepareResult{Err: errors.New(msg)}
			continue
		}
		var prepared []kubeletplugin.Device
		var devices []string
		if claim.Status.Allocation != nil {
			for _, r := range claim.Status.Allocation.Devices.Results {
				if r.Driver != d.name {
					continue
				}
				devices = append(devices, r.Device)
				prepared = append(prepared, kubeletplugin.Device{
					Requests:     []string{r.Request},
					PoolName:     r.Pool,
					DeviceName:   r.Device,
					CDIDeviceIDs: []string{d.name + "/gpu=" + r.Device},
				})
			}
		}
		if err := d.cdi.write(claim.UID, devices); err != nil {
			result[claim.UID] = kubeletplugin.PrepareResult{Err: err}
			continue
		}
		result[claim.UID] = kubeletplugin.PrepareResult{Devices: prepared}
	}
	fmt.Printf("PREPARE claims=%s\n", claimNames(names))
	return result, nil
}

func (d *driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	var names []string
	result := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		names = append(names, claim.Namespace+"/"+claim.Name)
		result[claim.UID] = d.cdi.remove(claim.UID)
	}
	fmt.Printf("UNPREPARE claims=%s\n", claimNames(names))
	return result, nil
}

// HandleError logs; a fatal error ends the driver.
func (d *driver) HandleError(ctx context.Context, err error, msg string) {
	runtime.HandleErrorWithContext(ctx, err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		d.cancel(fmt.Errorf("fatal background error: %s: %w", msg, err))
	}
}

// WatchHealthStatus reports every device, resending within the kubelet's
// default 30s lease.
func (d *driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	ticker := time.NewTicker(10 * time.Second)
	defer ticker.Stop()
	for {
		report := kubeletplugin.DeviceHealthReport{}
		for _, name := range d.devices {
			h := kubeletplugin.DeviceHealth{PoolName: d.node, DeviceName: name, Health: kubeletplugin.HealthStatusHealthy, LastUpdated: time.Now()}
			if name == d.unhealthy {
				h.Health, h.Message = kubeletplugin.HealthStatusUnhealthy, "marked unhealthy by --unhealthy-device"
			}
			report.Devices = append(report.Devices, h)
		}
		select {
		case <-ctx.Done():
			return nil
		case reports <- report:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}
