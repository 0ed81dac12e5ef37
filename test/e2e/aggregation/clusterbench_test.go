package aggregation

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// TestClusterSchedulingBench measures draplane against kube-scheduler on
// one real control plane, in one run: fake nodes (Node objects, no
// kubelet) with one ResourceSlice of devices each, then pods with one
// device from a template each, placed first by kube-scheduler, then,
// once a DeviceTaintRule gives every device to draplane, by draplane.
// For each: pods bound per second (first create to last binding, every
// claim allocated) and the CPU seconds each control-plane process spent,
// from /proc. Not a test of behaviour: `make bench-cluster` runs it
// (DRAPLANE_CLUSTER_BENCH=1; BENCH_NODES, BENCH_PODS).
func TestClusterSchedulingBench(t *testing.T) {
	if os.Getenv("DRAPLANE_CLUSTER_BENCH") != "1" {
		t.Skip("set DRAPLANE_CLUSTER_BENCH=1 (make bench-cluster)")
	}
	nodes, pods := envInt("BENCH_NODES", 500), envInt("BENCH_PODS", 2500)
	const devices = 8
	c := setUpCluster(t, false)
	config, err := clientcmd.BuildConfigFromFlags("", c.hostKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	config.QPS, config.Burst = 5000, 5000
	client := kubernetes.NewForConfigOrDie(config)
	ctx := t.Context()

	// The nodes and their slices.
	parallel(t, nodes, func(i int) error {
		name := fmt.Sprintf("bench-%04d", i)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
		created, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		created.Status = corev1.NodeStatus{
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("110")},
		}
		if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return err
		}
		slice := &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourcev1.ResourceSliceSpec{Driver: "bench.example.com", NodeName: ptr.To(name),
				Pool: resourcev1.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1}},
		}
		for d := range devices {
			slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", d)})
		}
		_, err = client.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{})
		return err
	})
	c.mustKubectl(t, `apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: bench
spec:
  selectors:
  - cel:
      expression: device.driver == "bench.example.com"
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: bench
  namespace: default
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: bench
`, "apply", "-f", "-")

	type result struct {
		scheduler string
		elapsed   time.Duration
		cpu       map[string]float64
	}
	var results []result
	run := func(scheduler string) {
		before := c.cpuSeconds(t)
		start := time.Now()
		parallel(t, pods, func(i int) error {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%05d", scheduler, i), Namespace: "default"},
				Spec: corev1.PodSpec{
					SchedulerName:  scheduler,
					ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("bench")}},
					Containers: []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")},
						Claims:   []corev1.ResourceClaim{{Name: "gpu"}}}}},
				},
			}
			_, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
			return err
		})
		poll(t, fmt.Sprintf("%d pods bound by %s", pods, scheduler), func() (bool, error) {
			list, err := client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
			if err != nil {
				return false, nil
			}
			bound := 0
			for _, pod := range list.Items {
				if pod.Spec.NodeName != "" {
					bound++
				}
			}
			return bound == pods, nil
		})
		elapsed := time.Since(start)
		after := c.cpuSeconds(t)
		cpu := map[string]float64{}
		for name, seconds := range after {
			cpu[name] = seconds - before[name]
		}
		results = append(results, result{scheduler: scheduler, elapsed: elapsed, cpu: cpu})
		if allocated := c.noDeviceTwice(t); allocated != pods {
			t.Errorf("%s: %d devices allocated, want %d", scheduler, allocated, pods)
		}
		// Gone at once: no kubelet would finish a graceful deletion.
		if err := client.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		poll(t, "every claim gone", func() (bool, error) {
			list, err := client.ResourceV1().ResourceClaims("default").List(ctx, metav1.ListOptions{})
			return err == nil && len(list.Items) == 0, nil
		})
	}
	run("default-scheduler")
	c.mustKubectl(t, fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata:
  name: draplane-owns-bench
spec:
  deviceSelector:
    driver: bench.example.com
  taint:
    key: %s
    value: draplane
    effect: NoSchedule
`, ownerTaintKey), "apply", "-f", "-")
	run(draplaneScheduler)

	var table strings.Builder
	fmt.Fprintf(&table, "%d nodes x %d devices, %d pods with one device each\n", nodes, devices, pods)
	fmt.Fprintf(&table, "%-18s %9s %10s %18s %16s %22s %14s\n", "scheduler", "pods/s", "wall", "scheduler CPU/pod", "kcm CPU/pod", "kube-apiserver CPU/pod", "total CPU/pod")
	for _, r := range results {
		scheduler := r.cpu["kube-scheduler"]
		if r.scheduler == draplaneScheduler {
			scheduler = r.cpu["dra-apiserver"]
		}
		total := r.cpu["kube-scheduler"] + r.cpu["dra-apiserver"] + r.cpu["kube-controller-manager"] + r.cpu["kube-apiserver"]
		perPod := func(seconds float64) string { return fmt.Sprintf("%.2f ms", seconds*1000/float64(pods)) }
		fmt.Fprintf(&table, "%-18s %9.1f %10v %18s %16s %22s %14s\n", r.scheduler, float64(pods)/r.elapsed.Seconds(), r.elapsed.Round(time.Millisecond),
			perPod(scheduler), perPod(r.cpu["kube-controller-manager"]), perPod(r.cpu["kube-apiserver"]), perPod(total))
	}
	t.Log("\n" + table.String())
}

// cpuSeconds reads the user and system CPU time of each control-plane
// process from /proc/<pid>/stat, in seconds (clock ticks of 1/100 s).
func (c *clusterEnv) cpuSeconds(t *testing.T) map[string]float64 {
	t.Helper()
	procs := map[string]int{"kube-apiserver": c.apiserver.Pid()}
	for name, p := range c.procs {
		procs[name] = p.Pid()
	}
	out := map[string]float64{}
	for name, pid := range procs {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatalf("cpu of %s: %v", name, err)
		}
		// The fields after the command name, which is in parentheses.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		utime, _ := strconv.ParseFloat(fields[11], 64)
		stime, _ := strconv.ParseFloat(fields[12], 64)
		out[name] = (utime + stime) / 100
	}
	return out
}

// parallel runs f for 0..n-1 on 16 workers and fails on the first error.
func parallel(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	work := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				if err := f(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
