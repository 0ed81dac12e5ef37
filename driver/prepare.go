package driver

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// NamespacedObject names a claim to unprepare; the claim itself may be
// gone by then.
type NamespacedObject struct {
	types.NamespacedName
	UID types.UID
}

// PreparedDevice is one device a claim got ready on the node.
type PreparedDevice struct {
	// Request, Pool and Device are as in the claim's allocation result.
	Request, Pool, Device string
	// CDIDeviceIDs, if the driver uses CDI, name what the container
	// runtime injects.
	CDIDeviceIDs []string
}

// PrepareResult is a driver's answer for one claim: the devices it made
// ready, or why it could not.
type PrepareResult struct {
	Devices []PreparedDevice
	Err     error
}

// Preparer is what a node agent asks a driver before a pod starts and
// after it is done. All claims of a pod come in one call, and the driver
// answers per claim (by UID): some may succeed while others fail, and the
// pod starts only when every claim succeeded. A claim the answer leaves
// out counts as failed. An error for the whole call fails every claim.
// Both calls must be idempotent: a claim prepared twice (a retry, another
// pod sharing it) is prepared once.
type Preparer interface {
	PrepareResourceClaims(ctx context.Context, claims []*resourcev1.ResourceClaim) (map[types.UID]PrepareResult, error)
	UnprepareResourceClaims(ctx context.Context, claims []NamespacedObject) (map[types.UID]error, error)
}

// ClaimError is the failure of one claim of a pod.
type ClaimError struct {
	Claim types.NamespacedName
	Err   error
}

func (e *ClaimError) Error() string { return fmt.Sprintf("claim %s: %v", e.Claim, e.Err) }
func (e *ClaimError) Unwrap() error { return e.Err }

// Prepare calls the preparer for the claims and returns one ClaimError per
// claim that failed, in the order of claims, and the results of those that
// succeeded.
func Prepare(ctx context.Context, preparer Preparer, claims []*resourcev1.ResourceClaim) (map[types.UID]PrepareResult, []*ClaimError) {
	if len(claims) == 0 {
		return nil, nil
	}
	results, err := preparer.PrepareResourceClaims(ctx, claims)
	var failed []*ClaimError
	ok := map[types.UID]PrepareResult{}
	for _, claim := range claims {
		name := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}
		result, answered := results[claim.UID]
		switch {
		case err != nil:
			failed = append(failed, &ClaimError{Claim: name, Err: err})
		case !answered:
			failed = append(failed, &ClaimError{Claim: name, Err: errors.New("the driver did not answer for this claim")})
		case result.Err != nil:
			failed = append(failed, &ClaimError{Claim: name, Err: result.Err})
		default:
			ok[claim.UID] = result
		}
	}
	return ok, failed
}

// Unprepare calls the preparer for the claims and returns the claims that
// failed, with their errors.
func Unprepare(ctx context.Context, preparer Preparer, claims []NamespacedObject) []*ClaimError {
	if len(claims) == 0 {
		return nil
	}
	results, err := preparer.UnprepareResourceClaims(ctx, claims)
	var failed []*ClaimError
	for _, claim := range claims {
		claimErr, answered := results[claim.UID]
		switch {
		case err != nil:
			failed = append(failed, &ClaimError{Claim: claim.NamespacedName, Err: err})
		case !answered:
			failed = append(failed, &ClaimError{Claim: claim.NamespacedName, Err: errors.New("the driver did not answer for this claim")})
		case claimErr != nil:
			failed = append(failed, &ClaimError{Claim: claim.NamespacedName, Err: claimErr})
		}
	}
	return failed
}

// AllocatedDevices returns the claim's allocation results of one driver.
func AllocatedDevices(claim *resourcev1.ResourceClaim, driverName string) []resourcev1.DeviceRequestAllocationResult {
	if claim.Status.Allocation == nil {
		return nil
	}
	var out []resourcev1.DeviceRequestAllocationResult
	for _, result := range claim.Status.Allocation.Devices.Results {
		if result.Driver == driverName {
			out = append(out, result)
		}
	}
	return out
}
