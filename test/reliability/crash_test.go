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
	crashObjects = 10000
	crashWriters = 16
	crashKills   = 24 // at least 20 are required
	payloadKey   = "reliability.draplane.dev/payload"
	crashDriver  = "crash.example.com"
)

// acked is one write the server acknowledged.
type acked struct {
	kind, name      string
	uid             types.UID
	resourceVersion string
	// hash covers the payload annotation and the spec as the server
	// returned them; payload is what was sent.
	hash    string
	payload string
}

func contentHash(payload string, spec any) string {
	b, err := json.Marshal(spec)
	if err != nil {
		panic(err)
	}
	h := sha256.New()
	h.Write([]byte(payload))
	h.Write([]byte{0})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// TestCrashSafety writes 10,000 claims and slices with 16 concurrent
// clients into a server with embedded etcd (fsync on, the default), kills
// it with SIGKILL at random moments (24 times, seeded), restarts it on the
// same data dir each time (a third of the restarts are killed again before
// they are ready), and finally checks that every acknowledged write
// is present and intact: same UID, same resourceVersion, same content.
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

	// Kill moments: after a random number of acknowledged writes, plus a
	// random delay, so kills land in the middle of requests.
	thresholds := make([]int, crashKills)
	for i := range thresholds {
		thresholds[i] = 100 + rng.Intn(crashObjects-300)
	}
	sort.Ints(thresholds)
	delays := make([]time.Duration, crashKills)
	// A third of the restarts are themselves killed, 0-1.5 s after exec:
	// mostly while etcd recovers or the API is not ready yet.
	startupKills := make([]time.Duration, crashKills)
	for i := range delays {
		delays[i] = time.Duration(rng.Intn(300)) * time.Millisecond
		if rng.Intn(3) == 0 {
			startupKills[i] = time.Duration(1+rng.Intn(1500)) * time.Millisecond
		}
	}
	// Payloads are fixed up front: the writers race, the content does not.
	payloads := make([]string, crashObjects)
	for i := range payloads {
		b := make([]byte, 32)
		rng.Read(b)
		payloads[i] = hex.EncodeToString(b)
	}

	var (
		next      atomic.Int64
		ackCount  atomic.Int64
		retries   atomic.Int64
		mu        sync.Mutex
		records   = make(map[string]acked, crashObjects)
		writeErrs []error
	)
	record := func(a acked) {
		mu.Lock()
		defer mu.Unlock()
		records[a.kind+"/"+a.name] = a
		ackCount.Add(1)
	}
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
				deadline := time.Now().Add(5 * time.Minute)
				for {
					a, err := writeObject(ctx, client, i, payloads[i])
					if err == nil {
						record(a)
						break
					}
					var wrong contentError
					if errors.As(err, &wrong) {
						fail(err)
						break
					}
					if time.Now().After(deadline) {
						fail(fmt.Errorf("object %d: no acknowledged write within 5 minutes: %v", i, err))
						break
					}
					retries.Add(1)
					time.Sleep(100 * time.Millisecond)
				}
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

	// Every acknowledged write must be there, unchanged.
	client = s.Client(t)
	found := map[string]acked{}
	var cont string
	for {
		list, err := client.ResourceV1().ResourceClaims("default").List(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range list.Items {
			found["claim/"+c.Name] = acked{uid: c.UID, resourceVersion: c.ResourceVersion, hash: contentHash(c.Annotations[payloadKey], c.Spec), payload: c.Annotations[payloadKey]}
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
		for _, sl := range list.Items {
			found["slice/"+sl.Name] = acked{uid: sl.UID, resourceVersion: sl.ResourceVersion, hash: contentHash(sl.Annotations[payloadKey], sl.Spec), payload: sl.Annotations[payloadKey]}
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	missing, changed := 0, 0
	for key, want := range records {
		got, ok := found[key]
		switch {
		case !ok:
			missing++
			if missing <= 20 {
				t.Errorf("acknowledged %s (uid %s, rv %s) is missing after the crashes", key, want.uid, want.resourceVersion)
			}
		case got.uid != want.uid || got.resourceVersion != want.resourceVersion || got.hash != want.hash || got.payload != want.payload:
			changed++
			if changed <= 20 {
				t.Errorf("acknowledged %s changed: uid %s->%s, rv %s->%s, hash %s->%s", key, want.uid, got.uid, want.resourceVersion, got.resourceVersion, want.hash[:12], got.hash[:12])
			}
		}
	}
	if missing > 0 || changed > 0 {
		t.Errorf("%d of %d acknowledged writes missing, %d changed", missing, len(records), changed)
	}
	if len(records) != crashObjects {
		t.Errorf("%d objects acknowledged, want %d", len(records), crashObjects)
	}
	if kills < 20 {
		t.Errorf("only %d kills", kills)
	}
	t.Logf("crash safety: %d kills survived (SIGKILL, fsync on; %d of them during a restart), %d acknowledged writes checked (%d retried requests), %d objects found, writes took %v, slowest restart to /readyz %v",
		kills, startupKilled, len(records), retries.Load(), len(found), writeTime.Round(time.Second), slowestRestart.Round(time.Millisecond))
}

// writeObject creates object i (a claim, or every third a slice). A create
// whose answer was lost may have been stored: AlreadyExists is then
// acknowledged by reading the object back, if it is the one sent.
func writeObject(ctx context.Context, client versioned.Interface, i int, payload string) (acked, error) {
	annotations := map[string]string{payloadKey: payload}
	if i%3 == 2 {
		name := fmt.Sprintf("crash-slice-%05d", i)
		devices := make([]resourcev1.Device, 1+i%4)
		for d := range devices {
			devices[d] = resourcev1.Device{
				Name: fmt.Sprintf("gpu-%d", d),
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
					"index": {IntValue: ptr.To(int64(d))},
					"model": {StringValue: ptr.To(payload[:8])},
				},
			}
		}
		slice := &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
			Spec: resourcev1.ResourceSliceSpec{
				Driver:   crashDriver,
				NodeName: ptr.To(fmt.Sprintf("crash-node-%05d", i)),
				Pool:     resourcev1.ResourcePool{Name: fmt.Sprintf("crash-pool-%05d", i), Generation: 1, ResourceSliceCount: 1},
				Devices:  devices,
			},
		}
		got, err := client.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			got, err = client.ResourceV1().ResourceSlices().Get(ctx, name, metav1.GetOptions{})
		}
		if err != nil {
			return acked{}, err
		}
		if got.Annotations[payloadKey] != payload || len(got.Spec.Devices) != len(devices) {
			return acked{}, contentError{"slice " + name}
		}
		return acked{kind: "slice", name: name, uid: got.UID, resourceVersion: got.ResourceVersion, hash: contentHash(payload, got.Spec), payload: payload}, nil
	}
	name := fmt.Sprintf("crash-claim-%05d", i)
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu",
			Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: crashDriver,
				AllocationMode:  resourcev1.DeviceAllocationModeExactCount,
				Count:           int64(1 + i%4),
				Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
					Expression: fmt.Sprintf(`device.attributes["%s"].model == "%s"`, crashDriver, payload[:8]),
				}}},
			},
		}}}},
	}
	got, err := client.ResourceV1().ResourceClaims("default").Create(ctx, claim, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		got, err = client.ResourceV1().ResourceClaims("default").Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return acked{}, err
	}
	if got.Annotations[payloadKey] != payload || got.Spec.Devices.Requests[0].Exactly == nil || got.Spec.Devices.Requests[0].Exactly.Count != int64(1+i%4) {
		return acked{}, contentError{"claim " + name}
	}
	return acked{kind: "claim", name: name, uid: got.UID, resourceVersion: got.ResourceVersion, hash: contentHash(payload, got.Spec), payload: payload}, nil
}

// contentError: the server acknowledged an object other than the one sent.
type contentError struct{ what string }

func (e contentError) Error() string {
	return e.what + ": the server holds other content than was sent"
}
