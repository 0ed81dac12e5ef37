package simulator

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/types"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	dra "github.com/draplane/draplane/driver"
	"github.com/draplane/draplane/driver/nodeagent"
)

// ReasonFailedPrepare is the reason of the event on a pod whose claims
// could not be prepared (as a kubelet reports it).
const ReasonFailedPrepare = nodeagent.ReasonFailedPrepare

// AnnotationPrepareError on a claim makes the fake driver fail to prepare
// it, with the annotation's value as the error: a way to see what a
// failing driver does to a pod.
const AnnotationPrepareError = "simulator.draplane.dev/prepare-error"

// fakePreparer is the fake driver's side of prepare: nothing to set up,
// so every claim succeeds unless it asks to fail.
type fakePreparer struct {
	driver string
}

func (f *fakePreparer) PrepareResourceClaims(ctx context.Context, claims []*resourcev1.ResourceClaim) (map[types.UID]dra.PrepareResult, error) {
	results := make(map[types.UID]dra.PrepareResult, len(claims))
	for _, claim := range claims {
		if msg, ok := claim.Annotations[AnnotationPrepareError]; ok {
			results[claim.UID] = dra.PrepareResult{Err: errors.New(msg)}
			continue
		}
		var devices []dra.PreparedDevice
		for _, result := range dra.AllocatedDevices(claim, f.driver) {
			devices = append(devices, dra.PreparedDevice{Request: result.Request, Pool: result.Pool, Device: result.Device})
		}
		results[claim.UID] = dra.PrepareResult{Devices: devices}
	}
	return results, nil
}

func (f *fakePreparer) UnprepareResourceClaims(ctx context.Context, claims []dra.NamespacedObject) (map[types.UID]error, error) {
	results := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		results[claim.UID] = nil
	}
	return results, nil
}
