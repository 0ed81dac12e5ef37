package reliability

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/generated/clientset/versioned"
)

const (
	// crashObjects claims and slices, each created and then, by a plan
	// drawn from the seed, updated, given a status (claims) and deleted:
	// about 11,500 writes.
	crashObjects = 6000
	crashWriters = 16
	// crashKills SIGKILLs while the writers run, crashStartupKills of the
	// restarts after them killed again before they are ready, and one
	// after the last write: 33 in all, whatever the seed.
	crashKills        = 24
	crashStartupKills = 8
	crashTotalKills   = crashKills + crashStartupKills + 1
	payloadKey        = "reliability.draplane.dev/payload"
	crashDriver       = "crash.example.com"
)

// crashPlan is what the workload does to one object after creating it.
type crashPlan struct {
	update, status, delete bool
}

// objState is the last acknowledged state of one object: what the
// client sent (content), and the UID and resourceVersion the server
// acknowledged it with, or that its deletion was acknowledged.
type objState struct {
	kind, name      string
	uid             types.UID
	resourceVersion string
	content         string
	deleted         bool
	// payload: the object's payload annotation as last written.
	payload string
}

// TestCrashSafety runs 16 concurrent writers against a server with
// embedded etcd (fsync on, the default): 6,000 claims and slices are
// created, and by a seeded plan half are updated, 40% of the claims get a
// status (an allocation), and a fifth are deleted, each write made against
// the resourceVersion of the previous one. Meanwhile the server is killed
// with SIGKILL 24 times at seeded moments and restarted on the same data
// dir, 8 of the restarts killed again before they are ready, and once more
// after the last write. Then every object must be as its last
// acknowledged write left it: present with the content the client sent,
// the same UID and the acknowledged resourceVersion, or gone if its
// deletion was acknowledged. Every write after the first also checks the
// one before: it is made against the acknowledged resourceVersion, so a
// lost write shows as a conflict.
func TestCrashSafety(t *testing.T) {
	requireEnabled(t)
	rng := rand.New(rand.NewSource(seed(t, 20261122)))
	// Not --embedded-etcd-unsafe-no-fsync: durability is what is tested.
	// No controllers: nothing but the writers changes an object, so the
	// acknowledged resourceVersion must be the final one.
	s := newServer(t, "crash", t.TempDir(), "--controllers=false",
		"--embedded-etcd-quota-backend-bytes", fmt.Sprint(1<<30))
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	client := s.Client(t)
	ctx := context.Background()

	// The plan and the payloads are fixed up front: the writers race, the
	// content does not.
	plans := make([]crashPlan, crashObjects)
	payloads := make([][2]string, crashObjects)
	totalWrites := 0
	planned := map[string]int{}
	for i := range plans {
		plans[i] = crashPlan{update: rng.Intn(2) == 0, status: i%3 != 2 && rng.Intn(5) < 2, delete: rng.Intn(5) == 0}
		for v := range payloads[i] {
			b := make([]byte, 32)
			rng.Read(b)
			payloads[i][v] = hex.EncodeToString(b)
		}
		for _, op := range plans[i].steps() {
			planned[op]++
			totalWrites++
		}
	}
	// Kill moments: after a random number of acknowledged writes, plus a
	// random delay, so kills land in the middle of requests.
	thresholds := make([]int, crashKills)
	for i := range thresholds {
		thresholds[i] = 100 + rng.Intn(totalWrites-300)
	}
	sort.Ints(thresholds)
	delays := make([]time.Duration, crashKills)
	for i := range delays {
		delays[i] = time.Duration(rng.Intn(300)) * time.Millisecond
	}
	// crashStartupKills of the restarts are themselves killed, 0-1.5 s
	// after exec: mostly while etcd recovers or the API is not ready yet.
	startupKills := make([]time.Duration, crashKills)
	for _, k := range rng.Perm(crashKills)[:crashStartupKills] {
		startupKills[k] = time.Duration(1+rng.Intn(1500)) * time.Millisecond
	}

	var (
		next      atomic.Int64
		ackCount  atomic.Int64
		retries   atomic.Int64
		mu        sync.Mutex
		states    = make([]objState, crashObjects)
		acks      = map[string]int{}
		writeErrs []error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		writeErrs = append(writeErrs, err)
	}

	writersDone := make(chan struct{})
	var writers sync.WaitGroup
	for range crashWriters {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= crashObjects {
					return
				}
				st := objState{kind: "claim", name: fmt.Sprintf("crash-claim-%05d", i)}
				if i%3 == 2 {
					st = objState{kind: "slice", name: fmt.Sprintf("crash-slice-%05d", i)}
				}
			steps:
				for _, op := range plans[i].steps() {
					deadline := time.Now().Add(5 * time.Minute)
					for retried := false; ; retried = true {
						err := writeStep(ctx, client, i, payloads[i], op, &st, retried)
						if err == nil {
							mu.Lock()
							acks[op]++
							mu.Unlock()
							ackCount.Add(1)
							break
						}
						var lost durabilityError
						if errors.As(err, &lost) {
							fail(err)
							break steps
						}
						if time.Now().After(deadline) {
							fail(fmt.Errorf("%s %s: no acknowledged %s within 5 minutes: %v", st.kind, st.name, op, err))
							break steps
						}
						retries.Add(1)
						time.Sleep(100 * time.Millisecond)
					}
				}
				mu.Lock()
				states[i] = st
				mu.Unlock()
			}
		}()
	}
	go func() {
		writers.Wait()
		close(writersDone)
	}()

	begin := time.Now()
	kills, startupKilled := 0, 0
	var slowestRestart time.Duration
	for k, threshold := range thresholds {
		for ackCount.Load() < int64(threshold) {
			select {
			case <-writersDone:
			case <-time.After(10 * time.Millisecond):
				continue
			}
			break
		}
		time.Sleep(delays[k])
		s.Kill9()
		kills++
		if d := startupKills[k]; d > 0 {
			if err := s.StartAndKill(d); err != nil {
				t.Fatal(err)
			}
			kills++
			startupKilled++
		}
		if err := s.Start(); err != nil {
			t.Fatalf("after kill %d (%d writes acknowledged): the server did not come back: %v", kills, ackCount.Load(), err)
		}
		slowestRestart = max(slowestRestart, s.Ready)
	}
	select {
	case <-writersDone:
	case <-time.After(10 * time.Minute):
		t.Fatalf("writers did not finish within 10 minutes after the last kill (%d acknowledged)", ackCount.Load())
	}
	// One more crash after the last write: what is checked is what was
	// on disk.
	s.Kill9()
	kills++
	if err := s.Start(); err != nil {
		t.Fatalf("after the final kill: the server did not come back: %v", err)
	}
	writeTime := time.Since(begin)
	for _, err := range writeErrs {
		t.Error(err)
	}

	// Every object must be as its last acknowledged write left it.
	client = s.Client(t)
	found := map[string]objState{}
	var cont string
	for {
		list, err := client.ResourceV1().ResourceClaims("default").List(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
		if err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			c := &list.Items[i]
			found["claim/"+c.Name] = objState{uid: c.UID, resourceVersion: c.ResourceVersion, content: claimContent(c)}
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	for {
		list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
		if err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			sl := &list.Items[i]
			found["slice/"+sl.Name] = objState{uid: sl.UID, resourceVersion: sl.ResourceVersion, content: sliceContent(sl)}
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	problems, present, deleted := 0, 0, 0
	problem := func(format string, args ...any) {
		problems++
		if problems <= 20 {
			t.Errorf(format, args...)
		}
	}
	for i, want := range states {
		if want.name == "" {
			problem("object %d: the workload never finished it", i)
			continue
		}
		key := want.kind + "/" + want.name
		got, ok := found[key]
		switch {
		case want.deleted && ok:
			deleted++
			problem("%s: deletion acknowledged, but it is back (uid %s, resourceVersion %s)", key, got.uid, got.resourceVersion)
		case want.deleted:
			deleted++
		case !ok:
			present++
			problem("%s: acknowledged at resourceVersion %s, missing after the crashes", key, want.resourceVersion)
		default:
			present++
			if got.uid != want.uid || got.resourceVersion != want.resourceVersion || got.content != want.content {
				problem("%s changed: uid %s->%s, resourceVersion %s->%s, content sent %s, stored %s", key, want.uid, got.uid, want.resourceVersion, got.resourceVersion, want.content, got.content)
			}
		}
	}
	if problems > 0 {
		t.Errorf("%d of %d objects not as their last acknowledged write left them", problems, crashObjects)
	}
	for op, n := range planned {
		if acks[op] != n {
			t.Errorf("%d %s writes acknowledged, %d planned", acks[op], op, n)
		}
	}
	if kills != crashTotalKills || startupKilled != crashStartupKills {
		t.Errorf("%d kills (%d during a restart), want %d (%d)", kills, startupKilled, crashTotalKills, crashStartupKills)
	}
	t.Logf("crash safety: %d kills survived (SIGKILL, fsync on; %d of them during a restart), %d acknowledged writes checked (creates %d, updates %d, status writes %d, deletes %d; %d retried requests): %d objects present as sent, %d deletions held; writes took %v, slowest restart to /readyz %v",
		kills, startupKilled, ackCount.Load(), acks["create"], acks["update"], acks["status"], acks["delete"], retries.Load(), present, deleted, writeTime.Round(time.Second), slowestRestart.Round(time.Millisecond))
}

func (p crashPlan) steps() []string {
	steps := []string{"create"}
	if p.update {
		steps = append(steps, "update")
	}
	if p.status {
		steps = append(steps, "status")
	}
	if p.delete {
		steps = append(steps, "delete")
	}
	return steps
}

// durabilityError: the server lost or altered an acknowledged write.
type durabilityError struct{ what string }

func (e durabilityError) Error() string { return e.what }

// crashStore is what writeStep needs of a typed client.
type crashStore[T metav1.Object] interface {
	Create(context.Context, T, metav1.CreateOptions) (T, error)
	Update(context.Context, T, metav1.UpdateOptions) (T, error)
	Get(context.Context, string, metav1.GetOptions) (T, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
}

// writeStep makes one write of object i's plan; when the server
// acknowledges it, st becomes the new state. retried: an earlier attempt
// of this step failed with its outcome unknown (the reply may have been
// lost in a kill), so the write may already be stored.
func writeStep(ctx context.Context, client versioned.Interface, i int, payloads [2]string, op string, st *objState, retried bool) error {
	// A create writes the first payload, an update the second; a status
	// write or delete leaves the one there.
	payload := st.payload
	switch op {
	case "create":
		payload = payloads[0]
	case "update":
		payload = payloads[1]
	}
	var err error
	if st.kind == "slice" {
		if op == "status" {
			return fmt.Errorf("slices have no status")
		}
		err = stepOn(ctx, client.ResourceV1().ResourceSlices(), nil, sliceContent, op, crashSlice(i, st.name, payload), st, retried)
	} else {
		claim := crashClaim(i, st.name, payload)
		if op == "status" {
			claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
				Request: "gpu", Driver: crashDriver, Pool: fmt.Sprintf("crash-pool-%05d", i), Device: "gpu-" + payloads[1][:6],
			}}}}
		}
		claims := client.ResourceV1().ResourceClaims("default")
		err = stepOn(ctx, claims, claims.UpdateStatus, claimContent, op, claim, st, retried)
	}
	if err == nil {
		st.payload = payload
	}
	return err
}

func stepOn[T metav1.Object](ctx context.Context, s crashStore[T], updateStatus func(context.Context, T, metav1.UpdateOptions) (T, error),
	content func(T) string, op string, sent T, st *objState, retried bool) error {
	key := st.kind + "/" + st.name
	var got T
	var err error
	switch op {
	case "create":
		got, err = s.Create(ctx, sent, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			if !retried {
				return durabilityError{key + ": exists before it was created"}
			}
			// The lost reply's create was stored.
			got, err = s.Get(ctx, st.name, metav1.GetOptions{})
		}
	case "update", "status":
		sent.SetUID(st.uid)
		sent.SetResourceVersion(st.resourceVersion)
		if op == "update" {
			got, err = s.Update(ctx, sent, metav1.UpdateOptions{})
		} else {
			got, err = updateStatus(ctx, sent, metav1.UpdateOptions{})
		}
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			cur, gerr := s.Get(ctx, st.name, metav1.GetOptions{})
			switch {
			case gerr == nil && retried && content(cur) == content(sent):
				got, err = cur, nil // the lost reply's write was stored
			case gerr == nil:
				return durabilityError{fmt.Sprintf("%s: %s against the acknowledged resourceVersion %s refused (%v): stored resourceVersion %s", key, op, st.resourceVersion, err, cur.GetResourceVersion())}
			case apierrors.IsNotFound(gerr):
				return durabilityError{fmt.Sprintf("%s: acknowledged at resourceVersion %s, gone", key, st.resourceVersion)}
			default:
				return gerr
			}
		}
	case "delete":
		err = s.Delete(ctx, st.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &st.uid, ResourceVersion: &st.resourceVersion}})
		switch {
		case apierrors.IsNotFound(err) && retried:
			err = nil // the lost reply's delete was stored
		case apierrors.IsNotFound(err):
			return durabilityError{fmt.Sprintf("%s: acknowledged at resourceVersion %s, gone before its delete", key, st.resourceVersion)}
		case apierrors.IsConflict(err):
			return durabilityError{fmt.Sprintf("%s: delete against the acknowledged resourceVersion %s refused: %v", key, st.resourceVersion, err)}
		}
		if err != nil {
			return err
		}
		st.deleted, st.resourceVersion, st.content = true, "", ""
		return nil
	default:
		return fmt.Errorf("unknown step %q", op)
	}
	if err != nil {
		return err
	}
	if content(got) != content(sent) {
		return durabilityError{fmt.Sprintf("%s: %s acknowledged with other content than was sent: sent %s, got %s", key, op, content(sent), content(got))}
	}
	st.uid, st.resourceVersion, st.content = got.GetUID(), got.GetResourceVersion(), content(sent)
	return nil
}

// crashClaim is claim i as the client sends it; payload is in an
// annotation and in the selector.
func crashClaim(i int, name, payload string) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{payloadKey: payload}},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu",
			Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: crashDriver,
				AllocationMode:  resourcev1.DeviceAllocationModeExactCount,
				Count:           int64(1 + i%4),
				Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
					Expression: fmt.Sprintf(`device.attributes["%s"].index >= %d`, crashDriver, i%4),
				}}},
			},
		}}}},
	}
}

// crashSlice is slice i as the client sends it; payload is in an
// annotation and in every device's model attribute.
func crashSlice(i int, name, payload string) *resourcev1.ResourceSlice {
	devices := make([]resourcev1.Device, 1+i%4)
	for d := range devices {
		devices[d] = resourcev1.Device{
			Name: fmt.Sprintf("gpu-%d", d),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"index": {IntValue: ptr.To(int64(d))},
				"model": {StringValue: ptr.To(payload[:16])},
			},
		}
	}
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{payloadKey: payload}},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   crashDriver,
			NodeName: ptr.To(fmt.Sprintf("crash-node-%05d", i)),
			Pool:     resourcev1.ResourcePool{Name: fmt.Sprintf("crash-pool-%05d", i), Generation: 1, ResourceSliceCount: 1},
			Devices:  devices,
		},
	}
}

// claimContent is a digest of what the client sets in a claim (the
// payload annotation, the request, the allocation), taken the same way
// from the object sent and the object stored: what the server adds
// (defaults, metadata) does not count.
func claimContent(c *resourcev1.ResourceClaim) string {
	type request struct {
		Class, Expression string
		Mode              resourcev1.DeviceAllocationMode
		Count             int64
	}
	var reqs []request
	for _, r := range c.Spec.Devices.Requests {
		req := request{}
		if e := r.Exactly; e != nil {
			req = request{Class: e.DeviceClassName, Mode: e.AllocationMode, Count: e.Count}
			for _, s := range e.Selectors {
				if s.CEL != nil {
					req.Expression += s.CEL.Expression + ";"
				}
			}
		}
		reqs = append(reqs, req)
	}
	var results []string
	if a := c.Status.Allocation; a != nil {
		for _, r := range a.Devices.Results {
			results = append(results, r.Request+"="+r.Driver+"/"+r.Pool+"/"+r.Device)
		}
	}
	return digest(c.Annotations[payloadKey], reqs, results)
}

// sliceContent is a digest of what the client sets in a slice.
func sliceContent(sl *resourcev1.ResourceSlice) string {
	type device struct {
		Name         string
		Index        int64
		Model        string
		NumAttribute int
	}
	var devices []device
	for _, d := range sl.Spec.Devices {
		devices = append(devices, device{Name: d.Name, Index: ptr.Deref(d.Attributes["index"].IntValue, -1), Model: ptr.Deref(d.Attributes["model"].StringValue, ""), NumAttribute: len(d.Attributes)})
	}
	return digest(sl.Annotations[payloadKey], sl.Spec.Driver, ptr.Deref(sl.Spec.NodeName, ""), sl.Spec.Pool, devices)
}

func digest(parts ...any) string {
	b, err := json.Marshal(parts)
	if err != nil {
		panic(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
