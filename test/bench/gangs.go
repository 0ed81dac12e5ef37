package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// gangsNamespace holds the gang workload's groups, pods and template.
const gangsNamespace = "bench-gangs"

// benchGangs places gangs on simulated nodes: c.gangs PodGroups of
// c.gangSize pods (minCount = c.gangSize), each pod with a claim for
// c.gangGPUs GPUs, which the cluster holds whole; then more gangs than the
// rest of the cluster holds, of which only some fit and the rest must wait
// whole. It reports
// gangs placed per second, the times to the first and the last bind, and
// the pods bound in a gang with fewer than minCount pods bound once all
// settled, which all-or-nothing placement keeps at 0.
func benchGangs(c config) error {
	ctx := context.Background()
	s, err := startServer(c.binary, filepath.Join(c.workDir, "gangs"), "-v=1",
		fmt.Sprintf("--simulate-nodes=%d", c.nodes), fmt.Sprintf("--simulate-devices-per-node=%d", c.devices),
		"--feature-gates=GenericWorkload=true")
	if err != nil {
		return err
	}
	defer s.stop()
	capacity := c.nodes * c.devices
	perGang := c.gangSize * c.gangGPUs
	if c.gangs*perGang > capacity {
		return fmt.Errorf("%d gangs of %d pods with %d GPUs each need %d GPUs; the cluster has %d", c.gangs, c.gangSize, c.gangGPUs, c.gangs*perGang, capacity)
	}
	if err := createGPUTemplate(ctx, s, gangsNamespace, "gpus", int64(c.gangGPUs)); err != nil {
		return err
	}
	watch, err := watchGangs(s)
	if err != nil {
		return err
	}
	defer watch.stop()

	// 1. Gangs that all fit.
	cpuBegin := s.cpuSeconds()
	begin := time.Now()
	if err := createGangs(ctx, s, c, 0, c.gangs); err != nil {
		return err
	}
	if err := watch.waitBound(c.gangs*c.gangSize, begin); err != nil {
		return err
	}
	cpu := s.cpuSeconds() - cpuBegin
	first, last := watch.firstLast()
	what := fmt.Sprintf("%d gangs of %d pods x %d GPUs, minCount %d, on %d nodes x %d GPUs", c.gangs, c.gangSize, c.gangGPUs, c.gangSize, c.nodes, c.devices)
	report("gangs placed/s ("+what+")", fmt.Sprintf("%.1f/s (last pod bound %.1fs after the first create)", float64(c.gangs)/last.Sub(begin).Seconds(), last.Sub(begin).Seconds()))
	report("time to the first and the last bind", fmt.Sprintf("first %.2fs, last %.2fs", first.Sub(begin).Seconds(), last.Sub(begin).Seconds()))
	report("server CPU per placed gang pod", fmt.Sprintf("%.2f ms", cpu*1000/float64(c.gangs*c.gangSize)))

	// 2. More gangs than the rest of the cluster holds: those that fit are
	// placed, the others wait whole.
	fits := (capacity - c.gangs*perGang) / perGang
	bound := c.gangs * c.gangSize
	if fits > c.gangs {
		report("second wave: gangs that must wait", fmt.Sprintf("skipped: the rest of the cluster holds %d more gangs", fits))
	} else {
		more := fits + max(1, c.gangs/4)
		if err := createGangs(ctx, s, c, c.gangs, more); err != nil {
			return err
		}
		var since time.Duration
		bound, since = watch.settle(5*time.Second, 2*time.Minute)
		placed, partial, partialPods := watch.gangsBound(c.gangSize)
		report("second wave: gangs placed of those created (room for)", fmt.Sprintf("%d of %d (%d); %d pods bound in all, none for %.0fs", placed-c.gangs, more, fits, bound, since.Seconds()))
		report("pods bound in a gang with fewer than minCount pods bound (must be 0)", fmt.Sprintf("%d (in %d gangs)", partialPods, partial))
		if partialPods > 0 {
			return fmt.Errorf("%d pods of %d gangs are bound while their gang is incomplete", partialPods, partial)
		}
	}
	return checkNoDeviceTwice(ctx, s, gangsNamespace, bound)
}

// createGangs creates the PodGroups gang-<from>… and then their pods, the
// pods of all gangs interleaved as a job controller creating many jobs at
// once would.
func createGangs(ctx context.Context, s *server, c config, from, n int) error {
	if _, err := parallel(ctx, n, c.clients, func(ctx context.Context, i int) error {
		group := &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gang-%d", from+i), Namespace: gangsNamespace},
			Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
				Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(c.gangSize)},
			}},
		}
		_, err := s.kubeFor(i).SchedulingV1beta1().PodGroups(gangsNamespace).Create(ctx, group, metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("create pod groups: %w", err)
	}
	_, err := parallel(ctx, n*c.gangSize, c.clients, func(ctx context.Context, i int) error {
		gang, member := from+i%n, i/n
		pod := claimPod(gangsNamespace, fmt.Sprintf("gang-%d-%d", gang, member), "gpus", "gpus")
		pod.Labels = map[string]string{"gang": fmt.Sprint(gang)}
		pod.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(fmt.Sprintf("gang-%d", gang))}
		_, err := s.kubeFor(i).CoreV1().Pods(gangsNamespace).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("create gang pods: %w", err)
	}
	return nil
}

// gangWatch records when each pod of the gang namespace was first seen
// bound, by gang.
type gangWatch struct {
	mu    sync.Mutex
	bound map[string]time.Time // pod name -> first seen bound
	gangs map[string]int       // gang label -> pods bound
	done  chan struct{}
}

func watchGangs(s *server) (*gangWatch, error) {
	w := &gangWatch{bound: map[string]time.Time{}, gangs: map[string]int{}, done: make(chan struct{})}
	if err := watchPods(s, gangsNamespace, w.onPod, w.done); err != nil {
		return nil, err
	}
	return w, nil
}

func (w *gangWatch) onPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, seen := w.bound[pod.Name]; seen {
		return
	}
	w.bound[pod.Name] = time.Now()
	w.gangs[pod.Labels["gang"]]++
}

func (w *gangWatch) stop() { close(w.done) }

func (w *gangWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.bound)
}

// waitBound returns once n pods are bound, printing progress every ten
// seconds; it gives up after five minutes.
func (w *gangWatch) waitBound(n int, begin time.Time) error {
	progress := time.NewTicker(10 * time.Second)
	defer progress.Stop()
	check := time.NewTicker(20 * time.Millisecond)
	defer check.Stop()
	timeout := time.After(5 * time.Minute)
	for {
		select {
		case <-progress.C:
			fmt.Fprintf(os.Stderr, "  %d of %d gang pods bound after %.0fs\n", w.count(), n, time.Since(begin).Seconds())
		case <-check.C:
			if w.count() >= n {
				return nil
			}
		case <-timeout:
			return fmt.Errorf("only %d of %d gang pods bound within 5 minutes", w.count(), n)
		}
	}
}

// settle waits until no pod was newly bound for quiet (at most limit) and
// returns the pods bound and how long ago the last one was.
func (w *gangWatch) settle(quiet, limit time.Duration) (int, time.Duration) {
	last, lastChange := -1, time.Now()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if n := w.count(); n != last {
			last, lastChange = n, time.Now()
		} else if time.Since(lastChange) >= quiet {
			break
		}
	}
	return last, time.Since(lastChange)
}

// firstLast returns the first and the last time a pod was seen bound.
func (w *gangWatch) firstLast() (first, last time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, at := range w.bound {
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	return first, last
}

// gangsBound counts the gangs with at least minCount pods bound, and the
// gangs (and their pods) with some but fewer than minCount bound.
func (w *gangWatch) gangsBound(minCount int) (placed, partial, partialPods int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range w.gangs {
		switch {
		case n >= minCount:
			placed++
		case n > 0:
			partial++
			partialPods += n
		}
	}
	return placed, partial, partialPods
}
