package preemption

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// BenchmarkFind: a full cluster of nodes × 8 GPUs, every GPU held by pods of
// 1-3 GPUs and random priorities 0-9; a pod of priority 5 needs 4 GPUs.
func BenchmarkFind(b *testing.B) {
	for _, nodes := range []int{10, 100, 500} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			var sl []*resourceapi.ResourceSlice
			for n := range nodes {
				sl = append(sl, nodeSlice(fmt.Sprintf("node-%03d", n), 8))
			}
			s := newScenario(b, sl...)
			pod := 0
			for _, n := range s.nodes {
				for free := 8; free > 0; {
					size := min(free, 1+rng.IntN(3))
					name := fmt.Sprintf("p%d", pod)
					pod++
					if !s.run(name, int32(rng.IntN(10)), n.Name, gpuClaim(name, int64(size), false)) {
						b.Fatal("does not fit")
					}
					free -= size
				}
			}
			preemptor := &Preemptor{Priority: 5, Members: []Member{{Key: "default/new", Claims: []*resourceapi.ResourceClaim{gpuClaim("new", 4, false)}, Nodes: s.nodes}}}
			cluster := s.cluster()
			var d Decision
			b.ResetTimer()
			for b.Loop() {
				var err error
				if d, err = Find(context.Background(), cluster, preemptor, Options{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(d.Attempts), "attempts/op")
			b.ReportMetric(float64(len(d.Victims)), "victims")
			b.ReportMetric(float64(pod), "pods")
			if !d.Exact {
				b.Errorf("not exact after %d attempts", d.Attempts)
			}
		})
	}
}
