package allocation

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// BenchmarkDecide is choosing a node and devices for one pod with a
// one-GPU claim among nodes of 8 GPUs each, the first half of them full
// (as MostAllocated fills nodes sorted by name): the controller's part of
// placing a pod, under its critical section, without API calls.
func BenchmarkDecide(b *testing.B) {
	for _, numNodes := range []int{500, 5000} {
		b.Run(fmt.Sprintf("%dx8", numNodes), func(b *testing.B) {
			logger, ctx := ktesting.NewTestContext(b)
			var tc testCase
			for i := range numNodes {
				name := fmt.Sprintf("node-%05d", i)
				tc.nodes = append(tc.nodes, makeNode(name))
				tc.slices = append(tc.slices, makeSlice(name, 8, "a100"))
				if i < numNodes/2 {
					for d := range 8 {
						tc.claims = append(tc.claims, makeClaim(fmt.Sprintf("%s-%d", name, d), allocatedOn(name, fmt.Sprintf("gpu-%d", d))))
					}
				}
			}
			pod := makePod("pod", withGeneratedClaim("gpu"))
			claim := generatedClaim(pod, "gpu")
			tc.pods, tc.claims = []*corev1.Pod{pod}, append(tc.claims, claim)
			c := newTestController(b, logger, tc)
			claims := []*resourcev1.ResourceClaim{claim}
			b.ReportAllocs()
			for b.Loop() {
				d, err := c.state.decide(ctx, pod, claims)
				if err != nil || d.unschedulable {
					b.Fatalf("decide: %v %s", err, d.summary)
				}
				// Forget the pending allocation: every round decides for
				// the same cluster.
				c.state.dropIfWriting(claim.UID)
			}
		})
	}
}

// BenchmarkDecidePreempting is an unschedulable pod's retry under the
// tracker's lock when every GPU of 500 nodes × 8 is held by one-GPU pods:
// the node search that fails, then the victim search (the cluster's
// claims and pods gathered, preemption.Find). Each round is what one
// retry holds the lock for. victim: the pods have priority 10 and one is
// found; none: they have the pod's priority, no victim is found, searched
// every round (remembered=false, as before the search was remembered) or
// remembered from the first round.
func BenchmarkDecidePreempting(b *testing.B) {
	for _, bc := range []struct {
		name       string
		priority   int32
		remembered bool
	}{
		{"victim", 10, false},
		{"none/remembered=false", 100, false},
		{"none/remembered=true", 100, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			const numNodes = 500
			logger, ctx := ktesting.NewTestContext(b)
			var tc testCase
			for i := range numNodes {
				name := fmt.Sprintf("node-%05d", i)
				tc.nodes = append(tc.nodes, makeNode(name))
				tc.slices = append(tc.slices, makeSlice(name, 8, "a100"))
				for d := range 8 {
					running := makePod(fmt.Sprintf("%s-%d", name, d), withGeneratedClaim("gpu"), withNodeName(name), withPriority(bc.priority))
					tc.pods = append(tc.pods, running)
					tc.claims = append(tc.claims, generatedClaim(running, "gpu", allocatedOn(name, fmt.Sprintf("gpu-%d", d)), reservedFor(running)))
				}
			}
			pod := makePod("pod", withGeneratedClaim("gpu"), withPriority(100))
			claim := generatedClaim(pod, "gpu")
			tc.pods, tc.claims = append(tc.pods, pod), append(tc.claims, claim)
			c := newTestController(b, logger, tc)
			claims := []*resourcev1.ResourceClaim{claim}
			b.ReportAllocs()
			for b.Loop() {
				if !bc.remembered {
					delete(c.state.noPreemption, pod.UID)
				}
				d, err := c.state.decide(ctx, pod, claims)
				if err != nil || d.preemption == nil || (len(d.preemption.victims) == 1) != (bc.priority < 100) {
					b.Fatalf("decide: %v %+v", err, d)
				}
			}
		})
	}
}
