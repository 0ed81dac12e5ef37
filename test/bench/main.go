// Command bench runs the end-to-end benchmark (`make bench-e2e`): it
// starts the real dra-apiserver binary with its embedded etcd and reports,
// in one run:
//
//   - exec to /readyz, on a fresh data dir and on a restart (median of 5
//     each, -startups);
//   - ResourceClaims created per second through the API with 1 and with 100
//     concurrent clients (each its own connection), beside raw puts per
//     second of values of the same size straight into the same embedded
//     etcd (its client URL is read from the server's -v=2 log line
//     "Embedded etcd ready"), and the ratio of the two;
//   - pods with template claims bound per second on simulated nodes
//     (default 500 nodes x 8 GPUs, 2,500 pods), the server's CPU per pod,
//     and the API writes, etcd requests and watch events per pod;
//   - the server's RSS and live heap (after a forced GC, split by owner)
//     after that, and after loading claims up to 10,000 beside the 500
//     slices;
//   - the server's CPU per claim allocation or release with 5,000 pools
//     and a watch of resourcepools open, and how many pools each event
//     made it count again.
//
// It is not a test: numbers vary with the machine; nothing is asserted
// beyond the work having been done.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/generated/clientset/versioned"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions"
	"github.com/draplane/draplane/test/launcher"
)

type config struct {
	binary         string
	workDir        string
	serialClaims   int
	parallelClaims int
	clients        int
	nodes          int
	devices        int
	pods           int
	gangs          int
	gangSize       int
	gangGPUs       int
	totalClaims    int
	pools          int
	poolEvents     int
	only           string
	startups       int
	profile        profiler
	// protobuf, watchClaims and simulatePods shape the pods phase (see
	// README.md, "Side by side with the upstream stack").
	protobuf     bool
	watchClaims  bool
	simulatePods bool
}

func main() {
	var c config
	flag.StringVar(&c.binary, "binary", "_output/bin/dra-apiserver", "dra-apiserver binary to start")
	flag.StringVar(&c.workDir, "work-dir", "", "Directory for the servers' data dirs (default: a temporary directory); put it on the disk to measure")
	flag.IntVar(&c.serialClaims, "serial-claims", 1000, "Claims created by one client")
	flag.IntVar(&c.parallelClaims, "parallel-claims", 5000, "Claims created by the concurrent clients")
	flag.IntVar(&c.clients, "clients", 100, "Concurrent clients")
	flag.IntVar(&c.nodes, "nodes", 500, "Simulated nodes for the binding benchmark")
	flag.IntVar(&c.devices, "devices-per-node", 8, "GPUs per simulated node")
	flag.IntVar(&c.pods, "pods", 2500, "Pods with a template claim each")
	flag.IntVar(&c.gangs, "gangs", 100, "PodGroups (gangs) of the gang workload, all of which fit; as many again, of which only some fit, follow")
	flag.IntVar(&c.gangSize, "gang-size", 16, "Pods per gang, and its minCount")
	flag.IntVar(&c.gangGPUs, "gang-gpus", 2, "GPUs claimed by each pod of a gang")
	flag.IntVar(&c.totalClaims, "total-claims", 10000, "Claims in the store when the last RSS is taken")
	flag.IntVar(&c.pools, "pools", 5000, "Pools (one slice each) for the resourcepools benchmark")
	flag.IntVar(&c.poolEvents, "pool-events", 500, "Claims allocated and released per round of the resourcepools benchmark")
	flag.StringVar(&c.only, "only", "", "Run only this part: startups, claims, pods, gangs, resourcepools")
	flag.IntVar(&c.startups, "startups", 5, "Fresh starts and restarts whose median time to /readyz is reported")
	flag.BoolVar(&c.protobuf, "protobuf", false, "Pods phase: the clients send and accept protobuf instead of JSON (as ../shared/peer's drabench does by default)")
	flag.BoolVar(&c.watchClaims, "watch-claims", false, "Pods phase: an informer of the pods' claims runs beside the pods' (as drabench's does)")
	flag.BoolVar(&c.simulatePods, "simulate-pods", true, "Pods phase: the simulated nodes mark the pods Running; false starts the server with --simulate-pods=false, nodes without a kubelet like the upstream stack's in ../shared/peer")
	flag.StringVar(&c.profile.dir, "profile-dir", "", "Save the server's CPU profiles of the concurrent claim creates and of the pods phase, and heap profiles after the pods phase, into this directory")
	flag.IntVar(&c.profile.seconds, "profile-seconds", 10, "Length of the CPU profiles, taken from the first concurrent claim create and from the first pod create (-profile-dir)")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "bench-e2e:", err)
		os.Exit(1)
	}
}

func run(c config) error {
	start := time.Now()
	if c.workDir == "" {
		dir, err := os.MkdirTemp("", "draplane-bench-e2e")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		c.workDir = dir
	}
	binary, err := filepath.Abs(c.binary)
	if err != nil {
		return err
	}
	c.binary = binary
	c.startups = max(c.startups, 1)
	report("machine", fmt.Sprintf("%d CPUs; data dirs in %s", runtime.NumCPU(), c.workDir))
	switch c.only {
	case "startups":
		return benchStartups(c)
	case "resourcepools":
		return benchResourcePools(c)
	case "pods":
		return benchPods(c)
	case "gangs":
		return benchGangs(c)
	case "claims":
		s, err := startServer(c.binary, filepath.Join(c.workDir, "claims"), "-v=2")
		if err != nil {
			return err
		}
		defer s.stop()
		return benchClaims(c, s)
	}

	// 1. Startup, without the simulator: what `dra-apiserver` alone costs.
	s, err := benchStartup(c)
	if err != nil {
		return err
	}
	defer s.stop()
	report("RSS idle", s.rssReport())
	report("live heap idle (after a forced GC; sampled split by owner)", s.heapReport(context.Background()))

	// 2. Claims through the API beside raw etcd puts of the same size.
	if err := benchClaims(c, s); err != nil {
		return err
	}
	s.stop()

	// 3. Pods bound on simulated nodes, then RSS with many claims.
	if err := benchPods(c); err != nil {
		return err
	}

	// 4. Gangs placed all or nothing on simulated nodes.
	if err := benchGangs(c); err != nil {
		return err
	}

	// 5. Watching resourcepools with many pools.
	if err := benchResourcePools(c); err != nil {
		return err
	}
	report("total run time", seconds(time.Since(start)))
	return nil
}

// benchStartup starts the binary c.startups times on a fresh data dir and
// as often again on the same data dirs, and reports the median seconds
// from exec to /readyz of each, with every value. It returns the last
// server, still running.
func benchStartup(c config) (*server, error) {
	var fresh, restart []time.Duration
	var s *server
	for i := range c.startups {
		dataDir := filepath.Join(c.workDir, fmt.Sprintf("plain-%d", i))
		var err error
		if s, err = startServer(c.binary, dataDir, "-v=2"); err != nil {
			return nil, err
		}
		fresh = append(fresh, s.ready)
		s.stop()
		if s, err = startServer(c.binary, dataDir, "-v=2"); err != nil {
			return nil, err
		}
		restart = append(restart, s.ready)
		if i < c.startups-1 {
			s.stop()
		}
	}
	report("exec to /readyz, fresh data dir (median)", medianReport(fresh))
	report("exec to /readyz, restart on the same data dir (median)", medianReport(restart))
	return s, nil
}

// benchStartups measures only the starts: plain (fresh and restart, as in
// step 1) and once with the simulated nodes of the pods benchmark.
func benchStartups(c config) error {
	s, err := benchStartup(c)
	if err != nil {
		return err
	}
	s.stop()
	s, err = startServer(c.binary, filepath.Join(c.workDir, "simulated"), "-v=1",
		fmt.Sprintf("--simulate-nodes=%d", c.nodes), fmt.Sprintf("--simulate-devices-per-node=%d", c.devices))
	if err != nil {
		return err
	}
	defer s.stop()
	report(fmt.Sprintf("exec to /readyz with %d simulated nodes x %d GPUs", c.nodes, c.devices), seconds(s.ready))
	return nil
}

// medianReport is the median of ds with all the values, in seconds.
func medianReport(ds []time.Duration) string {
	values := make([]string, len(ds))
	for i, d := range ds {
		values[i] = fmt.Sprintf("%.2f", d.Seconds())
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	return fmt.Sprintf("%s (%s)", seconds(sorted[len(sorted)/2]), strings.Join(values, ", "))
}

func benchClaims(c config, s *server) error {
	ctx := context.Background()
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{s.etcdURL}, DialTimeout: 10 * time.Second})
	if err != nil {
		return fmt.Errorf("connect to the embedded etcd at %s: %w", s.etcdURL, err)
	}
	defer etcd.Close()
	if err := createNamespace(ctx, s, "bench-claims"); err != nil {
		return err
	}

	cpuBegin := s.cpuSeconds()
	serial, err := createClaims(ctx, s, "bench-claims", "serial", c.serialClaims, 1)
	if err != nil {
		return err
	}
	serialCPU := s.cpuSeconds() - cpuBegin
	size, err := storedClaimSize(ctx, etcd)
	if err != nil {
		return err
	}
	report("stored size of one claim in etcd", fmt.Sprintf("%d bytes", size))
	cpuProfile := c.profile.cpu(ctx, s, "cpu-claims.pprof")
	cpuBegin = s.cpuSeconds()
	parallel, err := createClaims(ctx, s, "bench-claims", "parallel", c.parallelClaims, c.clients)
	parallelCPU := s.cpuSeconds() - cpuBegin
	cpuProfile()
	if err != nil {
		return err
	}
	rawSerial, err := rawPuts(ctx, etcd, "serial", c.serialClaims, 1, size)
	if err != nil {
		return err
	}
	rawParallel, err := rawPuts(ctx, etcd, "parallel", c.parallelClaims, c.clients, size)
	if err != nil {
		return err
	}
	report("claims created/s, 1 client", fmt.Sprintf("%.0f/s (%d claims); raw etcd puts %.0f/s; API/etcd %.2f", serial, c.serialClaims, rawSerial, serial/rawSerial))
	report(fmt.Sprintf("claims created/s, %d clients", c.clients), fmt.Sprintf("%.0f/s (%d claims); raw etcd puts %.0f/s; API/etcd %.2f", parallel, c.parallelClaims, rawParallel, parallel/rawParallel))
	report("server CPU per claim created (process utime+stime during the creates / claims)",
		fmt.Sprintf("%.3f ms with 1 client, %.3f ms with %d clients", serialCPU*1000/float64(c.serialClaims), parallelCPU*1000/float64(c.parallelClaims), c.clients))
	report(fmt.Sprintf("RSS after %d claims, no slices", c.serialClaims+c.parallelClaims), mib(s.rss()))
	return nil
}

func benchPods(c config) error {
	ctx := context.Background()
	args := []string{"-v=1", fmt.Sprintf("--simulate-nodes=%d", c.nodes), fmt.Sprintf("--simulate-devices-per-node=%d", c.devices)}
	if !c.simulatePods {
		// Only when asked: binaries older than the flag, compared
		// with newer ones, start as before.
		args = append(args, "--simulate-pods=false")
	}
	s, err := startServer(c.binary, filepath.Join(c.workDir, "simulated"), args...)
	if err != nil {
		return err
	}
	defer s.stop()
	encoding, informers := "JSON", "pods"
	if c.protobuf {
		s.useProtobuf()
		encoding = "protobuf"
	}
	if c.watchClaims {
		informers = "pods and claims"
	}
	report("pods phase", fmt.Sprintf("%d clients in %s; informers of %s; simulated nodes run the pods: %t",
		c.clients, encoding, informers, c.simulatePods))
	// /readyz waits for the simulated nodes and their slices.
	report(fmt.Sprintf("exec to /readyz with %d simulated nodes x %d GPUs", c.nodes, c.devices), seconds(s.ready))
	if err := createGPUTemplate(ctx, s, "bench-pods", "one-gpu", 1); err != nil {
		return err
	}
	watch, err := watchBound(s, c.pods)
	if err != nil {
		return err
	}
	defer watch.stop()
	if c.watchClaims {
		if err := watchClaims(s, "bench-pods", watch.done); err != nil {
			return err
		}
	}

	countersBefore, err := scrapeCounters(ctx, s)
	if err != nil {
		return err
	}
	c.profile.heap(ctx, s, "heap-pods-start.pprof")
	cpuBegin := s.cpuSeconds()
	begin := time.Now()
	cpuProfile := c.profile.cpu(ctx, s, "cpu-pods.pprof")
	created, err := createPods(ctx, s, c)
	if err != nil {
		return err
	}
	createdAt := time.Since(begin)
	at, err := watch.wait(begin)
	if err != nil {
		return err
	}
	cpu := s.cpuSeconds() - cpuBegin
	countersAfter, err := scrapeCounters(ctx, s)
	if err != nil {
		return err
	}
	d := at.Sub(begin)
	report(fmt.Sprintf("pods with template claims bound/s (%d pods, %d nodes x %d GPUs)", c.pods, c.nodes, c.devices),
		fmt.Sprintf("%.0f/s (all bound %.1fs after the first create; creates took %.1fs at %.0f/s)", float64(c.pods)/d.Seconds(), d.Seconds(), createdAt.Seconds(), created))
	report("server CPU per placed pod (process utime+stime during the pods phase / pods)",
		fmt.Sprintf("%.2f ms (%.1f CPU-s in %.1fs)", cpu*1000/float64(c.pods), cpu, d.Seconds()))
	reportPerPod(countersBefore, countersAfter, c.pods)
	cpuProfile()
	if err := checkNoDeviceTwice(ctx, s, "bench-pods", c.pods); err != nil {
		return err
	}
	time.Sleep(5 * time.Second) // let the simulator's Running updates settle
	scheduled, settled, err := settledEvents(ctx, s, "bench-pods", "Scheduled")
	if err != nil {
		return err
	}
	report("Scheduled events recorded (events are best effort)", fmt.Sprintf("%d of %d pods, the last %.0fs after the last pod was bound", scheduled, c.pods, time.Since(at).Seconds()-settled.Seconds()))
	report(fmt.Sprintf("RSS after %d pods bound, %d claims, %d slices", c.pods, c.pods, c.nodes), s.rssReport())
	report(fmt.Sprintf("live heap after %d pods bound, %d claims, %d slices", c.pods, c.pods, c.nodes), s.heapReport(ctx))
	c.profile.heap(ctx, s, "heap-pods.pprof")

	more := c.totalClaims - c.pods
	if more > 0 {
		if err := createNamespace(ctx, s, "bench-claims"); err != nil {
			return err
		}
		if _, err := createClaims(ctx, s, "bench-claims", "load", more, c.clients); err != nil {
			return err
		}
	}
	time.Sleep(5 * time.Second)
	report(fmt.Sprintf("RSS after loading %d claims and %d slices (+%d pods, %d nodes)", c.totalClaims, c.nodes, c.pods, c.nodes), s.rssReport())
	report(fmt.Sprintf("live heap after loading %d claims and %d slices (+%d pods, %d nodes)", c.totalClaims, c.nodes, c.pods, c.nodes), s.heapReport(ctx))
	c.profile.heap(ctx, s, "heap-claims.pprof")
	return nil
}

// settledEvents counts the events of a reason until the count stays the
// same for 3s (at most 60s), and says how long ago it last changed.
func settledEvents(ctx context.Context, s *server, namespace, reason string) (int, time.Duration, error) {
	last, lastChange := -1, time.Now()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		n, err := countEvents(ctx, s, namespace, reason)
		if err != nil {
			return 0, 0, err
		}
		if n != last {
			last, lastChange = n, time.Now()
		} else if time.Since(lastChange) >= 3*time.Second {
			break
		}
	}
	return last, time.Since(lastChange), nil
}

// countEvents counts the events of a reason in a namespace, a page at a
// time.
func countEvents(ctx context.Context, s *server, namespace, reason string) (int, error) {
	n := 0
	opts := metav1.ListOptions{FieldSelector: "reason=" + reason, Limit: 1000}
	for {
		list, err := s.kube.CoreV1().Events(namespace).List(ctx, opts)
		if err != nil {
			return 0, fmt.Errorf("list events: %w", err)
		}
		n += len(list.Items)
		if list.Continue == "" {
			return n, nil
		}
		opts.Continue = list.Continue
	}
}

// createGPUTemplate creates the simulated GPUs' class, the namespace and
// in it a claim template named name for gpus GPUs.
func createGPUTemplate(ctx context.Context, s *server, namespace, name string, gpus int64) error {
	class := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu.sim.draplane.dev"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "gpu.sim.draplane.dev"`},
		}}},
	}
	if _, err := s.resource.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create device class: %w", err)
	}
	if err := createNamespace(ctx, s, namespace); err != nil {
		return err
	}
	template := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: class.Name, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: gpus}}},
		}}},
	}
	if _, err := s.resource.ResourceV1().ResourceClaimTemplates(namespace).Create(ctx, template, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create template: %w", err)
	}
	return nil
}

// claimPod is a pod whose container uses claim, made from template.
func claimPod(namespace, name, claim, template string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "main", Image: "busybox",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: claim}}}}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: claim, ResourceClaimTemplateName: ptr.To(template)}},
		},
	}
}

// createPods creates the pods, each with a claim from the template, and
// returns how many were created per second.
func createPods(ctx context.Context, s *server, c config) (float64, error) {
	return parallel(ctx, c.pods, c.clients, func(ctx context.Context, i int) error {
		pod := claimPod("bench-pods", fmt.Sprintf("pod-%d", i), "gpu", "one-gpu")
		_, err := s.kubeFor(i%c.clients).CoreV1().Pods("bench-pods").Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
}

// boundWatch counts the pods of bench-pods that are bound, with an
// informer started before the first pod (a bare watch may be closed by
// the server when it falls behind).
type boundWatch struct {
	pods  int
	bound chan time.Time
	count atomic.Int64
	mu    sync.Mutex
	seen  map[string]bool
	done  chan struct{}
}

func watchBound(s *server, pods int) (*boundWatch, error) {
	w := &boundWatch{pods: pods, bound: make(chan time.Time, 1), seen: map[string]bool{}, done: make(chan struct{})}
	if err := watchPods(s, "bench-pods", w.onPod, w.done); err != nil {
		return nil, err
	}
	return w, nil
}

// watchPods calls onPod with every pod of the namespace as it is added
// or updated, until done is closed. It returns once the informer synced;
// after an error done is closed already.
func watchPods(s *server, namespace string, onPod func(any), done chan struct{}) error {
	factory := informers.NewSharedInformerFactoryWithOptions(s.kube, 0, informers.WithNamespace(namespace))
	podInformer := factory.Core().V1().Pods().Informer()
	if _, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onPod,
		UpdateFunc: func(_, obj any) { onPod(obj) },
	}); err != nil {
		close(done)
		return err
	}
	factory.Start(done)
	if !cache.WaitForCacheSync(done, podInformer.HasSynced) {
		close(done)
		return errors.New("pod informer did not sync")
	}
	return nil
}

// watchClaims runs an informer of the namespace's claims, which does
// nothing with them, until done is closed: the load of a client that
// follows the claims. It returns once the informer synced.
func watchClaims(s *server, namespace string, done chan struct{}) error {
	factory := resourceinformers.NewSharedInformerFactoryWithOptions(s.resource, 0, resourceinformers.WithNamespace(namespace))
	informer := factory.Resource().V1().ResourceClaims().Informer()
	factory.Start(done)
	if !cache.WaitForCacheSync(done, informer.HasSynced) {
		return errors.New("claim informer did not sync")
	}
	return nil
}

func (w *boundWatch) onPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen[pod.Name] {
		return
	}
	w.seen[pod.Name] = true
	w.count.Store(int64(len(w.seen)))
	if len(w.seen) == w.pods {
		w.bound <- time.Now()
	}
}

func (w *boundWatch) stop() { close(w.done) }

// wait returns when the last pod was seen bound, printing progress every
// ten seconds; it gives up after five minutes.
func (w *boundWatch) wait(begin time.Time) (time.Time, error) {
	progress := time.NewTicker(10 * time.Second)
	defer progress.Stop()
	timeout := time.After(5 * time.Minute)
	for {
		select {
		case <-progress.C:
			fmt.Fprintf(os.Stderr, "  %d of %d pods bound after %.0fs\n", w.count.Load(), w.pods, time.Since(begin).Seconds())
		case at := <-w.bound:
			return at, nil
		case <-timeout:
			return time.Time{}, fmt.Errorf("only %d of %d pods bound within 5 minutes", w.count.Load(), w.pods)
		}
	}
}

// checkNoDeviceTwice: want claims are allocated (those of pods that
// wait are not), no device twice.
func checkNoDeviceTwice(ctx context.Context, s *server, namespace string, want int) error {
	var claims *resourcev1.ResourceClaimList
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		claims, err = s.resource.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		allocated := 0
		for _, claim := range claims.Items {
			if claim.Status.Allocation != nil {
				allocated++
			}
		}
		return allocated == want, nil
	})
	if err != nil {
		return fmt.Errorf("not all %d claims allocated: %w", want, err)
	}
	used := map[string]string{}
	for _, claim := range claims.Items {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, result := range claim.Status.Allocation.Devices.Results {
			id := result.Driver + "/" + result.Pool + "/" + result.Device
			if other, ok := used[id]; ok {
				return fmt.Errorf("device %s allocated to claims %s and %s", id, other, claim.Name)
			}
			used[id] = claim.Name
		}
	}
	return nil
}

// createClaims creates n claims with the given number of concurrent
// clients and returns claims per second.
func createClaims(ctx context.Context, s *server, namespace, prefix string, n, clients int) (float64, error) {
	return parallel(ctx, n, clients, func(ctx context.Context, i int) error {
		claim := &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: namespace},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
				Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
					DeviceClassName: "gpu.sim.draplane.dev",
					Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
						Expression: `device.capacity["gpu.sim.draplane.dev"].memory.compareTo(quantity("40Gi")) >= 0`,
					}}},
				}}},
			}},
		}
		_, err := s.resourceFor(i%clients).ResourceV1().ResourceClaims(namespace).Create(ctx, claim, metav1.CreateOptions{})
		return err
	})
}

// storedClaimSize is the size of one claim's value in etcd.
func storedClaimSize(ctx context.Context, etcd *clientv3.Client) (int, error) {
	resp, err := etcd.Get(ctx, "/registry/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return 0, err
	}
	for _, kv := range resp.Kvs {
		if strings.Contains(string(kv.Key), "/resourceclaims/bench-claims/") {
			value, err := etcd.Get(ctx, string(kv.Key))
			if err != nil {
				return 0, err
			}
			if len(value.Kvs) == 1 {
				return len(value.Kvs[0].Value), nil
			}
		}
	}
	return 0, errors.New("no claim found in etcd under /registry/")
}

// rawPuts writes n values of the given size straight into etcd with the
// given concurrency and returns puts per second.
func rawPuts(ctx context.Context, etcd *clientv3.Client, prefix string, n, clients, size int) (float64, error) {
	value := strings.Repeat("x", size)
	return parallel(ctx, n, clients, func(ctx context.Context, i int) error {
		_, err := etcd.Put(ctx, fmt.Sprintf("/bench-raw/%s/claim-%08d", prefix, i), value)
		return err
	})
}

// parallel runs f(0..n-1) on the given number of goroutines and returns
// calls per second.
func parallel(ctx context.Context, n, workers int, f func(context.Context, int) error) (float64, error) {
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	begin := time.Now()
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(ctx, i); err != nil && !apierrors.IsAlreadyExists(err) {
					once.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(n) / time.Since(begin).Seconds(), nil
}

func createNamespace(ctx context.Context, s *server, name string) error {
	_, err := s.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// server is one running dra-apiserver with its admin clients.
type server struct {
	*launcher.Server
	ready   time.Duration
	etcdURL string
	config  *rest.Config
	kube    *kubernetes.Clientset
	// resource is a shared client; resourceClients and kubeClients have
	// one connection each, for concurrent clients.
	resource        *versioned.Clientset
	mu              sync.Mutex
	resourceClients map[int]*versioned.Clientset
	kubeClients     map[int]*kubernetes.Clientset
}

var etcdURLPattern = regexp.MustCompile(`"Embedded etcd ready".* url="([^"]+)"`)

func startServer(binary, dataDir string, args ...string) (*server, error) {
	s := &server{
		Server:          launcher.NewServer("dra-apiserver", binary, dataDir, 0, args...),
		resourceClients: map[int]*versioned.Clientset{},
		kubeClients:     map[int]*kubernetes.Clientset{},
	}
	s.PollInterval = 20 * time.Millisecond
	if err := s.Start(5 * time.Minute); err != nil {
		return nil, err
	}
	s.ready = s.Ready
	if m := etcdURLPattern.FindStringSubmatch(s.Output()); m != nil {
		s.etcdURL = m[1]
	}
	config, err := s.RESTConfig()
	if err != nil {
		s.stop()
		return nil, err
	}
	// No client-side rate limit: the server is what is measured.
	config.QPS = -1
	s.config = config
	s.kube = kubernetes.NewForConfigOrDie(s.config)
	s.resource = versioned.NewForConfigOrDie(s.config)
	return s, nil
}

// ownConnection is a copy of the config whose client does not share the
// cached transport (a Dial function of its own turns the cache off).
func (s *server) ownConnection() *rest.Config {
	config := rest.CopyConfig(s.config)
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	config.Dial = dialer.DialContext
	return config
}

func (s *server) resourceFor(i int) *versioned.Clientset {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.resourceClients[i]; ok {
		return c
	}
	c := versioned.NewForConfigOrDie(s.ownConnection())
	s.resourceClients[i] = c
	return c
}

func (s *server) kubeFor(i int) *kubernetes.Clientset {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.kubeClients[i%100]; ok {
		return c
	}
	c := kubernetes.NewForConfigOrDie(s.ownConnection())
	s.kubeClients[i%100] = c
	return c
}

// rss is the server's resident set size in bytes.
func (s *server) rss() int64 { return s.status("VmRSS") }

// rssReport is the server's RSS, with its anonymous part (Go heap, stacks)
// and its file-backed part (mostly the embedded etcd's mapped database).
func (s *server) rssReport() string {
	return fmt.Sprintf("%s (anon %s, file %s)", mib(s.rss()), mib(s.status("RssAnon")), mib(s.status("RssFile")))
}

// status is a size field of /proc/<pid>/status in bytes, -1 if unknown.
func (s *server) status(field string) int64 {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.Pid()))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			fields := strings.Fields(rest)
			if kb, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
				return kb * 1024
			}
		}
	}
	return -1
}

func (s *server) stop() { s.Stop() }

// useProtobuf makes the server's clients, those made from now on
// included, send and accept protobuf, as client-go programs built for
// Kubernetes' own types (controllers, schedulers) usually do.
func (s *server) useProtobuf() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.config.ContentType = "application/vnd.kubernetes.protobuf"
	s.config.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	s.kube = kubernetes.NewForConfigOrDie(s.config)
	s.resource = versioned.NewForConfigOrDie(s.config)
	clear(s.kubeClients)
	clear(s.resourceClients)
}

func report(what, value string) { fmt.Printf("%-72s %s\n", what+":", value) }

func seconds(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

func mib(bytes int64) string { return fmt.Sprintf("%.0f MiB", float64(bytes)/(1<<20)) }
