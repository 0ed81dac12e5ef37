package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcev1client "github.com/draplane/draplane/generated/clientset/versioned/typed/resource/v1"
)

// benchResourcePools measures what watching resourcepools costs with many
// pools: a fresh server (controllers idle: no pods) gets c.pools slices of
// one pool each, a DeviceClass and a watch of resourcepools; then
// c.poolEvents claims are allocated one device each by a status update and
// deallocated again. Reported: the server's CPU time per allocation or
// release (from /proc/<pid>/stat, so it includes the API request, etcd and
// the watch), beside the CPU of the same updates on a server without the
// watch open, and how many pools were counted again per event (from
// draplane_resourcepool_recounts_total).
func benchResourcePools(c config) error {
	ctx := context.Background()
	s, err := startServer(c.binary, filepath.Join(c.workDir, "resourcepools"), "-v=1")
	if err != nil {
		return err
	}
	defer s.stop()
	if err := createNamespace(ctx, s, "bench-pools"); err != nil {
		return err
	}
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.bench.draplane.dev"},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "gpu.bench.draplane.dev"`}}}}}
	if _, err := s.resource.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		return err
	}
	begin := time.Now()
	if _, err := parallel(ctx, c.pools, c.clients, func(ctx context.Context, i int) error {
		slice := &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-node-%05d", i)},
			Spec: resourcev1.ResourceSliceSpec{
				Driver:   "gpu.bench.draplane.dev",
				NodeName: ptr.To(fmt.Sprintf("bench-node-%05d", i)),
				Pool:     resourcev1.ResourcePool{Name: fmt.Sprintf("bench-node-%05d", i), Generation: 1, ResourceSliceCount: 1},
			},
		}
		for d := range c.devices {
			slice.Spec.Devices = append(slice.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", d)})
		}
		_, err := s.resourceFor(i%c.clients).ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := s.resource.ResourceV1().ResourcePoolUsages().List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == c.pools, nil
	}); err != nil {
		return fmt.Errorf("resourcepools never listed %d pools: %w", c.pools, err)
	}
	report(fmt.Sprintf("resourcepools: %d slices created until all listed", c.pools), seconds(time.Since(begin)))

	// Claims to allocate, created before anything is measured.
	claims := s.resource.ResourceV1().ResourceClaims("bench-pools")
	for i := range c.poolEvents {
		claim := &resourcev1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pool-claim-%d", i)},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu",
				Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class.Name}}}}},
		}
		if _, err := claims.Create(ctx, claim, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	events := float64(2 * c.poolEvents)

	recounts0, err := s.recounts(ctx)
	if err != nil {
		return err
	}
	w, err := s.resource.ResourceV1().ResourcePoolUsages().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	received := make(chan int)
	go func() {
		n := 0
		for range w.ResultChan() {
			n++
		}
		received <- n
	}()
	watched, err := poolRound(ctx, s, claims, c)
	if err != nil {
		return err
	}
	// Let the watch catch up before it is closed.
	time.Sleep(time.Second)
	w.Stop()
	n := <-received
	recounts1, err := s.recounts(ctx)
	if err != nil {
		return err
	}
	unwatched, err := poolRound(ctx, s, claims, c)
	if err != nil {
		return err
	}
	report(fmt.Sprintf("resourcepools: server CPU per allocation or release, %d pools, watched", c.pools),
		fmt.Sprintf("%.2f ms (%d events, %d watch events incl. %d initial)", 1000*watched/events, int(events), n, c.pools))
	report(fmt.Sprintf("resourcepools: server CPU per allocation or release, %d pools, no watch", c.pools),
		fmt.Sprintf("%.2f ms", 1000*unwatched/events))
	report("resourcepools: pools counted again per event", fmt.Sprintf("%.2f", (recounts1-recounts0)/events))
	return nil
}

// poolRound allocates every claim of benchResourcePools (each on another
// pool), then releases them all; it returns the server's CPU seconds.
func poolRound(ctx context.Context, s *server, claims resourcev1client.ResourceClaimInterface, c config) (float64, error) {
	cpu0 := s.cpuSeconds()
	for _, allocate := range []bool{true, false} {
		for i := range c.poolEvents {
			claim, err := claims.Get(ctx, fmt.Sprintf("pool-claim-%d", i), metav1.GetOptions{})
			if err != nil {
				return 0, err
			}
			claim.Status.Allocation = nil
			if allocate {
				claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
					Request: "gpu", Driver: "gpu.bench.draplane.dev", Pool: fmt.Sprintf("bench-node-%05d", i%c.pools), Device: "gpu-0"}}}}
			}
			if _, err := claims.UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
				return 0, err
			}
		}
	}
	return s.cpuSeconds() - cpu0, nil
}

// cpuSeconds is the user and system CPU time of the server process.
func (s *server) cpuSeconds() float64 {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.Pid()))
	if err != nil {
		return -1
	}
	// The command name may hold spaces; fields count from after ")".
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

// recounts reads draplane_resourcepool_recounts_total from /metrics.
func (s *server) recounts(ctx context.Context) (float64, error) {
	raw, err := s.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "draplane_resourcepool_recounts_total "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("no draplane_resourcepool_recounts_total in /metrics")
}
