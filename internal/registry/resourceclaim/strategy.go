// Package resourceclaim holds the behaviour (strategy) and the storage of
// ResourceClaims: namespaced requests for devices. Users own the spec; the
// control plane owns the status (allocation, reservations, device status).
package resourceclaim

import (
	"context"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcev1beta1 "github.com/draplane/draplane/apis/resource/v1beta1"
	"github.com/draplane/draplane/apis/resource/validation"
)

// claimStrategy implements create, update and delete of the main resource.
type claimStrategy struct {
	runtime.ObjectTyper
	names.NameGenerator
	adminAccess AdminAccess
}

// NewStrategy returns the strategy for ResourceClaims; typer must know the
// internal and external types of resource.draplane.dev. Admin access is
// checked against the namespaces of adminAccess.
func NewStrategy(typer runtime.ObjectTyper, adminAccess AdminAccess) claimStrategy {
	return claimStrategy{ObjectTyper: typer, NameGenerator: names.SimpleNameGenerator, adminAccess: adminAccess}
}

func (claimStrategy) NamespaceScoped() bool { return true }

// GetResetFields: writes to the main resource never change the status.
func (claimStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return resetFields(fieldpath.MakePathOrDie("status"))
}

// PrepareForCreate clears the status (only the control plane allocates)
// and drops the fields of feature gates that are off.
func (claimStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	claim := obj.(*resourceapi.ResourceClaim)
	claim.Status = resourceapi.ResourceClaimStatus{}
	claim.Generation = 1
	DropDisabledSpecFields(&claim.Spec, nil)
}

func (s claimStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	claim := obj.(*resourceapi.ResourceClaim)
	errs := validation.ValidateResourceClaim(claim)
	return append(errs, s.adminAccess.ValidateSpec(ctx, claim.Namespace, &claim.Spec, field.NewPath("spec"))...)
}

func (claimStrategy) WarningsOnCreate(ctx context.Context, obj runtime.Object) []string { return nil }

func (claimStrategy) Canonicalize(obj runtime.Object) {}

func (claimStrategy) AllowCreateOnUpdate(ctx context.Context) bool { return false }

// PrepareForUpdate keeps the stored status (it changes only through the
// status subresource) and drops the fields of feature gates that are off
// unless the stored spec uses them.
func (claimStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	claim := obj.(*resourceapi.ResourceClaim)
	oldClaim := old.(*resourceapi.ResourceClaim)
	claim.Status = oldClaim.Status
	DropDisabledSpecFields(&claim.Spec, &oldClaim.Spec)
}

func (s claimStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	claim := obj.(*resourceapi.ResourceClaim)
	oldClaim := old.(*resourceapi.ResourceClaim)
	errs := validation.ValidateResourceClaimUpdate(claim, oldClaim)
	if len(validation.ValidateQuantityMagnitudes(claim, nil)) > 0 {
		return errs // comparing the specs would run for minutes
	}
	errs = append(errs, s.adminAccess.ValidateSpecUpdate(ctx, claim.Namespace, &claim.Spec, &oldClaim.Spec, field.NewPath("spec"))...)
	return append(errs, immutableSpec(claim.Spec, oldClaim.Spec, errs)...)
}

// immutableSpec reports a changed spec unless validation already reported
// something about it. The spec is what allocation was computed from, so it
// can never change under an allocation.
func immutableSpec(spec, oldSpec resourceapi.ResourceClaimSpec, reported field.ErrorList) field.ErrorList {
	specPath := field.NewPath("spec")
	if apiequality.Semantic.DeepEqual(spec, oldSpec) {
		return nil
	}
	for _, err := range reported {
		if err.Field == specPath.String() {
			return nil
		}
	}
	return field.ErrorList{field.Invalid(specPath, "<spec>", "field is immutable")}
}

func (claimStrategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}

func (claimStrategy) AllowUnconditionalUpdate(ctx context.Context) bool { return true }

// statusStrategy implements updates through the status subresource.
type statusStrategy struct {
	claimStrategy
}

// NewStatusStrategy returns the strategy of the status subresource.
func NewStatusStrategy(typer runtime.ObjectTyper, adminAccess AdminAccess) statusStrategy {
	return statusStrategy{NewStrategy(typer, adminAccess)}
}

// GetResetFields: status writes never change the spec or metadata.
func (statusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return resetFields(fieldpath.MakePathOrDie("spec"), fieldpath.MakePathOrDie("metadata"))
}

// PrepareForUpdate keeps the stored spec and metadata, drops the status
// of devices that this write deallocates and the status fields of feature
// gates that are off (unless the stored status uses them).
func (statusStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	claim := obj.(*resourceapi.ResourceClaim)
	oldClaim := old.(*resourceapi.ResourceClaim)
	claim.Spec = oldClaim.Spec
	metav1.ResetObjectMetaForStatus(claim, oldClaim)
	dropDeallocatedDeviceStatus(claim, oldClaim)
	dropDisabledStatusFields(claim, oldClaim)
}

func (s statusStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	claim, oldClaim := obj.(*resourceapi.ResourceClaim), old.(*resourceapi.ResourceClaim)
	errs := validation.ValidateResourceClaimStatusUpdate(claim, oldClaim)
	return append(errs, s.adminAccess.ValidateStatusUpdate(ctx, claim, oldClaim)...)
}

func (statusStrategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}

// allocatedDevice identifies one allocation of a device; shareID separates
// the allocations of a device that allows several.
type allocatedDevice struct{ driver, pool, device, shareID string }

func resultKey(result resourceapi.DeviceRequestAllocationResult) allocatedDevice {
	key := allocatedDevice{driver: result.Driver, pool: result.Pool, device: result.Device}
	if result.ShareID != nil {
		key.shareID = string(*result.ShareID)
	}
	return key
}

// dropDeallocatedDeviceStatus removes the status.devices entries of devices
// that the old claim held and the new one does not: whoever deallocates
// need not clean up after the drivers. Entries for devices the claim never
// held are left for validation to refuse, so that a driver learns its
// status was not recorded instead of losing it silently.
func dropDeallocatedDeviceStatus(claim, oldClaim *resourceapi.ResourceClaim) {
	if len(claim.Status.Devices) == 0 || oldClaim.Status.Allocation == nil {
		return
	}
	deallocated := map[allocatedDevice]bool{}
	for _, result := range oldClaim.Status.Allocation.Devices.Results {
		deallocated[resultKey(result)] = true
	}
	if claim.Status.Allocation != nil {
		for _, result := range claim.Status.Allocation.Devices.Results {
			delete(deallocated, resultKey(result))
		}
	}
	if len(deallocated) == 0 {
		return
	}
	kept := claim.Status.Devices[:0]
	for _, device := range claim.Status.Devices {
		key := allocatedDevice{driver: device.Driver, pool: device.Pool, device: device.Device}
		if device.ShareID != nil {
			key.shareID = *device.ShareID
		}
		if !deallocated[key] {
			kept = append(kept, device)
		}
	}
	if len(kept) == 0 {
		kept = nil
	}
	claim.Status.Devices = kept
}

// resetFields returns the same field set for every served version.
func resetFields(paths ...fieldpath.Path) map[fieldpath.APIVersion]*fieldpath.Set {
	set := fieldpath.NewSet(paths...)
	return map[fieldpath.APIVersion]*fieldpath.Set{
		fieldpath.APIVersion(resourcev1.SchemeGroupVersion.String()):      set,
		fieldpath.APIVersion(resourcev1beta1.SchemeGroupVersion.String()): set,
	}
}

// ClaimState summarises a claim for humans: pending, allocated,
// allocated,reserved, with ,deleted appended while it is being deleted.
func ClaimState(claim *resourceapi.ResourceClaim) string {
	state := "pending"
	if claim.Status.Allocation != nil {
		state = "allocated"
		if len(claim.Status.ReservedFor) > 0 {
			state += ",reserved"
		}
	}
	if claim.DeletionTimestamp != nil {
		state += ",deleted"
	}
	return state
}
