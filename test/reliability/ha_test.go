package reliability

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// TestHA runs three dra-apiserver replicas on a real 3-member etcd cluster:
// every replica serves the API, exactly one runs the controllers; when the
// leader is killed with SIGKILL another replica takes the lease within
// about the lease duration and places a pod created after the kill, with
// one claim for it and no duplicates.
func TestHA(t *testing.T) {
	requireEnabled(t)
	const (
		replicas      = 3
		leaseDuration = 6 * time.Second
		renewDeadline = 4 * time.Second
		retryPeriod   = time.Second
	)
	ctx := context.Background()
	etcd := startEtcdCluster(t, 3)

	var servers []*server
	for i := range replicas {
		args := append([]string{"--etcd-servers", etcd.Servers,
			"--simulate-nodes=4", "--simulate-devices-per-node=2"},
			leaderArgs(leaseDuration, renewDeadline, retryPeriod)...)
		s := newServer(t, fmt.Sprintf("replica-%d", i), t.TempDir(), args...)
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		t.Logf("replica %d ready in %v", i, s.Ready.Round(time.Millisecond))
		servers = append(servers, s)
	}

	// Every replica serves the API: what one writes, all read.
	for i, s := range servers {
		name := fmt.Sprintf("ha-class-%d", i)
		if _, err := s.Client(t).ResourceV1().DeviceClasses().Create(ctx, &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create through replica %d: %v", i, err)
		}
		for j, other := range servers {
			if _, err := other.Client(t).ResourceV1().DeviceClasses().Get(ctx, name, metav1.GetOptions{}); err != nil {
				t.Errorf("replica %d does not serve the class written through replica %d: %v", j, i, err)
			}
		}
	}

	// Exactly one replica holds the controllers' lease, and only it
	// started the controllers.
	var leaderIdentity string
	leader := -1
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		leaderIdentity, _ = holder(ctx, t, servers[0], controllerName)
		leader = -1
		for i, s := range servers {
			for _, id := range leaderTerms(s) {
				if id == leaderIdentity {
					leader = i
				}
			}
		}
		return leaderIdentity != "" && leader >= 0, nil
	})
	if err != nil {
		t.Fatalf("no replica holds the lease %s/%s and says so in its log (holder %q)", controllerNS, controllerName, leaderIdentity)
	}
	for i, s := range servers {
		terms := leaderTerms(s)
		if i == leader && len(terms) != 1 {
			t.Errorf("leader replica %d started the controllers %d times: %v", i, len(terms), terms)
		}
		if i != leader && len(terms) != 0 {
			t.Errorf("replica %d started the controllers too (%v) while replica %d holds the lease", i, terms, leader)
		}
		if i != leader && !strings.Contains(s.Output(), "Another replica leads the controllers") {
			t.Errorf("replica %d does not say that another replica leads", i)
		}
	}
	t.Logf("replica %d leads the controllers (%s)", leader, leaderIdentity)

	// The simulator has a lease of its own: exactly one replica runs it.
	simulatorLeader := func(exclude int) (int, string) {
		id, _ := holder(ctx, t, servers[(exclude+1)%replicas], simulatorLease)
		found := -1
		for i, s := range servers {
			if i == exclude {
				continue
			}
			for _, m := range becameSimulatorLeader.FindAllStringSubmatch(s.Output(), -1) {
				if m[1] == id {
					found = i
				}
			}
		}
		return found, id
	}
	var simLeader int
	var simIdentity string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		simLeader, simIdentity = simulatorLeader(-1)
		return simLeader >= 0, nil
	})
	if err != nil {
		t.Fatalf("no replica holds the simulator lease and says so (holder %q)", simIdentity)
	}
	for i, s := range servers {
		if n := len(becameSimulatorLeader.FindAllString(s.Output(), -1)); (i == simLeader) != (n == 1) || n > 1 {
			t.Errorf("replica %d started the simulator %d times; replica %d holds its lease", i, n, simLeader)
		}
	}

	survivor := servers[(leader+1)%replicas]
	kube := survivor.KubeClient(t)
	resource := survivor.Client(t).ResourceV1()
	if _, err := resource.DeviceClasses().Create(ctx, oneGPUClass(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := resource.ResourceClaimTemplates("default").Create(ctx, gpuTemplate("one-gpu", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Work before the kill.
	placed := func(name string) *corev1.Pod {
		t.Helper()
		var pod *corev1.Pod
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			p, err := kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			pod = p
			return p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning, nil
		})
		if err != nil {
			t.Fatalf("pod %s not placed and Running: %+v", name, pod)
		}
		return pod
	}
	if _, err := kube.CoreV1().Pods("default").Create(ctx, templatePod("before-kill", "one-gpu"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := placed("before-kill")

	// Kill the leader; a pod is created at once, while nobody leads.
	killedAt := time.Now()
	servers[leader].Kill9()
	if _, err := kube.CoreV1().Pods("default").Create(ctx, templatePod("after-kill", "one-gpu"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var newIdentity string
	var acquired *metav1.MicroTime
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		newIdentity, acquired = holder(ctx, t, survivor, controllerName)
		return newIdentity != "" && newIdentity != leaderIdentity, nil
	})
	if err != nil {
		t.Fatalf("no replica took the lease after the leader was killed (holder %q)", newIdentity)
	}
	observed := time.Since(killedAt)
	handover := observed
	if acquired != nil {
		handover = acquired.Sub(killedAt)
	}
	newLeader := -1
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for i, s := range servers {
			if i == leader {
				continue
			}
			for _, id := range leaderTerms(s) {
				if id == newIdentity {
					newLeader = i
				}
			}
		}
		return newLeader >= 0, nil
	})
	if err != nil {
		t.Fatalf("lease holder %s is not a surviving replica that started the controllers", newIdentity)
	}
	for i, s := range servers {
		if i != leader && i != newLeader && len(leaderTerms(s)) != 0 {
			t.Errorf("replica %d also started the controllers: %v", i, leaderTerms(s))
		}
	}
	// The candidate takes over once the lease it last saw renewed is
	// leaseDuration old, at its next retry. The bound is loose for a
	// loaded machine; the number is what is reported.
	if limit := 2*leaseDuration + 2*retryPeriod; handover > limit {
		t.Errorf("handover took %v, more than %v (lease duration %v)", handover, limit, leaseDuration)
	}
	t.Logf("HA: leader replica %d killed; replica %d took the lease after %v (lease acquireTime - kill; observed by polling after %v; lease duration %v, retry period %v)",
		leader, newLeader, handover.Round(time.Millisecond), observed.Round(time.Millisecond), leaseDuration, retryPeriod)

	if simLeader == leader {
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			l, _ := simulatorLeader(leader)
			return l >= 0, nil
		})
		if err != nil {
			t.Errorf("the simulator did not move to a surviving replica")
		}
	}

	// Work continues: the pod created while nobody led gets its claim and
	// a node; nothing is duplicated.
	after := placed("after-kill")
	claims, err := resource.ResourceClaims("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range []*corev1.Pod{before, after} {
		owned := claimsOwnedBy(claims.Items, string(pod.UID))
		if len(owned) != 1 {
			t.Errorf("pod %s has %d generated claims, want 1: %v", pod.Name, len(owned), owned)
		}
	}
	if len(claims.Items) != 2 {
		var names []string
		for _, c := range claims.Items {
			names = append(names, c.Name)
		}
		t.Errorf("%d claims exist, want 2 (one per pod): %v", len(claims.Items), names)
	}
	devices := map[string]string{}
	for _, c := range claims.Items {
		if c.Status.Allocation == nil || len(c.Status.ReservedFor) != 1 {
			t.Errorf("claim %s: allocation %v, reservedFor %v", c.Name, c.Status.Allocation, c.Status.ReservedFor)
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			key := r.Driver + "/" + r.Pool + "/" + r.Device
			if other, ok := devices[key]; ok {
				t.Errorf("device %s allocated to %s and %s", key, other, c.Name)
			}
			devices[key] = c.Name
		}
	}

	// The killed replica comes back as a follower.
	if err := servers[leader].Start(); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return strings.Contains(servers[leader].Output(), "Another replica leads the controllers"), nil
	})
	if err != nil || len(leaderTerms(servers[leader])) != 0 {
		t.Errorf("restarted replica %d: not a follower (terms %v)", leader, leaderTerms(servers[leader]))
	}
	if id, _ := holder(ctx, t, servers[leader], controllerName); id != newIdentity {
		t.Errorf("lease moved to %q after the old leader came back, want %q", id, newIdentity)
	}
}
