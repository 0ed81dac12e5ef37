// Package drivertesting has what tests of node agents share: a driver
// that records the calls it gets.
package drivertesting

import (
	"context"
	"errors"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/driver"
)

// RecordingPreparer is a driver that remembers its calls (the claim names
// of each) and fails the claims named in Fail with the given message. For
// Driver's devices it returns CDI device IDs "<Driver>/gpu=<device>" when
// Driver is set.
type RecordingPreparer struct {
	Driver string
	Fail   map[string]string

	mu             sync.Mutex
	prepareCalls   [][]string
	unprepareCalls [][]string
}

// PrepareCalls are the claim names of each prepare call so far.
func (r *RecordingPreparer) PrepareCalls() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]string(nil), r.prepareCalls...)
}

// UnprepareCalls are the claim names of each unprepare call so far.
func (r *RecordingPreparer) UnprepareCalls() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]string(nil), r.unprepareCalls...)
}

func (r *RecordingPreparer) PrepareResourceClaims(_ context.Context, claims []*resourcev1.ResourceClaim) (map[types.UID]driver.PrepareResult, error) {
	var names []string
	results := map[types.UID]driver.PrepareResult{}
	for _, c := range claims {
		names = append(names, c.Name)
		if msg, ok := r.Fail[c.Name]; ok {
			results[c.UID] = driver.PrepareResult{Err: errors.New(msg)}
			continue
		}
		var devices []driver.PreparedDevice
		if r.Driver != "" {
			for _, result := range driver.AllocatedDevices(c, r.Driver) {
				devices = append(devices, driver.PreparedDevice{Request: result.Request, Pool: result.Pool, Device: result.Device,
					CDIDeviceIDs: []string{r.Driver + "/gpu=" + result.Device}})
			}
		}
		results[c.UID] = driver.PrepareResult{Devices: devices}
	}
	r.mu.Lock()
	r.prepareCalls = append(r.prepareCalls, names)
	r.mu.Unlock()
	return results, nil
}

func (r *RecordingPreparer) UnprepareResourceClaims(_ context.Context, claims []driver.NamespacedObject) (map[types.UID]error, error) {
	var names []string
	results := map[types.UID]error{}
	for _, c := range claims {
		names = append(names, c.Name)
		results[c.UID] = nil
	}
	r.mu.Lock()
	r.unprepareCalls = append(r.unprepareCalls, names)
	r.mu.Unlock()
	return results, nil
}
