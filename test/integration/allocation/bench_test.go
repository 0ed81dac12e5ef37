package allocation_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"

	allocationintegration "github.com/draplane/draplane/test/integration/allocation"
)

const (
	benchNodes          = 500
	benchDevicesPerNode = 8
	benchPods           = 1000
	// benchClients is how many goroutines create objects at once.
	benchClients = 32
	// benchWorkers per controller.
	benchWorkers = 16
)

// BenchmarkPodsBoundPerSecond starts the real server (in-process,
// embedded etcd) with the resource claim and allocation controllers,
// publishes 500 nodes x 8 devices and then measures a burst of 1,000
// pods with template claims, from the first pod creation until every pod
// is bound. Afterwards no device may appear in two allocations.
//
// One burst takes seconds, so the benchmark normally runs once; each
// further iteration uses a fresh namespace after the previous pods are
// gone and their claims released.
func BenchmarkPodsBoundPerSecond(b *testing.B) {
	// Controller logs at the default verbosity only: per-pod lines would
	// dominate the measurement.
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	// The controllers stop before the server, so that they do not keep
	// writing events to a server that is gone.
	controllerCtx, stopControllers := context.WithCancel(ctx)
	var serverWG, controllerWG sync.WaitGroup
	defer func() {
		stopControllers()
		controllerWG.Wait()
		cancel()
		serverWG.Wait()
	}()
	config := allocationintegration.StartServer(ctx, b, &serverWG)
	// The controllers' requests are counted by kind, to see what the
	// server spends its time on.
	requests := &requestCounter{counts: map[string]int{}}
	controllerConfig := rest.CopyConfig(config)
	controllerConfig.Wrap(func(rt http.RoundTripper) http.RoundTripper { requests.next = rt; return requests })
	e := allocationintegration.StartControllers(controllerCtx, b, &controllerWG, controllerConfig, benchWorkers)
	e.CreateClass(ctx, b, "gpu")
	inParallel(b, benchNodes, func(i int) error {
		return e.AddNode(ctx, fmt.Sprintf("bench-node-%03d", i), nil, allocationintegration.GPUs(benchDevicesPerNode, nil))
	})

	var elapsed time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		namespace := fmt.Sprintf("burst-%d", i)
		e.CreateNamespace(ctx, b, namespace)
		e.CreateTemplate(ctx, b, namespace, "gpu", allocationintegration.OneDevice("gpu"))
		boundPods, stop := watchBound(ctx, b, e, namespace)
		requests.reset()
		b.StartTimer()

		start := time.Now()
		inParallel(b, benchPods, func(p int) error {
			pod := allocationintegration.PodWithTemplate(namespace, fmt.Sprintf("pod-%04d", p), "gpu", nil)
			_, err := e.Kube.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
			return err
		})
		created := time.Since(start)
		select {
		case <-boundPods:
		case <-time.After(10 * time.Minute):
			b.Fatalf("burst %d: not all %d pods bound after 10 minutes", i, benchPods)
		}
		elapsed += time.Since(start)
		b.Logf("burst %d: %d pods created in %v, all bound after %v; controller writes: %v", i, benchPods, created, time.Since(start), requests.writes())

		b.StopTimer()
		stop()
		checkBurst(ctx, b, e, namespace)
		// Make room for the next burst.
		if i+1 < b.N {
			releaseBurst(ctx, b, e, namespace)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(benchPods*b.N)/elapsed.Seconds(), "pods/s")
	logMetrics(b)
}

// requestCounter counts writes by method and path shape.
type requestCounter struct {
	next   http.RoundTripper
	mutex  sync.Mutex
	counts map[string]int
}

var namespacedPath = regexp.MustCompile(`^/apis?/(?:[^/]+/)?v1/namespaces/[^/]+/([^/]+)(?:/[^/]+(/[^/]+)?)?$`)

func (r *requestCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		kind := req.URL.Path
		if match := namespacedPath.FindStringSubmatch(req.URL.Path); match != nil {
			kind = match[1] + match[2]
		}
		r.mutex.Lock()
		r.counts[req.Method+" "+kind]++
		r.mutex.Unlock()
	}
	return r.next.RoundTrip(req)
}

func (r *requestCounter) reset() {
	r.mutex.Lock()
	defer r.mutex.Unlock()
	clear(r.counts)
}

func (r *requestCounter) writes() map[string]int {
	r.mutex.Lock()
	defer r.mutex.Unlock()
	return maps.Clone(r.counts)
}

// logMetrics shows the controller's attempts by result and the mean
// creation-to-binding time, to tell a slow controller from a slow server.
func logMetrics(b *testing.B) {
	attempts, err := testutil.GetCounterValuesFromGatherer(legacyregistry.DefaultGatherer, "draplane_allocation_controller_attempts_total", map[string]string{}, "result")
	if err != nil {
		b.Logf("attempts: %v", err)
	}
	latency, err := testutil.GetHistogramVecFromGatherer(legacyregistry.DefaultGatherer, "draplane_allocation_controller_pod_creation_to_binding_seconds", nil)
	if err != nil {
		b.Logf("latency: %v", err)
		return
	}
	b.Logf("attempts by result: %v; creation to binding: mean %.2fs over %d pods", attempts, latency.Average(), latency.GetAggregatedSampleCount())
}

// inParallel runs fn for 0..n-1 with benchClients goroutines.
func inParallel(b *testing.B, n int, fn func(i int) error) {
	b.Helper()
	var next atomic.Int64
	var mutex sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range benchClients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					mutex.Lock()
					errs = append(errs, err)
					mutex.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
}

// watchBound returns a channel that is closed once benchPods pods of the
// namespace are bound, and a function to stop watching.
func watchBound(ctx context.Context, b *testing.B, e *allocationintegration.Env, namespace string) (<-chan struct{}, func()) {
	b.Helper()
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(e.Kube, 0, informers.WithNamespace(namespace))
	informer := factory.Core().V1().Pods().Informer()
	done := make(chan struct{})
	var mutex sync.Mutex
	bound := map[types.UID]bool{}
	record := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok || pod.Spec.NodeName == "" {
			return
		}
		mutex.Lock()
		defer mutex.Unlock()
		if bound[pod.UID] {
			return
		}
		bound[pod.UID] = true
		if len(bound) == benchPods {
			close(done)
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		b.Fatalf("watch pods: %v", err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		b.Fatal("pod informer did not sync")
	}
	return done, func() {
		cancel()
		factory.Shutdown()
	}
}

// checkBurst: every pod bound, its claim allocated on its node and
// reserved for it, and no device in two allocations.
func checkBurst(ctx context.Context, b *testing.B, e *allocationintegration.Env, namespace string) {
	b.Helper()
	claims, err := e.Resource.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatalf("list claims: %v", err)
	}
	if doubles := allocationintegration.DoubleAllocations(claims.Items); len(doubles) > 0 {
		b.Fatalf("devices allocated twice: %v", doubles)
	}
	pods, err := e.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatalf("list pods: %v", err)
	}
	nodeOf := map[types.UID]string{}
	for _, pod := range pods.Items {
		nodeOf[pod.UID] = pod.Spec.NodeName
	}
	allocated := 0
	for _, claim := range claims.Items {
		if claim.Status.Allocation == nil {
			continue
		}
		allocated++
		if len(claim.Status.ReservedFor) != 1 {
			b.Errorf("claim %s: reserved for %v, expected its pod", claim.Name, claim.Status.ReservedFor)
			continue
		}
		node := nodeOf[claim.Status.ReservedFor[0].UID]
		for _, result := range claim.Status.Allocation.Devices.Results {
			if result.Pool != node {
				b.Errorf("claim %s: device %s/%s is not on the pod's node %q", claim.Name, result.Pool, result.Device, node)
			}
		}
	}
	if allocated != benchPods {
		b.Fatalf("%d claims allocated, expected %d", allocated, benchPods)
	}
}

// releaseBurst deletes the pods and waits until their claims are gone.
func releaseBurst(ctx context.Context, b *testing.B, e *allocationintegration.Env, namespace string) {
	b.Helper()
	if err := e.Kube.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
		b.Fatalf("delete pods: %v", err)
	}
	allocationintegration.WaitFor(ctx, b, "claims of "+namespace+" released", func() (bool, error) {
		claims, err := e.Resource.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
		return err == nil && len(claims.Items) == 0, err
	})
}
