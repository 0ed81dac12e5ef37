package reliability

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcev1client "github.com/draplane/draplane/generated/clientset/versioned/typed/resource/v1"
)

const (
	churnNodes          = 20
	churnDevicesPerNode = 4
	// churnOps operations, ~150 ms apart: ~100 s; churnDuration bounds
	// a slow run.
	churnOps      = 650
	churnDuration = 4 * time.Minute
	churnMaxPods  = 45
	// reservedForGoneBound: a claim may stay reserved for a deleted pod
	// at most this long.
	reservedForGoneBound = 30 * time.Second
	sharedClaims         = 3
)

// TestChurn drives two controller replicas (flipping leadership by killing
// the leader every ~25 s) on 20 simulated nodes x 4 GPUs with a seeded,
// random mix of pod creations (template claims of 1 or 2 GPUs, shared
// claims) and deletions and DeviceTaintRules (NoSchedule, NoExecute) added
// and removed. An independent checker follows every ResourceClaim and pod
// event through a third replica that runs no controllers and fails the test
// if a device is ever in two allocations at once, or a claim stays reserved
// for a deleted pod for more than 30 s. At the end, with the rules removed
// and the churn stopped, no pod may stay Pending while it could be placed.
func TestChurn(t *testing.T) {
	requireEnabled(t)
	rng := rand.New(rand.NewSource(seed(t, 1122)))
	flipRNG := rand.New(rand.NewSource(rng.Int63()))
	const (
		leaseDuration = 4 * time.Second
		renewDeadline = 3 * time.Second
		retryPeriod   = 500 * time.Millisecond
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	etcd := startEtcdCluster(t, 1)

	// api serves the test's clients and the checker; it is never killed
	// and runs neither controllers nor simulator.
	api := newServer(t, "api", t.TempDir(), "--etcd-servers", etcd.Servers, "--controllers=false")
	if err := api.Start(); err != nil {
		t.Fatal(err)
	}
	var replicas []*server
	for i := range 2 {
		args := append([]string{"--etcd-servers", etcd.Servers,
			fmt.Sprintf("--simulate-nodes=%d", churnNodes), fmt.Sprintf("--simulate-devices-per-node=%d", churnDevicesPerNode)},
			leaderArgs(leaseDuration, renewDeadline, retryPeriod)...)
		s := newServer(t, fmt.Sprintf("controllers-%d", i), t.TempDir(), args...)
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, s)
	}
	kube := api.KubeClient(t)
	resource := api.Client(t).ResourceV1()

	// Wait for the simulated slices.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		slices, err := resource.ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		devices := 0
		for _, s := range slices.Items {
			devices += len(s.Spec.Devices)
		}
		return devices == churnNodes*churnDevicesPerNode, nil
	})
	if err != nil {
		t.Fatalf("simulated slices did not appear: %v", err)
	}
	if _, err := resource.DeviceClasses().Create(ctx, oneGPUClass(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	templates := map[string]int64{"one-gpu": 1, "two-gpus": 2}
	for name, count := range templates {
		if _, err := resource.ResourceClaimTemplates("default").Create(ctx, gpuTemplate(name, count), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range sharedClaims {
		claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("shared-%d", i), Namespace: "default"}, Spec: gpuClaimSpec(1)}
		if _, err := resource.ResourceClaims("default").Create(ctx, claim, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	c := newChecker()
	c.start(ctx, t, api)

	// Leadership flips, concurrently with the churn.
	var flips []time.Duration
	var flipErrs []string
	flipsDone := make(chan struct{})
	churnCtx, stopChurn := context.WithTimeout(ctx, churnDuration)
	defer stopChurn()
	go func() {
		defer close(flipsDone)
		for {
			select {
			case <-churnCtx.Done():
				return
			case <-time.After(20*time.Second + time.Duration(flipRNG.Intn(10000))*time.Millisecond):
			}
			d, err := flipLeadership(ctx, t, api, replicas)
			if err != nil {
				flipErrs = append(flipErrs, err.Error())
				continue
			}
			flips = append(flips, d)
		}
	}()

	// The churn itself.
	ops := map[string]int{}
	opErrs := map[string]int{}
	var live []string // pods created and not deleted by the test
	var rules []string
	podSeq, ruleSeq := 0, 0
	for done := 0; done < churnOps && churnCtx.Err() == nil; {
		time.Sleep(time.Duration(50+rng.Intn(200)) * time.Millisecond)
		var op string
		var err error
		switch x := rng.Intn(100); {
		case x < 35 && len(live) < churnMaxPods:
			op = "create template pod"
			template := "one-gpu"
			if rng.Intn(3) == 0 {
				template = "two-gpus"
			}
			name := fmt.Sprintf("churn-%04d", podSeq)
			podSeq++
			if _, err = kube.CoreV1().Pods("default").Create(ctx, templatePod(name, template), metav1.CreateOptions{}); err == nil {
				live = append(live, name)
			}
		case x < 45 && len(live) < churnMaxPods:
			op = "create shared-claim pod"
			name := fmt.Sprintf("churn-%04d", podSeq)
			podSeq++
			if _, err = kube.CoreV1().Pods("default").Create(ctx, sharedClaimPod(name, fmt.Sprintf("shared-%d", rng.Intn(sharedClaims))), metav1.CreateOptions{}); err == nil {
				live = append(live, name)
			}
		case x < 80 && len(live) > 0:
			op = "delete pod"
			i := rng.Intn(len(live))
			err = kube.CoreV1().Pods("default").Delete(ctx, live[i], metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				err = nil // evicted by a NoExecute rule
			}
			live = append(live[:i], live[i+1:]...)
		case x < 90 && len(rules) < 4:
			name := fmt.Sprintf("churn-rule-%03d", ruleSeq)
			ruleSeq++
			node := fmt.Sprintf("sim-node-%d", rng.Intn(churnNodes))
			rule := &resourcev1.DeviceTaintRule{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: resourcev1.DeviceTaintRuleSpec{
					DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To(simDriver), Pool: ptr.To(node)},
					Taint:          resourcev1.DeviceTaint{Key: "reliability.draplane.dev/churn", Value: name, Effect: resourcev1.DeviceTaintEffectNoSchedule},
				},
			}
			op = "add NoSchedule rule"
			if rng.Intn(2) == 0 {
				// NoExecute on one device evicts its pods.
				op = "add NoExecute rule"
				rule.Spec.Taint.Effect = resourcev1.DeviceTaintEffectNoExecute
				rule.Spec.DeviceSelector.Device = ptr.To(fmt.Sprintf("gpu-%d", rng.Intn(churnDevicesPerNode)))
			}
			if _, err = resource.DeviceTaintRules().Create(ctx, rule, metav1.CreateOptions{}); err == nil {
				rules = append(rules, name)
			}
		case len(rules) > 0:
			op = "remove rule"
			i := rng.Intn(len(rules))
			err = resource.DeviceTaintRules().Delete(ctx, rules[i], metav1.DeleteOptions{})
			rules = append(rules[:i], rules[i+1:]...)
		default:
			continue
		}
		ops[op]++
		done++
		if err != nil {
			// The api replica is never killed: every operation must
			// succeed.
			opErrs[op]++
			if opErrs[op] <= 3 {
				t.Errorf("%s: %v", op, err)
			}
		}
	}
	stopChurn()
	<-flipsDone

	// Quiesce: no rules, no more changes; every pod that can be placed
	// must be, and no claim may stay reserved for a pod that is gone.
	for _, name := range rules {
		if err := resource.DeviceTaintRules().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete rule %s: %v", name, err)
		}
	}
	var problems []string
	var pending, freeDevices int
	var listErr error
	checkedOnce := false
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		problems, pending, freeDevices, listErr = quiesceProblems(ctx, api)
		if listErr != nil {
			return false, nil
		}
		checkedOnce = true
		return len(problems) == 0, nil
	})
	if err != nil {
		for _, p := range problems {
			t.Errorf("after quiescing: %s", p)
		}
		if !checkedOnce {
			t.Errorf("after quiescing: the state could not be read once in 2 minutes: %v", listErr)
		}
	}
	// The checker must still be watching: it has to see a claim and a pod
	// created now, after everything else.
	c.expectMarkers(ctx, t, resource, kube)
	cancel()
	c.wait()

	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.violations {
		t.Error(v)
	}
	for _, e := range flipErrs {
		t.Error(e)
	}
	if len(flips) == 0 {
		t.Error("leadership never flipped")
	}
	total := 0
	var opList []string
	for op, n := range ops {
		total += n
		opList = append(opList, fmt.Sprintf("%s %d (%d errors)", op, n, opErrs[op]))
	}
	sort.Strings(opList)
	var handovers []string
	for _, d := range flips {
		handovers = append(handovers, d.Round(time.Millisecond).String())
	}
	// The workload must have happened: floors well below what a run does
	// (about 650 operations, 1,000 claim events, 2,000 pod events and 300
	// device allocations over all 80 devices), far above what a run that
	// created nothing, allocated nothing or stopped watching early sees.
	succeeded := func(op string) int { return ops[op] - opErrs[op] }
	for _, floor := range []struct {
		what      string
		got, want int
	}{
		{"successful template pod creations", succeeded("create template pod"), 80},
		{"successful shared-claim pod creations", succeeded("create shared-claim pod"), 20},
		{"successful pod deletions", succeeded("delete pod"), 80},
		{"successful rule additions", succeeded("add NoSchedule rule") + succeeded("add NoExecute rule"), 10},
		{"successful rule removals", succeeded("remove rule"), 10},
		{"claim events checked", c.claimEvents, 300},
		{"pod events checked", c.podEvents, 500},
		{"device allocations checked", c.deviceChecks, 100},
		{"claims seen going from unallocated to allocated", c.allocations, 60},
		{"distinct devices seen allocated", len(c.devicesSeen), 40},
	} {
		if floor.got < floor.want {
			t.Errorf("the workload did not happen: %d %s, want at least %d", floor.got, floor.what, floor.want)
		}
	}
	t.Logf("churn: %d operations (%s), %d leadership flips (handover after kill: %s), %d claim events and %d pod events checked, %d device allocations checked (%d claims newly allocated) over %d distinct devices, %d pods left Pending with no feasible placement (%d devices free, fragmented over nodes)",
		total, strings.Join(opList, ", "), len(flips), strings.Join(handovers, " "), c.claimEvents, c.podEvents, c.deviceChecks, c.allocations, len(c.devicesSeen), pending, freeDevices)
}

// flipLeadership kills the replica that leads the controllers, starts it
// again and waits until the other replica holds the lease; it returns the
// time from the kill to the new holder's acquireTime.
func flipLeadership(ctx context.Context, t *testing.T, api *server, replicas []*server) (time.Duration, error) {
	id, _ := holder(ctx, t, api, controllerName)
	leader := -1
	for i, s := range replicas {
		for _, term := range leaderTerms(s) {
			if term == id {
				leader = i
			}
		}
	}
	if leader < 0 {
		return 0, fmt.Errorf("flip: lease holder %q is none of the replicas", id)
	}
	killed := time.Now()
	replicas[leader].Kill9()
	if err := replicas[leader].Start(); err != nil {
		return 0, fmt.Errorf("flip: replica %d did not come back: %v", leader, err)
	}
	var newID string
	var acquired *metav1.MicroTime
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		newID, acquired = holder(ctx, t, api, controllerName)
		return newID != "" && newID != id, nil
	})
	if err != nil {
		return 0, fmt.Errorf("flip: nobody took the lease from %q", id)
	}
	if acquired == nil {
		return time.Since(killed), nil
	}
	return acquired.Sub(killed), nil
}

// quiesceProblems lists what is wrong with the settled state: claims
// reserved for pods that do not exist, and Pending pods that would fit.
func quiesceProblems(ctx context.Context, api *server) (problems []string, infeasible, freeDevices int, err error) {
	kube, err := newKube(api)
	if err != nil {
		return nil, 0, 0, err
	}
	resource, err := newResource(api)
	if err != nil {
		return nil, 0, 0, err
	}
	pods, err := kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, 0, err
	}
	claims, err := resource.ResourceClaims("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, 0, err
	}
	slices, err := resource.ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, 0, err
	}
	podUIDs := map[types.UID]bool{}
	for _, p := range pods.Items {
		podUIDs[p.UID] = true
	}
	free := map[string]int{} // pool (= node) -> free devices
	for _, s := range slices.Items {
		free[s.Spec.Pool.Name] += len(s.Spec.Devices)
	}
	byName := map[string]*resourcev1.ResourceClaim{}
	for i := range claims.Items {
		claim := &claims.Items[i]
		byName[claim.Name] = claim
		for _, r := range claim.Status.ReservedFor {
			if !podUIDs[r.UID] {
				problems = append(problems, fmt.Sprintf("claim %s reserved for pod %s (%s), which does not exist", claim.Name, r.Name, r.UID))
			}
		}
		if claim.Status.Allocation != nil {
			for _, r := range claim.Status.Allocation.Devices.Results {
				free[r.Pool]--
			}
			if len(claim.Status.ReservedFor) == 0 {
				problems = append(problems, fmt.Sprintf("claim %s is allocated (%d devices) with no consumer left", claim.Name, len(claim.Status.Allocation.Devices.Results)))
			}
		}
		for _, ref := range claim.OwnerReferences {
			if ref.Kind == "Pod" && !podUIDs[ref.UID] && claim.DeletionTimestamp == nil {
				problems = append(problems, fmt.Sprintf("claim %s generated for pod %s (%s), which does not exist", claim.Name, ref.Name, ref.UID))
			}
		}
	}
	fits := func(count int) bool {
		for _, n := range free {
			if n >= count {
				return true
			}
		}
		return false
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodPending || p.DeletionTimestamp != nil || p.Spec.NodeName != "" {
			continue
		}
		feasible := false
		var why string
		for _, pc := range p.Spec.ResourceClaims {
			switch {
			case pc.ResourceClaimName != nil:
				claim := byName[*pc.ResourceClaimName]
				switch {
				case claim == nil:
					why = "shared claim missing"
				case claim.Status.Allocation != nil:
					feasible, why = true, "its shared claim is allocated"
				default:
					feasible, why = fits(1), "its shared claim is unallocated"
				}
			case pc.ResourceClaimTemplateName != nil:
				count := 1
				if *pc.ResourceClaimTemplateName == "two-gpus" {
					count = 2
				}
				feasible, why = fits(count), fmt.Sprintf("needs %d GPUs on one node", count)
			}
		}
		if feasible {
			problems = append(problems, fmt.Sprintf("pod %s is Pending but could be placed (%s; free devices per node %v)", p.Name, why, free))
		} else {
			infeasible++
		}
	}
	for _, n := range free {
		freeDevices += n
	}
	return problems, infeasible, freeDevices, nil
}

// checker follows every claim and pod event.
type checker struct {
	mu sync.Mutex
	// claims: key -> devices allocated and pods reserved.
	claims map[string]claimState
	// owner: device -> claim key holding it.
	owner map[string]string
	// gone: deleted pods and when the checker saw it.
	gone         map[types.UID]time.Time
	reported     map[string]bool
	claimEvents  int
	podEvents    int
	deviceChecks int
	// allocations: events in which a claim went from unallocated (or
	// unseen) to allocated.
	allocations int
	devicesSeen map[string]bool
	// podsSeen: names of pods the checker saw an event for (markers).
	podsSeen   map[string]bool
	violations []string
	done       sync.WaitGroup
}

type claimState struct {
	allocated bool
	devices   []string
	reserved  map[types.UID]string
}

func newChecker() *checker {
	return &checker{
		claims:      map[string]claimState{},
		owner:       map[string]string{},
		gone:        map[types.UID]time.Time{},
		reported:    map[string]bool{},
		devicesSeen: map[string]bool{},
		podsSeen:    map[string]bool{},
	}
}

func (c *checker) violate(format string, args ...any) {
	c.violations = append(c.violations, fmt.Sprintf(format, args...))
}

func (c *checker) start(ctx context.Context, t *testing.T, api *server) {
	resource := api.Client(t).ResourceV1()
	kube := api.KubeClient(t)
	claimList, err := resource.ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range claimList.Items {
		c.claim(watch.Added, &claimList.Items[i])
	}
	podList, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claimWatcher, err := watchtools.NewRetryWatcherWithContext(ctx, claimList.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			return resource.ResourceClaims("").Watch(ctx, options)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	podWatcher, err := watchtools.NewRetryWatcherWithContext(ctx, podList.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			return kube.CoreV1().Pods("").Watch(ctx, options)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	c.done.Add(3)
	go func() {
		defer c.done.Done()
		defer claimWatcher.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case event, ok := <-claimWatcher.ResultChan():
				if !ok {
					if ctx.Err() == nil {
						c.mu.Lock()
						c.violate("the claim watch closed before the end: checking stopped")
						c.mu.Unlock()
					}
					return
				}
				if event.Type == watch.Error {
					c.mu.Lock()
					c.violate("claim watch error: %v", event.Object)
					c.mu.Unlock()
					continue
				}
				if claim, ok := event.Object.(*resourcev1.ResourceClaim); ok {
					c.mu.Lock()
					c.claim(event.Type, claim)
					c.mu.Unlock()
				}
			}
		}
	}()
	go func() {
		defer c.done.Done()
		defer podWatcher.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case event, ok := <-podWatcher.ResultChan():
				if !ok {
					if ctx.Err() == nil {
						c.mu.Lock()
						c.violate("the pod watch closed before the end: checking stopped")
						c.mu.Unlock()
					}
					return
				}
				if event.Type == watch.Error {
					c.mu.Lock()
					c.violate("pod watch error: %v", event.Object)
					c.mu.Unlock()
					continue
				}
				if pod, ok := event.Object.(*corev1.Pod); ok {
					c.mu.Lock()
					c.podEvents++
					c.podsSeen[pod.Namespace+"/"+pod.Name] = true
					if event.Type == watch.Deleted {
						c.gone[pod.UID] = time.Now()
					}
					c.mu.Unlock()
				}
			}
		}
	}()
	go func() {
		defer c.done.Done()
		ticker := time.NewTicker(time.Second)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			c.mu.Lock()
			for key, state := range c.claims {
				for uid, name := range state.reserved {
					goneAt, ok := c.gone[uid]
					if ok && time.Since(goneAt) > reservedForGoneBound && !c.reported[key+string(uid)] {
						c.reported[key+string(uid)] = true
						c.violate("claim %s still reserved for pod %s (%s) %v after the pod was deleted", key, name, uid, time.Since(goneAt).Round(time.Second))
					}
				}
			}
			c.mu.Unlock()
		}
	}()
}

func (c *checker) wait() { c.done.Wait() }

// claim applies one event (under c.mu) and checks that no device is in
// two allocations at once. Events arrive in etcd order, so the state after
// each event is the state of the store at that revision.
func (c *checker) claim(eventType watch.EventType, claim *resourcev1.ResourceClaim) {
	c.claimEvents++
	key := claim.Namespace + "/" + claim.Name
	prev, known := c.claims[key]
	for _, d := range prev.devices {
		if c.owner[d] == key {
			delete(c.owner, d)
		}
	}
	delete(c.claims, key)
	if eventType == watch.Deleted {
		return
	}
	state := claimState{reserved: map[types.UID]string{}}
	for _, r := range claim.Status.ReservedFor {
		state.reserved[r.UID] = r.Name
	}
	if claim.Status.Allocation != nil {
		if !known || !prev.allocated {
			c.allocations++
		}
		state.allocated = true
		inClaim := map[string]bool{}
		for _, r := range claim.Status.Allocation.Devices.Results {
			d := r.Driver + "/" + r.Pool + "/" + r.Device
			c.deviceChecks++
			c.devicesSeen[d] = true
			if ptr.Deref(r.AdminAccess, false) {
				continue // admin access may share a device
			}
			if inClaim[d] {
				c.violate("device %s listed twice in the allocation of %s (resourceVersion %s)", d, key, claim.ResourceVersion)
			}
			inClaim[d] = true
			if other, ok := c.owner[d]; ok && other != key {
				c.violate("device %s allocated to %s and %s at once (resourceVersion %s)", d, other, key, claim.ResourceVersion)
			}
			c.owner[d] = key
			state.devices = append(state.devices, d)
		}
	}
	c.claims[key] = state
}

// expectMarkers creates a claim and a pod after the churn and waits until
// the checker has seen both: proof that it watched to the end.
func (c *checker) expectMarkers(ctx context.Context, t *testing.T, resource resourcev1client.ResourceV1Interface, kube kubernetes.Interface) {
	t.Helper()
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "checker-marker", Namespace: "default"}, Spec: gpuClaimSpec(1)}
	if _, err := resource.ResourceClaims("default").Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Errorf("marker claim: %v", err)
		return
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "checker-marker", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}
	if _, err := kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Errorf("marker pod: %v", err)
		return
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, claimSeen := c.claims["default/checker-marker"]
		return claimSeen && c.podsSeen["default/checker-marker"], nil
	})
	if err != nil {
		t.Error("the checker did not see the marker claim and pod created after the churn: it stopped watching before the end")
	}
}
